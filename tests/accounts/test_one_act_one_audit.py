"""An act has one audit shape whichever door it came through: the JSON API, the cabinet's pages
or the admin each call the same service, and the event names the user it happened to and the
user who acted."""

from __future__ import annotations

from typing import Any

import pyotp
import pytest
from django.test import Client

from accounts.models import AuditEvent, Passkey, Session, User
from accounts.services.factors import factors_settle
from tests.accounts.confirmations import start_enabling
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner: User) -> Client:
    client = Client()
    response = client.post("/login", {"login": owner.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302  # signed in (to /welcome: the profile has no phone)
    return client


def events(kind: str) -> list[tuple[str, str | None]]:
    return [
        (event.user.username if event.user else "", event.actor.username if event.actor else None)
        for event in AuditEvent.objects.filter(kind=kind).select_related("user", "actor")
    ]


def test_disabling_an_adapter_records_its_owner_as_actor_through_the_api(
    cabinet: ApiClient, adapter: User
) -> None:
    response = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"active": False})

    assert response.status_code == 200
    assert events("ACCOUNT_DISABLED") == [("erp", "owner")]


def test_disabling_an_adapter_records_its_owner_as_actor_in_the_cabinet(
    browser: Client, adapter: User
) -> None:
    response = browser.post(f"/bus/adapters/{adapter.pk}/disable")

    assert response.status_code == 302
    assert events("ACCOUNT_DISABLED") == [("erp", "owner")]


def test_ending_an_adapters_sessions_in_the_cabinet_is_audited_as_the_admin_does(
    browser: Client, consumer: ApiClient, adapter: User, admin_client: Any, admin_user: User
) -> None:
    assert browser.post(f"/bus/adapters/{adapter.pk}/revoke").status_code == 302
    consumer.sign_in(adapter.username)
    admin_client.post(
        "/admin/accounts/user/", {"action": "revoke_sessions", "_selected_action": [adapter.pk]}
    )

    assert events("SESSION_REVOKED") == [("erp", "owner"), ("erp", admin_user.username)]
    assert not Session.objects.filter(user=adapter, revoked_at__isnull=True).exists()


def test_switching_from_sms_codes_to_the_app_is_one_event_saying_the_factor_was_replaced(
    clock: Any,
) -> None:
    pending = start_enabling("a")
    assert pending.confirm(pending.code()).status_code == 200
    person = User.objects.get(phone=pending.address)
    started = pending.client.call("post", "/api/users/two-factor-authentication/totp").json()

    switched = pending.client.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started["requestId"], "token": pyotp.TOTP(started["secret"]).now()},
    )

    assert switched.status_code == 200, switched.json()
    assert list(
        AuditEvent.objects.filter(user=person)
        .exclude(kind="SIGN_IN")
        .order_by("pk")
        .values_list("kind", "details")
    ) == [
        ("TWO_FACTOR_ENABLED", {"method": "SMS"}),
        ("TWO_FACTOR_CHANGED", {"method": "TOTP", "replaced": "SMS"}),
    ]
    browser = Client()
    browser.force_login(person)
    page = browser.get("/settings/security").content.decode()
    assert page.count("Two-factor sign-in enabled") == 1
    assert page.count("Second factor replaced") == 1


def test_a_code_factor_added_and_removed_beside_a_passkey_is_audited_as_a_factor(clock):
    """Two-factor sign-in was on (by the passkey) and stays on: the SMS codes are a factor added,
    then removed, not two-factor sign-in turned on and off."""
    pending = start_enabling("b")
    person = User.objects.get(phone=pending.address)
    Passkey.objects.create(user=person, credential_id=b"phone", public_key=b"key", name="Phone")
    factors_settle(person)

    assert pending.confirm(pending.code()).status_code == 200
    removed = pending.client.call(
        "delete", "/api/users/two-factor-authentication", {"password": DEFAULT_PASSWORD}
    )

    assert removed.status_code == 200, removed.json()
    assert User.objects.get(pk=person.pk).two_factor_enabled
    assert list(
        AuditEvent.objects.filter(user=person)
        .exclude(kind="SIGN_IN")
        .order_by("pk")
        .values_list("kind", "details")
    ) == [("FACTOR_ADDED", {"method": "SMS"}), ("FACTOR_REMOVED", {"method": "SMS"})]
