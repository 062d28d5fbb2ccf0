"""Signing in a cabinet user by e-mail: every outcome of seed table 3.2, and the order in which
the flow checks them (contract section 3)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from accounts import sms
from accounts.models import Challenge, OutboxMessage, Session, User
from tests.accounts.api import PHONE, SIGNED_IN_FIELDS, T0, by_email, by_username, outcome
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def lock(email: str) -> None:
    for _ in range(5):
        assert by_email(email, "wrong password").status_code == 401


def messages_to(address: str) -> list[str]:
    return list(
        OutboxMessage.objects.filter(to__iexact=address)
        .order_by("pk")
        .values_list("template", flat=True)
    )


def test_a_confirmed_user_without_flags_gets_200_with_the_pair_and_user_dto():
    user = UserFactory.create(username="ada", email="ada@example.com", phone=PHONE)

    response = by_email("ada@example.com")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == SIGNED_IN_FIELDS
    assert body["userDto"] == {
        "id": user.pk,
        "kind": "USER",
        "email": "ada@example.com",
        "username": "ada",
        "firstName": "Ada",
        "lastName": "Lovelace",
        "phone": PHONE,
        "emailConfirmed": True,
        "twoFactorEnabled": False,
        "profileIncompleted": False,
        "resetPasswordRequired": False,
        "roles": ["USER"],
    }
    assert Session.objects.filter(user=user, revoked_at__isnull=True).count() == 1
    assert OutboxMessage.objects.count() == 0
    assert sms.outbox == []


def test_a_locked_account_gets_423_with_locked_until_even_for_the_right_password(settings):
    settings.ACCOUNTS_LOCKOUT_SECONDS = 900
    UserFactory.create(email="ada@example.com")

    with time_machine.travel(T0, tick=False):
        lock("ada@example.com")
        response = by_email("ada@example.com")

    assert response.status_code == 423
    assert response.json() == {
        "type": "about:blank",
        "title": "Locked",
        "status": 423,
        "detail": "Too many wrong passwords: the account is locked until lockedUntil.",
        "code": "ACCOUNT_LOCKED",
        "lockedUntil": "2026-11-21T09:15:00Z",
    }
    with time_machine.travel(T0 + timedelta(seconds=901), tick=False):
        assert by_email("ada@example.com").status_code == 200


@pytest.mark.parametrize(
    ("email", "password"),
    [
        ("ada@example.com", "wrong password"),
        ("ada@example.com", DEFAULT_PASSWORD.upper()),  # the password exactly as typed
        ("nobody@example.com", DEFAULT_PASSWORD),
    ],
    ids=["wrong-password", "password-in-another-case", "unknown-email"],
)
def test_a_wrong_password_or_unknown_email_gets_the_same_401_bad_credentials(email, password):
    UserFactory.create(email="ada@example.com")

    response = by_email(email, password)

    assert response.status_code == 401
    assert response.json() == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The login or password is wrong.",
        "code": "BAD_CREDENTIALS",
    }


def test_the_email_matches_whatever_its_case():
    UserFactory.create(email="Ada@Example.com")

    assert by_email("aDA@eXAMPLE.COM").status_code == 200


def test_a_disabled_account_gets_403_account_disabled():
    UserFactory.create(email="ada@example.com", is_active=False)

    response = by_email("ada@example.com")

    assert outcome(response) == (403, "ACCOUNT_DISABLED")
    assert response.json()["detail"] == "The account is disabled."


def test_an_account_past_its_expiry_gets_403_account_expired():
    UserFactory.create(
        email="ada@example.com", account_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert outcome(by_email("ada@example.com")) == (403, "ACCOUNT_EXPIRED")


def test_an_account_expiring_in_the_future_signs_in():
    UserFactory.create(
        email="ada@example.com", account_expires_at=timezone.now() + timedelta(days=1)
    )

    assert by_email("ada@example.com").status_code == 200


def test_an_unconfirmed_email_gets_409_with_request_id_and_a_registration_code_emailed(settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    user = UserFactory.create(email="ada@example.com", email_confirmed=False)

    response = by_email("ada@example.com")

    assert response.status_code == 409
    body = response.json()
    assert body == {
        "type": "about:blank",
        "title": "Conflict",
        "status": 409,
        "detail": "Confirm the e-mail address first: a code was sent; "
        "continue with /api/auth/register/verify-email/confirm.",
        "code": "EMAIL_NOT_CONFIRMED",
        "requestId": body["requestId"],
        "retryAfterSeconds": 60,
    }
    challenge = Challenge.objects.get(pk=body["requestId"])
    assert (challenge.purpose, challenge.method, challenge.user) == (
        "REGISTRATION",
        "EMAIL",
        user,
    )
    assert messages_to("ada@example.com") == ["registration_code"]
    assert re.fullmatch(r"\d{6}", last_code("ada@example.com"))
    assert not Session.objects.filter(user=user).exists()


def test_a_second_sign_in_within_the_cooldown_gets_the_same_request_id_and_sends_nothing_new(
    settings,
):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    UserFactory.create(email="ada@example.com", email_confirmed=False)

    with time_machine.travel(T0, tick=False):
        first = by_email("ada@example.com").json()
    with time_machine.travel(T0 + timedelta(seconds=20), tick=False):
        second = by_email("ada@example.com").json()

    assert second["code"] == "EMAIL_NOT_CONFIRMED"
    assert second["requestId"] == first["requestId"]
    assert (first["retryAfterSeconds"], second["retryAfterSeconds"]) == (60, 40)
    assert messages_to("ada@example.com") == ["registration_code"]
    assert Challenge.objects.count() == 1


def test_a_sign_in_after_the_cooldown_emails_a_new_code(settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    UserFactory.create(email="ada@example.com", email_confirmed=False)

    with time_machine.travel(T0, tick=False):
        first = by_email("ada@example.com").json()
    with time_machine.travel(T0 + timedelta(seconds=61), tick=False):
        second = by_email("ada@example.com").json()

    assert second["code"] == "EMAIL_NOT_CONFIRMED"
    assert second["requestId"] != first["requestId"]
    assert second["retryAfterSeconds"] == 60
    assert messages_to("ada@example.com") == ["registration_code", "registration_code"]


def test_a_sign_in_right_after_registering_answers_with_the_registration_challenge(settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    password = "a-long-and-unusual-passphrase"
    client = ApiClient(device_id="browser")
    registered = client.call(
        "post",
        "/api/auth/register",
        {"email": "ada@example.com", "password": password, "confirmPassword": password},
    ).json()

    response = by_email("ada@example.com", password)

    assert outcome(response) == (409, "EMAIL_NOT_CONFIRMED")
    assert response.json()["requestId"] == registered["requestId"]
    assert 1 <= response.json()["retryAfterSeconds"] <= 60
    assert messages_to("ada@example.com") == ["registration_code"]


def test_the_code_of_the_409_confirms_the_email_and_signs_in():
    user = UserFactory.create(email="ada@example.com", email_confirmed=False)
    started = by_email("ada@example.com").json()

    confirmed = ApiClient(device_id="browser").call(
        "post",
        "/api/auth/register/verify-email/confirm",
        {"requestId": started["requestId"], "token": last_code("ada@example.com")},
    )

    assert confirmed.status_code == 200, confirmed.json()
    assert list(confirmed.json()) == SIGNED_IN_FIELDS
    assert confirmed.json()["userDto"]["emailConfirmed"] is True
    user.refresh_from_db()
    assert user.email_confirmed is True
    assert by_email("ada@example.com").status_code == 200


def test_credentials_expired_by_an_administrator_get_401_action_reset_password():
    UserFactory.create(
        email="ada@example.com", credentials_expire_at=timezone.now() - timedelta(seconds=1)
    )

    response = by_email("ada@example.com")

    assert outcome(response) == (401, "ACTION_RESET_PASSWORD")
    assert response.json()["detail"] == "The password has expired: reset it to sign in again."
    assert not Session.objects.exists()


def test_credentials_expiring_in_the_future_still_sign_in():
    UserFactory.create(
        email="ada@example.com", credentials_expire_at=timezone.now() + timedelta(hours=1)
    )

    assert by_email("ada@example.com").status_code == 200


@pytest.mark.parametrize(
    ("age_days", "expected"),
    [(31, (401, "ACTION_RESET_PASSWORD")), (29, (200, ""))],
    ids=["older-than-max-age", "younger-than-max-age"],
)
def test_the_password_max_age_setting_expires_old_credentials(settings, age_days, expected):
    settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS = 30
    UserFactory.create(
        email="ada@example.com", password_changed_at=timezone.now() - timedelta(days=age_days)
    )

    assert outcome(by_email("ada@example.com")) == expected


def test_a_password_max_age_of_zero_never_expires_credentials(settings):
    settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS = 0
    UserFactory.create(
        email="ada@example.com", password_changed_at=timezone.now() - timedelta(days=3650)
    )

    assert by_email("ada@example.com").status_code == 200


def test_two_factor_gets_428_with_request_id_and_an_sms_code_sent_after_commit(
    django_capture_on_commit_callbacks,
):
    user = UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = by_email("ada@example.com")

    assert response.status_code == 428
    body = response.json()
    assert body == {
        "type": "about:blank",
        "title": "Precondition Required",
        "status": 428,
        "detail": "Enter the code sent by SMS: continue with /api/auth/login/two-factor/confirm.",
        "code": "TWO_FACTOR_REQUIRED",
        "requestId": body["requestId"],
        "confirmMethod": "SMS",
        "retryAfterSeconds": 60,
    }
    assert len(callbacks) == 1
    [(to, text)] = sms.outbox
    assert to == PHONE
    assert re.search(r"\b\d{6}\b", text)
    challenge = Challenge.objects.get(pk=body["requestId"])
    assert (challenge.purpose, challenge.method, challenge.user, challenge.address) == (
        "SIGN_IN",
        "SMS",
        user,
        PHONE,
    )
    assert OutboxMessage.objects.get().status == "SENT"
    assert not Session.objects.filter(user=user).exists()


def test_the_sms_is_not_sent_before_the_transaction_commits():
    UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)

    assert by_email("ada@example.com").status_code == 428

    assert sms.outbox == []
    assert OutboxMessage.objects.get().status == "PENDING"


def test_the_sms_code_of_the_428_finishes_the_sign_in_with_200(
    django_capture_on_commit_callbacks,
):
    user = UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)
    with django_capture_on_commit_callbacks(execute=True):
        started = by_email("ada@example.com").json()
    [(_, text)] = sms.outbox
    code = re.search(r"\b(\d{6})\b", text).group(1)  # type: ignore[union-attr]

    response = ApiClient(device_id="browser").call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": started["requestId"], "token": code},
    )

    assert response.status_code == 200, response.json()
    assert list(response.json()) == SIGNED_IN_FIELDS
    assert response.json()["userDto"]["twoFactorEnabled"] is True
    assert response.json()["userDto"]["roles"] == ["USER"]
    assert Session.objects.filter(user=user, revoked_at__isnull=True).count() == 1
    client = ApiClient(device_id="browser")
    client.tokens = response.json()
    assert client.call("get", "/api/users/me").json()["id"] == user.pk


def test_a_sign_in_within_the_cooldown_of_a_pending_two_factor_code_sends_no_second_sms(
    django_capture_on_commit_callbacks,
):
    UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)

    with django_capture_on_commit_callbacks(execute=True):
        first = by_email("ada@example.com").json()
        second = by_email("ada@example.com").json()

    assert second["requestId"] == first["requestId"]
    assert len(sms.outbox) == 1


def test_an_account_disabled_between_the_428_and_the_code_gets_403():
    user = UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)
    started = by_email("ada@example.com").json()
    User.objects.filter(pk=user.pk).update(is_active=False)

    response = ApiClient(device_id="browser").call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": started["requestId"], "token": last_code(PHONE)},
    )

    assert outcome(response) == (403, "ACCOUNT_DISABLED")
    assert not Session.objects.exists()


def test_sign_in_by_username_follows_the_same_order_for_a_cabinet_user():
    UserFactory.create(username="ada", email="ada@example.com", email_confirmed=False)

    response = by_username("ada")

    assert outcome(response) == (409, "EMAIL_NOT_CONFIRMED")
    assert Challenge.objects.get(pk=response.json()["requestId"]).purpose == "REGISTRATION"
    assert messages_to("ada@example.com") == ["registration_code"]


# --- The order: when several conditions hold, the first in seed table 3.2 answers. ---------------

LONG_AGO = timedelta(days=1)


def state(name: str) -> dict[str, Any]:
    now = timezone.now()
    states: dict[str, dict[str, Any]] = {
        "unconfirmed": {"email_confirmed": False},
        "disabled": {"is_active": False},
        "expired": {"account_expires_at": now - LONG_AGO},
        "credentials-expired": {"credentials_expire_at": now - LONG_AGO},
        "two-factor": {"two_factor_enabled": True, "phone": PHONE},
    }
    return states[name]


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["unconfirmed", "two-factor"], (409, "EMAIL_NOT_CONFIRMED")),
        (["disabled", "two-factor"], (403, "ACCOUNT_DISABLED")),
        (["disabled", "unconfirmed"], (403, "ACCOUNT_DISABLED")),
        (["expired", "unconfirmed"], (403, "ACCOUNT_EXPIRED")),
        (["expired", "credentials-expired"], (403, "ACCOUNT_EXPIRED")),
        (["unconfirmed", "credentials-expired"], (409, "EMAIL_NOT_CONFIRMED")),
        (["credentials-expired", "two-factor"], (401, "ACTION_RESET_PASSWORD")),
        (
            ["disabled", "expired", "unconfirmed", "credentials-expired", "two-factor"],
            (403, "ACCOUNT_DISABLED"),
        ),
    ],
    ids=lambda value: "+".join(value) if isinstance(value, list) else None,
)
def test_the_first_condition_in_the_seed_order_answers(states, expected):
    fields: dict[str, Any] = {}
    for name in states:
        fields.update(state(name))
    UserFactory.create(email="ada@example.com", **fields)

    assert outcome(by_email("ada@example.com")) == expected


@pytest.mark.parametrize(
    "states",
    [["unconfirmed"], ["disabled"], ["two-factor"], ["credentials-expired"], ["expired"]],
    ids=lambda value: "+".join(value),
)
def test_a_locked_account_gets_423_whatever_else_holds(states):
    fields: dict[str, Any] = {}
    for name in states:
        fields.update(state(name))
    UserFactory.create(email="ada@example.com", **fields)
    lock("ada@example.com")

    response = by_email("ada@example.com")

    assert outcome(response) == (423, "ACCOUNT_LOCKED")
    assert "lockedUntil" in response.json()
    assert OutboxMessage.objects.count() == 0
    assert Challenge.objects.count() == 0


def test_a_locked_account_with_an_unconfirmed_email_gets_423_and_no_email():
    UserFactory.create(email="ada@example.com", email_confirmed=False)
    lock("ada@example.com")

    assert outcome(by_email("ada@example.com")) == (423, "ACCOUNT_LOCKED")
    assert messages_to("ada@example.com") == []


def test_a_wrong_password_on_an_unconfirmed_account_gets_401_and_no_email():
    UserFactory.create(email="ada@example.com", email_confirmed=False)

    assert outcome(by_email("ada@example.com", "wrong password")) == (401, "BAD_CREDENTIALS")
    assert messages_to("ada@example.com") == []
    assert Challenge.objects.count() == 0


def test_a_wrong_password_on_a_two_factor_account_gets_401_and_no_sms(
    django_capture_on_commit_callbacks,
):
    UserFactory.create(email="ada@example.com", phone=PHONE, two_factor_enabled=True)

    with django_capture_on_commit_callbacks(execute=True):
        response = by_email("ada@example.com", "wrong password")

    assert outcome(response) == (401, "BAD_CREDENTIALS")
    assert sms.outbox == []
    assert Challenge.objects.count() == 0


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["disabled"], (401, "BAD_CREDENTIALS")),
        (["expired"], (401, "BAD_CREDENTIALS")),
        (["credentials-expired"], (401, "BAD_CREDENTIALS")),
    ],
    ids=lambda value: "+".join(value) if isinstance(value, list) else None,
)
def test_the_account_state_is_told_only_to_the_right_password(states, expected):
    fields: dict[str, Any] = {}
    for name in states:
        fields.update(state(name))
    UserFactory.create(email="ada@example.com", **fields)

    assert outcome(by_email("ada@example.com", "wrong password")) == expected
