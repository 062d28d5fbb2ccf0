"""Factors that guard themselves (docs/sessions.md, "Reauthentication"), tried as an attacker
holding a stolen session would: turning a second factor off, replacing the app, new recovery
codes, removing a passkey and changing the e-mail need a fresh proof of the owner unless the
session began with a sign-in within ACCOUNTS_REAUTH_SECONDS; a proof that is sent is checked."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyotp
import pytest

from accounts.models import AuditEvent, Passkey, User
from tests.accounts.api import PHONE, outcome, signed_in
from tests.authenticator import SoftAuthenticator
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
STALE = timedelta(seconds=301)
TWO_FACTOR = "/api/users/two-factor-authentication"


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = ["http://localhost:8000"]


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL, phone=PHONE)


def app_on(client: ApiClient) -> str:
    """An authenticator app for the client's person: its secret."""
    started = client.call("post", f"{TWO_FACTOR}/totp").json()
    confirmed = client.call(
        "post",
        f"{TWO_FACTOR}/totp/confirm",
        {"requestId": started["requestId"], "token": pyotp.TOTP(started["secret"]).now()},
    )
    assert confirmed.status_code == 200, confirmed.json()
    return str(started["secret"])


def passkey_added(client: ApiClient, authenticator: SoftAuthenticator) -> str:
    started = client.call("post", "/api/users/passkeys/registration/options").json()
    created = client.call(
        "post",
        "/api/users/passkeys",
        {"requestId": started["requestId"], "credential": authenticator.create(started["options"])},
    )
    assert created.status_code == 201, created.json()
    return str(created.json()["passkeyId"])


# Each guarded request, as (method, path, body without a proof) for a client whose person has an
# app (so that there is something to turn off, replace and regenerate) and a passkey.
GUARDED: dict[str, Callable[[str], tuple[str, str, dict[str, Any]]]] = {
    "turn-off": lambda passkey: ("delete", TWO_FACTOR, {}),
    "replace-app": lambda passkey: ("post", f"{TWO_FACTOR}/totp", {}),
    "recovery-codes": lambda passkey: ("post", f"{TWO_FACTOR}/recovery-codes", {}),
    "remove-passkey": lambda passkey: ("delete", f"/api/users/passkeys/{passkey}", {}),
    "change-email": lambda passkey: ("post", "/api/users/me/email", {"newEmail": "g@example.org"}),
}
guarded = pytest.mark.parametrize("name", list(GUARDED), ids=list(GUARDED))


@pytest.fixture
def armed(grace: User, clock: Any) -> tuple[ApiClient, str, str]:
    """Grace signed in with an app and a passkey: the client, the app's secret, the passkey."""
    client = signed_in(EMAIL)
    secret = app_on(client)
    passkey = passkey_added(client, SoftAuthenticator())
    return client, secret, passkey


@guarded
def test_a_fresh_session_needs_no_proof(armed, name):
    client, _, passkey = armed
    method, path, body = GUARDED[name](passkey)

    response = client.call(method, path, body)

    assert response.status_code in (200, 201), response.json()


@guarded
def test_a_stale_session_without_a_proof_is_refused_and_changes_nothing(armed, clock, name):
    client, _, passkey = armed
    clock.shift(STALE)
    method, path, body = GUARDED[name](passkey)

    response = client.call(method, path, body)

    assert outcome(response) == (403, "REAUTHENTICATION_REQUIRED")
    grace = User.objects.get(email=EMAIL)
    assert (grace.code_factor, grace.two_factor_enabled) == ("TOTP", True)
    assert Passkey.objects.filter(pk=passkey).exists()


@guarded
def test_a_stale_session_with_the_password_goes_through(armed, clock, name):
    client, _, passkey = armed
    clock.shift(STALE)
    method, path, body = GUARDED[name](passkey)

    response = client.call(method, path, {**body, "password": DEFAULT_PASSWORD})

    assert response.status_code in (200, 201), response.json()


def test_a_refresh_does_not_make_a_session_fresh(armed, clock):
    client, _, _ = armed
    clock.shift(STALE)
    refreshed = client.refresh()
    assert refreshed.status_code == 200

    response = client.call("delete", TWO_FACTOR, {})

    assert outcome(response) == (403, "REAUTHENTICATION_REQUIRED")


