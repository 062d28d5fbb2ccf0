"""Deleting one's account through the API (docs/users-api.md, "Deleting your account"), and
from the admin: what goes, what stays, what the audit keeps, and the proofs it takes."""

from __future__ import annotations

from typing import Any

import pyotp
import pytest
from django.test import Client

from accounts.models import AuditEvent, OutboxMessage, Session, User
from accounts.services.deletion import pseudonym_of
from exchange.models import Message, Route, Subscription, Topic, Webhook
from exchange.services.routes import route_grant
from exchange.services.sending import message_send
from exchange.services.topics import subscription_put, topic_create
from exchange.services.webhooks import webhook_put
from tests.accounts.api import outcome, signed_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL)


def deleted(client: Any, **body: Any) -> Any:
    return client.call("delete", "/api/users/me", body)


def test_without_the_password_nothing_is_deleted(grace):
    client = signed_in(EMAIL)  # a fresh sign-in does not spare the password

    missing = deleted(client)
    wrong = deleted(client, password="not-it")

    assert outcome(missing) == (400, "VALIDATION_FAILED")  # a required member
    assert "password" in missing.json()["errors"]
    assert outcome(wrong) == (401, "BAD_CREDENTIALS")
    assert User.objects.filter(pk=grace.pk).exists()


def test_with_a_second_factor_its_proof_is_needed_too(grace):
    client = signed_in(EMAIL)
    started = client.call("post", "/api/users/two-factor-authentication/totp").json()
    secret = started["secret"]
    client.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started["requestId"], "token": pyotp.TOTP(secret).now()},
    )

    password_only = deleted(client, password=DEFAULT_PASSWORD)
    wrong_code = deleted(client, password=DEFAULT_PASSWORD, token="000000")

    assert outcome(password_only) == (403, "REAUTHENTICATION_REQUIRED")
    assert outcome(wrong_code) == (400, "CODE_INVALID")
    assert User.objects.filter(pk=grace.pk).exists()
    # A recovery code is a proof of the factor as well.
    codes = client.call(
        "post",
        "/api/users/two-factor-authentication/recovery-codes",
        {"password": DEFAULT_PASSWORD},
    ).json()["recoveryCodes"]
    done = deleted(client, password=DEFAULT_PASSWORD, token=codes[0])
    assert done.status_code == 200, done.json()
    assert not User.objects.filter(pk=grace.pk).exists()


def test_the_account_goes_with_its_adapters_and_what_they_had(grace):
    erp, crm = AdapterFactory.create(owner=grace), AdapterFactory.create(owner=grace)
    partner_owner = UserFactory.create(email="partner@example.com")
    partner = AdapterFactory.create(owner=partner_owner)
    route_grant(recipient=partner, sender_id=erp.pk, granted_by=partner_owner)
    route_grant(recipient=crm, sender_id=partner.pk, granted_by=grace)
    sent = message_send(
        sender=erp, to=partner.pk, type="order", payload={"n": 1}, headers={}, idempotency_key=None
    )
    message_send(
        sender=partner, to=crm.pk, type="order", payload={"n": 2}, headers={}, idempotency_key=None
    )
    webhook_put(adapter=crm, url="https://hooks.example.org/crm")
    topic = topic_create(owner=grace, name="prices")
    subscription_put(user=grace, topic=topic, adapter_id=erp.pk, types=None)
    client = signed_in(EMAIL)

    response = deleted(client, password=DEFAULT_PASSWORD)

    assert response.status_code == 200, response.json()
    assert not User.objects.filter(pk__in=[grace.pk, erp.pk, crm.pk]).exists()
    assert not Route.objects.filter(recipient=partner).exists()
    assert not Route.objects.filter(sender=partner).exists()
    assert not Webhook.objects.exists()
    assert not Topic.objects.exists()
    assert not Subscription.objects.exists()
    # The message the adapter sent waits in its recipient's queue; the one to it is gone.
    assert list(Message.objects.values_list("message_id", flat=True)) == [sent.message_id]
    assert not Session.objects.filter(user_id=grace.pk).exists()
    assert outcome(client.call("get", "/api/users/me"))[0] == 401
    assert User.objects.filter(pk__in=[partner.pk, partner_owner.pk]).count() == 2


def test_the_audit_keeps_its_events_under_a_pseudonym_and_the_address_is_free(grace):
    grace_id = grace.pk
    client = signed_in(EMAIL)
    signed_in_events = AuditEvent.objects.filter(user=grace).count()

    deleted(client, password=DEFAULT_PASSWORD)

    events = AuditEvent.objects.filter(identifier=pseudonym_of(grace_id))
    assert events.count() == signed_in_events + 1
    assert set(events.values_list("user", flat=True)) == {None}
    assert events.filter(kind="ACCOUNT_DELETED").exists()
    assert not AuditEvent.objects.filter(identifier__icontains="grace").exists()
    # A last e-mail to the address, and nothing else kept for it.
    assert list(OutboxMessage.objects.filter(to=EMAIL).values_list("template", flat=True)) == [
        "notice_account_deleted"
    ]
    again = Client().post(
        "/api/auth/register",
        {
            "email": EMAIL,
            "password": "a-long-and-unusual-passphrase",
            "confirmPassword": "a-long-and-unusual-passphrase",
        },
        content_type="application/json",
    )
    assert again.status_code == 200, again.json()


def test_an_administrator_deletes_an_account_from_the_admin(grace, admin_client, admin_user):
    AdapterFactory.create(owner=grace)

    response = admin_client.post(
        "/admin/accounts/user/",
        {"action": "delete_selected", "_selected_action": [grace.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not User.objects.filter(pk=grace.pk).exists()
    event = AuditEvent.objects.get(kind="ACCOUNT_DELETED")
    assert (event.actor_id, event.identifier) == (admin_user.pk, pseudonym_of(grace.pk))
