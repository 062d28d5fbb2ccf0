"""Signing in by login or e-mail: the token pair and userDto, and every outcome in the order the
flow checks them (docs/sessions.md, "Signing in"; the problem bodies of docs/errors.md); when
several conditions hold, the first check that fails answers. The lock is in test_lockout.py; that
an unknown account answers and works like a wrong password, in test_enumeration.py.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from accounts import sms
from accounts.models import Challenge, OutboxMessage, Session, User
from tests.accounts.api import (
    PHONE,
    SIGNED_IN_FIELDS,
    T0,
    WayIn,
    by_email,
    by_username,
    outcome,
    state,
    ways_in,
)
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


def messages_to(address: str) -> list[str]:
    return list(
        OutboxMessage.objects.filter(to__iexact=address)
        .order_by("pk")
        .values_list("template", flat=True)
    )


# --- Signed in ------------------------------------------------------------------------------------


def test_an_adapter_signs_in_with_its_login_and_gets_the_pair_and_user_dto(adapter):
    response = by_username("erp", DEFAULT_PASSWORD)

    assert response.status_code == 200
    body = response.json()
    assert list(body) == SIGNED_IN_FIELDS
    assert body["userDto"] == {
        "id": adapter.pk,
        "kind": "ADAPTER",
        "email": "",
        "username": "erp",
        "firstName": "",
        "lastName": "",
        "phone": "",
        "emailConfirmed": True,
        "twoFactorEnabled": False,
        "twoFactorMethod": None,
        "recoveryCodesRemaining": 0,
        "profileIncompleted": False,
        "resetPasswordRequired": False,
        "roles": ["ADAPTER"],
    }


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
        "twoFactorMethod": None,
        "recoveryCodesRemaining": 0,
        "profileIncompleted": False,
        "resetPasswordRequired": False,
        "roles": ["USER"],
    }
    assert Session.objects.filter(user=user, revoked_at__isnull=True).count() == 1
    assert OutboxMessage.objects.count() == 0
    assert sms.outbox == []


@time_machine.travel(T0, tick=False)
def test_token_expiry_times_are_rfc3339_utc_and_follow_the_settings(adapter, settings):
    settings.JWT_ACCESS_TTL_SECONDS = 900
    settings.JWT_REFRESH_TTL_SECONDS = 3600

    body = by_username("erp", DEFAULT_PASSWORD).json()

    assert body["accessTokenExpiresAt"] == "2026-11-21T09:15:00Z"
    assert body["refreshTokenExpiresAt"] == "2026-11-21T10:00:00Z"


@pytest.mark.parametrize(
    ("stored", "typed"),
    [("owner@example.com", "OWNER@Example.COM"), ("Ada@Example.com", "aDA@eXAMPLE.COM")],
    ids=["stored-in-lower-case", "stored-in-mixed-case"],
)
def test_a_cabinet_user_signs_in_by_email_whatever_its_case(stored, typed):
    UserFactory.create(email=stored)

    response = by_email(typed)

    assert response.status_code == 200
    assert response.json()["userDto"]["roles"] == ["USER"]
    assert response.json()["userDto"]["profileIncompleted"] is True  # no phone yet


def test_sign_in_records_the_last_login(adapter):
    by_username("erp", DEFAULT_PASSWORD)

    adapter.refresh_from_db()
    assert adapter.last_login is not None


def test_a_malformed_device_id_is_a_400_naming_the_header(adapter):
    response = by_username("erp", DEFAULT_PASSWORD, HTTP_X_DEVICE_ID="x" * 129)

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "X-Device-ID": ["X-Device-ID must be 1 to 128 printable ASCII characters."]
    }


# --- Refused --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "identifier", "password"),
    [
        (by_username, "erp", "wrong password"),
        (by_username, "ERP", DEFAULT_PASSWORD),
        (by_username, "erp", DEFAULT_PASSWORD + " "),
        (by_username, "nobody-here", DEFAULT_PASSWORD),
        (by_email, "owner@example.com", "wrong password"),
        (by_email, "owner@example.com", DEFAULT_PASSWORD.upper()),
        (by_email, "nobody@example.com", DEFAULT_PASSWORD),
    ],
    ids=[
        "login-wrong-password",
        "login-in-another-case",  # a login is case-sensitive
        "password-with-a-space-more",  # the password exactly as typed
        "unknown-login",
        "email-wrong-password",
        "password-in-another-case",
        "unknown-email",
    ],
)
def test_a_wrong_password_or_an_unknown_account_gets_the_same_401_bad_credentials(
    adapter, request_, identifier, password
):
    response = request_(identifier, password)

    assert response.status_code == 401
    assert response.json() == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The login or password is wrong.",
        "code": "BAD_CREDENTIALS",
    }


def test_an_adapter_cannot_sign_in_by_email(adapter):
    assert by_email("erp", DEFAULT_PASSWORD).json()["code"] == "BAD_CREDENTIALS"


@ways_in
@pytest.mark.parametrize(
    ("name", "expected", "detail"),
    [
        ("disabled", (403, "ACCOUNT_DISABLED"), "The account is disabled."),
        ("expired", (403, "ACCOUNT_EXPIRED"), "The account has expired."),
        (
            "credentials-expired",
            (401, "ACTION_RESET_PASSWORD"),
            "The password has expired: reset it to sign in again.",
        ),
    ],
)
def test_the_accounts_state_is_told_only_to_the_right_password(
    adapter, way: WayIn, name, expected, detail
):
    User.objects.filter(username=way.username).update(**state(name))

    wrong = way("wrong password")
    right = way()

    assert outcome(wrong) == (401, "BAD_CREDENTIALS")
    assert outcome(right) == expected
    assert right.json()["detail"] == detail
    assert not Session.objects.exists()


def test_an_account_expiring_in_the_future_signs_in():
    UserFactory.create(
        email="ada@example.com", account_expires_at=timezone.now() + timedelta(days=1)
    )

    assert by_email("ada@example.com").status_code == 200


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


def test_the_password_max_age_expires_cabinet_users_credentials_but_not_adapters(settings):
    settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS = 90
    old = timezone.now() - timedelta(days=91)
    person = UserFactory.create(username="person", password_changed_at=old)
    AdapterFactory.create(username="robot", owner=person, password_changed_at=old)

    assert by_username("person", DEFAULT_PASSWORD).json()["code"] == "ACTION_RESET_PASSWORD"
    assert by_username("robot", DEFAULT_PASSWORD).status_code == 200


# --- An unconfirmed e-mail address: 409 and a registration code -----------------------------------


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


def test_sign_in_by_username_follows_the_same_order_for_a_cabinet_user():
    UserFactory.create(username="ada", email="ada@example.com", email_confirmed=False)

    response = by_username("ada")

    assert outcome(response) == (409, "EMAIL_NOT_CONFIRMED")
    assert Challenge.objects.get(pk=response.json()["requestId"]).purpose == "REGISTRATION"
    assert messages_to("ada@example.com") == ["registration_code"]


def test_a_wrong_password_on_an_unconfirmed_account_gets_401_and_no_email():
    UserFactory.create(email="ada@example.com", email_confirmed=False)

    assert outcome(by_email("ada@example.com", "wrong password")) == (401, "BAD_CREDENTIALS")
    assert messages_to("ada@example.com") == []
    assert Challenge.objects.count() == 0


# --- Two-factor sign-in: 428 and an SMS code ------------------------------------------------------


def test_two_factor_gets_428_with_request_id_and_an_sms_code_sent_after_commit(
    django_capture_on_commit_callbacks,
):
    user = UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )

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
        "otherMethods": [],
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
    UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )

    assert by_email("ada@example.com").status_code == 428

    assert sms.outbox == []
    assert OutboxMessage.objects.get().status == "PENDING"


def test_the_sms_code_of_the_428_finishes_the_sign_in_with_200(
    django_capture_on_commit_callbacks,
):
    user = UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )
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
    UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )

    with django_capture_on_commit_callbacks(execute=True):
        first = by_email("ada@example.com").json()
        second = by_email("ada@example.com").json()

    assert second["requestId"] == first["requestId"]
    assert len(sms.outbox) == 1


def test_an_account_disabled_between_the_428_and_the_code_gets_403():
    user = UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )
    started = by_email("ada@example.com").json()
    User.objects.filter(pk=user.pk).update(is_active=False)

    response = ApiClient(device_id="browser").call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": started["requestId"], "token": last_code(PHONE)},
    )

    assert outcome(response) == (403, "ACCOUNT_DISABLED")
    assert not Session.objects.exists()


def test_a_wrong_password_on_a_two_factor_account_gets_401_and_no_sms(
    django_capture_on_commit_callbacks,
):
    UserFactory.create(
        email="ada@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = by_email("ada@example.com", "wrong password")

    assert outcome(response) == (401, "BAD_CREDENTIALS")
    assert sms.outbox == []
    assert Challenge.objects.count() == 0


# --- The order ------------------------------------------------------------------------------------


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
def test_when_several_conditions_hold_the_first_check_answers(states, expected):
    fields: dict[str, Any] = {}
    for name in states:
        fields.update(state(name))
    UserFactory.create(email="ada@example.com", **fields)

    assert outcome(by_email("ada@example.com")) == expected


# --- Rate limits (docs/sessions.md, "Rate limits") ------------------------------------------------


def test_sign_in_is_rate_limited_per_client_ip_with_the_headers(adapter, settings):
    settings.ACCOUNTS_RATE_LIMIT_IP = "3/m"

    with time_machine.travel(datetime.now(UTC), tick=False):  # no window ends between the calls
        responses = [by_username("erp", DEFAULT_PASSWORD) for _ in range(4)]

    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert responses[0]["X-Rate-Limit-Limit"] == "3"
    assert [r["X-Rate-Limit-Remaining"] for r in responses[:3]] == ["2", "1", "0"]
    limited = responses[3]
    assert limited.json()["code"] == "RATE_LIMITED"
    assert int(limited["Retry-After"]) == int(limited["X-Rate-Limit-Retry-After-Seconds"]) > 0
    assert limited.json()["retryAfterSeconds"] == int(limited["Retry-After"])
    assert limited["Cache-Control"] == "no-store"


def test_sign_in_is_rate_limited_per_account_named_in_the_body(adapter, settings):
    settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "2/m"

    with time_machine.travel(datetime.now(UTC), tick=False):  # no window ends between the calls
        statuses = [
            by_username("erp", DEFAULT_PASSWORD, REMOTE_ADDR=f"10.0.0.{n}").status_code
            for n in range(3)
        ]

    assert statuses == [200, 200, 429]