def test_a_wrong_password_is_401_and_counts_toward_the_lock_even_in_a_fresh_session(armed):
    client, _, _ = armed

    answers = [client.call("delete", TWO_FACTOR, {"password": "guess"}) for _ in range(5)]

    assert [outcome(a) for a in answers[:4]] == [(401, "BAD_CREDENTIALS")] * 4
    assert outcome(answers[4])[0] == 401
    # The lock is the sign-in's: the right password no longer signs in.
    locked = ApiClient(device_id="other").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")
    assert User.objects.get(email=EMAIL).code_factor == "TOTP"
    # Audited as what it was, a proof of the owner refused, not a sign-in that failed.
    user = User.objects.get(email=EMAIL)
    refused = AuditEvent.objects.filter(user=user, kind=AuditEvent.Kind.REAUTHENTICATION_FAILED)
    assert refused.count() == 5
    assert not AuditEvent.objects.filter(user=user, kind=AuditEvent.Kind.SIGN_IN_FAILED).exists()


def test_the_apps_code_proves_the_owner_and_a_wrong_one_is_code_invalid(armed, clock):
    client, secret, _ = armed
    clock.shift(STALE)

    wrong = client.call("post", f"{TWO_FACTOR}/recovery-codes", {"token": "000000"})
    right = client.call("post", f"{TWO_FACTOR}/recovery-codes", {"token": pyotp.TOTP(secret).now()})

    assert outcome(wrong) == (400, "CODE_INVALID")
    assert "attemptsRemaining" in wrong.json()
    assert right.status_code == 200, right.json()
    assert len(right.json()["recoveryCodes"]) == 10


def test_a_recovery_code_proves_the_owner_once(armed, clock):
    client, _, _ = armed
    codes = client.call("post", f"{TWO_FACTOR}/recovery-codes").json()["recoveryCodes"]
    clock.shift(STALE)

    first = client.call("delete", TWO_FACTOR, {"token": codes[0]})

    assert first.status_code == 200, first.json()
    assert AuditEvent.objects.filter(kind="RECOVERY_CODE_USED").count() == 1


def test_a_passkeys_answer_proves_the_owner(grace, clock):
    client = signed_in(EMAIL)
    authenticator = SoftAuthenticator()
    first = passkey_added(client, authenticator)
    passkey_added(client, SoftAuthenticator())
    clock.shift(STALE)
    asked = client.call("post", "/api/users/me/reauthentication", {"method": "PASSKEY"}).json()
    assert asked["confirmMethod"] == "PASSKEY"

    removed = client.call(
        "delete",
        f"/api/users/passkeys/{first}",
        {"requestId": asked["requestId"], "credential": authenticator.get(asked["options"])},
    )

    assert removed.status_code == 200, removed.json()
    assert not Passkey.objects.filter(pk=first).exists()


def test_an_sms_code_proves_the_owner_with_its_request_id(grace, clock):
    client = signed_in(EMAIL)
    started = client.call("patch", TWO_FACTOR).json()
    client.call(
        "post",
        f"{TWO_FACTOR}/confirm",
        {"requestId": started["requestId"], "token": last_code(PHONE)},
    )
    clock.shift(STALE)
    asked = client.call("post", "/api/users/me/reauthentication", {}).json()
    assert (asked["confirmMethod"], asked["retryAfterSeconds"]) == ("SMS", 60)

    response = client.call(
        "delete", TWO_FACTOR, {"requestId": asked["requestId"], "token": last_code(PHONE)}
    )

    assert response.status_code == 200, response.json()
    assert response.json() == {"twoFactorEnabled": False}


def test_another_persons_challenge_proves_nothing(grace, clock):
    mallory = UserFactory.create(email="mallory@example.com", phone="+4915123456780")
    theirs = signed_in(mallory.email)
    started = theirs.call("patch", TWO_FACTOR).json()
    theirs.call(
        "post",
        f"{TWO_FACTOR}/confirm",
        {"requestId": started["requestId"], "token": last_code(mallory.phone)},
    )
    asked = theirs.call("post", "/api/users/me/reauthentication", {}).json()
    client = signed_in(EMAIL)
    app_on(client)
    clock.shift(STALE)

    response = client.call(
        "delete",
        TWO_FACTOR,
        {"requestId": asked["requestId"], "token": last_code(mallory.phone)},
    )

    assert outcome(response) == (400, "CODE_INVALID")
    assert User.objects.get(email=EMAIL).code_factor == "TOTP"


def test_turning_on_a_first_factor_needs_no_proof(grace, clock):
    client = signed_in(EMAIL)
    clock.shift(STALE)

    started = client.call("post", f"{TWO_FACTOR}/totp", {})

    assert started.status_code == 200, started.json()


def test_the_window_follows_the_setting(armed, clock, settings):
    client, _, _ = armed
    settings.ACCOUNTS_REAUTH_SECONDS = 30
    clock.shift(timedelta(seconds=31))

    response = client.call("post", f"{TWO_FACTOR}/recovery-codes", {})

    assert outcome(response) == (403, "REAUTHENTICATION_REQUIRED")
