"""Administrators see the queues, sessions and routes, and act through the services."""

from __future__ import annotations

import pytest

from accounts.models import Session, SignInGate
from exchange.models import DeadLetter, Message, Route, Subscription, Topic
from tests.conftest import ApiClient
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "/admin/accounts/user/",
        "/admin/accounts/session/",
        "/admin/accounts/signingate/",
        "/admin/exchange/message/",
        "/admin/exchange/deadletter/",
        "/admin/exchange/route/",
        "/admin/axes/accessattempt/",
    ],
)
def test_admin_pages_render(admin_client, adapter, consumer, path):
    Message.objects.create(recipient=adapter, type="t", payload={})

    assert admin_client.get(path).status_code == 200


def test_revoking_sessions_in_the_admin_ends_them_at_once(admin_client, adapter, consumer):
    admin_client.post(
        "/admin/accounts/user/", {"action": "revoke_sessions", "_selected_action": [adapter.pk]}
    )

    assert consumer.call("get", "/api/exchange/whoami").json()["code"] == "TOKEN_REVOKED"
    assert Session.objects.get().revoked_reason == "admin"


def test_unlocking_in_the_admin_clears_the_lock(admin_client, adapter):
    for _ in range(5):
        ApiClient().sign_in("erp", "wrong")

    admin_client.post(
        "/admin/accounts/user/", {"action": "unlock", "_selected_action": [adapter.pk]}
    )

    assert not SignInGate.objects.exists()
    assert ApiClient().sign_in("erp").status_code == 200


def test_disabling_in_the_admin_ends_sessions(admin_client, adapter, consumer):
    admin_client.post(
        "/admin/accounts/user/", {"action": "disable", "_selected_action": [adapter.pk]}
    )

    adapter.refresh_from_db()
    assert adapter.is_active is False
    assert consumer.call("get", "/api/exchange/whoami").status_code == 401


def test_rotating_an_adapter_password_in_the_admin_shows_it_once(admin_client, adapter, consumer):
    response = admin_client.post(
        "/admin/accounts/user/",
        {"action": "rotate_adapter_password", "_selected_action": [adapter.pk]},
        follow=True,
    )

    [message] = [str(m) for m in response.context["messages"]]
    password = message.rsplit(" ", 1)[-1]
    assert ApiClient(device_id="x").sign_in("erp", password).status_code == 200
    assert consumer.call("get", "/api/exchange/whoami").status_code == 401


def test_redriving_dead_letters_in_the_admin(admin_client, adapter):
    DeadLetter.objects.create(
        message_id="00000000-0000-0000-0000-0000000000aa",
        recipient=adapter,
        type="t",
        payload={"n": 1},
        enqueued_at="2026-11-21T09:00:00Z",
        receive_count=10,
        reason="MAX_DELIVERIES",
    )

    response = admin_client.post(
        "/admin/exchange/deadletter/",
        {"action": "redrive", "_selected_action": [DeadLetter.objects.get().pk]},
        follow=True,
    )

    assert not DeadLetter.objects.exists()
    assert Message.objects.get().receive_count == 0
    assert "1 message back in its queue." in response.content.decode()


def test_routes_are_managed_in_the_admin(admin_client, adapter):
    stranger = AdapterFactory.create(owner=UserFactory.create(username="x", email="x@example.com"))

    response = admin_client.post(
        "/admin/exchange/route/add/",
        {"recipient": adapter.pk, "sender": stranger.pk, "granted_by": ""},
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Route.objects.filter(recipient=adapter, sender=stranger).exists()


def test_a_topic_is_shown_with_its_subscriptions_and_deleted_in_the_admin(admin_client, adapter):
    topic = Topic.objects.create(owner=adapter.owner, name="prices")
    Subscription.objects.create(topic=topic, adapter=adapter, types=["price.changed"])

    listed = admin_client.get("/admin/exchange/topic/")
    shown = admin_client.get(f"/admin/exchange/topic/{topic.pk}/change/")
    deleted = admin_client.post(f"/admin/exchange/topic/{topic.pk}/delete/", {"post": "yes"})

    assert listed.status_code == shown.status_code == 200
    assert b"prices" in listed.content
    assert b"price.changed" in shown.content
    assert deleted.status_code == 302
    assert not Topic.objects.exists()
    assert not Subscription.objects.exists()
