"""Passwords: the reset by an e-mailed code, the change by the signed-in user, and the restricted
role of a user an administrator requires a new password of (USER_PASSWORD_RESET_REQUIRED).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from accounts.models import AuditEvent, Challenge, OutboxMessage, Session, User
from accounts.services.accounts import account_require_password_change
from tests.accounts.api import (
    NEW_PASSWORD,
    PASSWORD,
    T0,
    by_email,
    change_password,
    outcome,
    reset,
    reset_confirm,
    signed_in,
)
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db


# --- Password reset ------------------------------------------------------------------------------


def test_a_second_reset_within_the_cooldown_answers_with_the_same_challenge(owner, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60
    with time_machine.travel(T0, tick=False) as traveller:
        first = reset("owner@example.com").json()
        traveller.shift(timedelta(seconds=15))
        second = reset("Owner@Example.com").json()

    assert second == {"requestId": first["requestId"], "retryAfterSeconds": 45}
    assert OutboxMessage.objects.filter(to="owner@example.com").count() == 1


def test_a_completed_reset_sets_the_password_clears_the_lock_ends_sessions_and_is_audited(owner):
    client = signed_in("owner@example.com")
    for _ in range(5):
        by_email("owner@example.com", "wrong")
    locked = by_email("owner@example.com")
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(started, last_code("owner@example.com"))

    assert response.status_code == 200
    assert response.json() == {"confirmed": True}
    assert outcome(client.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    assert not Session.objects.filter(user=owner, revoked_at__isnull=True).exists()
    assert signed_in("owner@example.com", NEW_PASSWORD).tokens["userDto"]["id"] == owner.pk
    old = by_email("owner@example.com")
    assert outcome(old) == (401, "BAD_CREDENTIALS")
    assert AuditEvent.objects.filter(user=owner, kind="PASSWORD_RESET").count() == 1


def test_a_completed_reset_clears_expired_credentials_and_the_password_requirement(owner):
    owner.credentials_expire_at = timezone.now() - timedelta(days=1)
    owner.reset_password_required = True
    owner.save()
    started = reset("owner@example.com").json()["requestId"]

    assert reset_confirm(started, last_code("owner@example.com")).status_code == 200

    client = signed_in("owner@example.com", NEW_PASSWORD)
    assert client.tokens["userDto"]["roles"] == ["USER"]
    assert client.tokens["userDto"]["resetPasswordRequired"] is False


def test_a_reset_with_a_confirm_password_mismatch_is_400_and_spends_no_attempt(owner):
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(
        started, last_code("owner@example.com"), confirmPassword=NEW_PASSWORD + "!"
    )

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["confirmPassword"]
    assert Challenge.objects.get(pk=started).attempts_left == 5
    assert Challenge.objects.get(pk=started).used_at is None


@pytest.mark.parametrize("password", ["password", "short", "owner@example.com"], ids=str)
def test_a_reset_to_a_weak_password_is_400_on_new_password_and_keeps_the_old_one(owner, password):
    started = reset("owner@example.com").json()["requestId"]

    response = reset_confirm(started, last_code("owner@example.com"), password)

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["newPassword"]
    owner.refresh_from_db()
    assert owner.check_password(DEFAULT_PASSWORD)


def test_reset_password_with_an_unknown_field_is_400_unknown_field(owner):
    response = ApiClient().call(
        "post", "/api/auth/reset-password", {"email": "owner@example.com", "username": "owner"}
    )

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    assert OutboxMessage.objects.count() == 0


# --- Changing the password -----------------------------------------------------------------------


def test_a_wrong_current_password_is_400_on_current_password(ada):
    client = signed_in("ada@example.com")

    response = change_password(client, "wrong password")

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert response.json()["errors"] == {"currentPassword": ["The current password is wrong."]}
    ada.refresh_from_db()
    assert ada.check_password(DEFAULT_PASSWORD)


def test_a_password_change_ends_the_other_sessions_and_keeps_this_device_signed_in(ada):
    laptop = signed_in("ada@example.com", device="laptop")
    phone = signed_in("ada@example.com", device="phone")

    response = change_password(laptop, DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert outcome(phone.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    assert outcome(laptop.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    laptop.tokens = response.json()
    assert laptop.call("get", "/api/users/me").status_code == 200
    assert AuditEvent.objects.filter(user=ada, kind="PASSWORD_CHANGED").count() == 1


def test_a_password_change_to_a_weak_or_mismatched_password_is_400(ada):
    client = signed_in("ada@example.com")

    weak = change_password(client, DEFAULT_PASSWORD, "password")
    mismatch = client.call(
        "patch",
        "/api/users/change-password",
        {
            "currentPassword": DEFAULT_PASSWORD,
            "newPassword": NEW_PASSWORD,
            "confirmPassword": PASSWORD,
        },
    )

    assert (outcome(weak), list(weak.json()["errors"])) == (
        (400, "VALIDATION_FAILED"),
        ["newPassword"],
    )
    assert (outcome(mismatch), list(mismatch.json()["errors"])) == (
        (400, "VALIDATION_FAILED"),
        ["confirmPassword"],
    )
    assert client.call("get", "/api/users/me").status_code == 200


# --- USER_PASSWORD_RESET_REQUIRED ---------------------------------------------------------------

FORBIDDEN_WHILE_RESET_REQUIRED = [
    ("get", "/api/users/sessions", None),
    ("get", "/api/users/adapters", None),
    ("post", "/api/users/adapters", {}),
    ("patch", "/api/users/me", {"firstName": "Augusta"}),
    ("patch", "/api/users/two-factor-authentication", None),
    ("delete", "/api/users/two-factor-authentication", None),
]


@pytest.fixture(params=["token-issued-before-the-flag", "token-issued-after-the-flag"])
def must_change_password(request: Any, ada: User) -> ApiClient:
    if request.param == "token-issued-before-the-flag":
        client = signed_in("ada@example.com")
        account_require_password_change(user=ada, actor=None)
    else:
        account_require_password_change(user=ada, actor=None)
        client = signed_in("ada@example.com")
        assert client.tokens["userDto"]["roles"] == ["USER_PASSWORD_RESET_REQUIRED"]
    return client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    FORBIDDEN_WHILE_RESET_REQUIRED,
    ids=[f"{m} {p}" for m, p, _ in FORBIDDEN_WHILE_RESET_REQUIRED],
)
def test_a_user_who_must_change_the_password_gets_403_outside_the_allow_list(
    must_change_password, method, path, body
):
    response = must_change_password.call(method, path, body)

    assert outcome(response) == (403, "PASSWORD_CHANGE_REQUIRED")
    assert User.objects.get(username="ada").first_name == "Ada"


def test_a_user_who_must_change_the_password_may_read_the_profile(must_change_password):
    response = must_change_password.call("get", "/api/users/me")

    assert response.status_code == 200
    assert response.json()["resetPasswordRequired"] is True


def test_a_user_who_must_change_the_password_may_refresh_and_gets_the_restricted_role(
    must_change_password,
):
    assert must_change_password.refresh().status_code == 200

    assert must_change_password.call("get", "/api/users/me").json()["roles"] == [
        "USER_PASSWORD_RESET_REQUIRED"
    ]
    assert outcome(must_change_password.call("get", "/api/users/sessions")) == (
        403,
        "PASSWORD_CHANGE_REQUIRED",
    )


def test_a_user_who_must_change_the_password_may_log_out(must_change_password):
    refresh_token = must_change_password.tokens["refreshToken"]

    response = must_change_password.call(
        "post", "/api/auth/logout", {"refreshToken": refresh_token}
    )

    assert response.status_code == 200
    assert outcome(must_change_password.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")


def test_changing_the_password_lifts_the_requirement(must_change_password):
    response = must_change_password.call(
        "patch",
        "/api/users/change-password",
        {
            "currentPassword": DEFAULT_PASSWORD,
            "newPassword": NEW_PASSWORD,
            "confirmPassword": NEW_PASSWORD,
        },
    )

    assert response.status_code == 200, response.json()
    assert response.json()["userDto"]["roles"] == ["USER"]
    assert response.json()["userDto"]["resetPasswordRequired"] is False
    must_change_password.tokens = response.json()
    assert must_change_password.call("get", "/api/users/sessions").status_code == 200
