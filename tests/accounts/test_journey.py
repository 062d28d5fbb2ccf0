"""The whole journey of a cabinet user through the JSON API: registering and confirming the
address, completing the profile, turning two-factor sign-in on, signing in with the SMS code,
changing the password, and changing it again when an administrator requires it."""

from __future__ import annotations

import pytest

from accounts.models import User
from accounts.services.accounts import account_require_password_change
from tests.accounts.api import NEW_PASSWORD, PASSWORD, outcome
from tests.conftest import ApiClient, last_code

pytestmark = pytest.mark.django_db


def test_register_confirm_profile_two_factor_sign_in_and_password_changes(settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0
    client = ApiClient(device_id="laptop")

    registered = client.call(
        "post",
        "/api/auth/register",
        {"email": "Ada@Example.com", "password": PASSWORD, "confirmPassword": PASSWORD},
    )
    assert registered.status_code == 200, registered.json()
    assert registered.json()["confirmMethod"] == "EMAIL"

    confirmed = client.call(
        "post",
        "/api/auth/register/verify-email/confirm",
        {"requestId": registered.json()["requestId"], "token": last_code("ada@example.com")},
    )
    assert confirmed.status_code == 200, confirmed.json()
    client.tokens = confirmed.json()
    assert confirmed.json()["userDto"]["profileIncompleted"] is True
    assert confirmed.json()["userDto"]["emailConfirmed"] is True

    profile = client.call(
        "patch",
        "/api/users/me",
        {"firstName": "Ada", "lastName": "Lovelace", "phone": "+49 151 23456789"},
    )
    assert profile.status_code == 200, profile.json()
    assert profile.json()["phone"] == "+4915123456789"
    assert profile.json()["profileIncompleted"] is False

    enabling = client.call("patch", "/api/users/two-factor-authentication")
    assert enabling.status_code == 200, enabling.json()
    assert enabling.json()["confirmMethod"] == "SMS"
    enabled = client.call(
        "post",
        "/api/users/two-factor-authentication/confirm",
        {"requestId": enabling.json()["requestId"], "token": last_code("+4915123456789")},
    )
    assert enabled.json()["twoFactorEnabled"] is True
    assert len(enabled.json()["recoveryCodes"]) == 10

    assert (
        client.call(
            "post", "/api/auth/logout", {"refreshToken": client.tokens["refreshToken"]}
        ).status_code
        == 200
    )
    client.tokens = {}
    step_one = client.call(
        "post", "/api/auth/login/email", {"email": "ada@example.com", "password": PASSWORD}
    )
    assert outcome(step_one) == (428, "TWO_FACTOR_REQUIRED")
    assert step_one.json()["confirmMethod"] == "SMS"
    step_two = client.call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": step_one.json()["requestId"], "token": last_code("+4915123456789")},
    )
    assert step_two.status_code == 200, step_two.json()
    client.tokens = step_two.json()

    changed = client.call(
        "patch",
        "/api/users/change-password",
        {"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD, "confirmPassword": NEW_PASSWORD},
    )
    assert changed.status_code == 200, changed.json()
    client.tokens = changed.json()

    user = User.objects.get(email="Ada@Example.com")
    account_require_password_change(user=user, actor=None)
    assert outcome(client.call("get", "/api/users/sessions")) == (
        403,
        "PASSWORD_CHANGE_REQUIRED",
    )
    assert client.call("get", "/api/users/me").json()["resetPasswordRequired"] is True

    refreshed = client.refresh()
    assert refreshed.status_code == 200
    assert client.call("get", "/api/users/me").json()["roles"] == ["USER_PASSWORD_RESET_REQUIRED"]

    restored = client.call(
        "patch",
        "/api/users/change-password",
        {"currentPassword": NEW_PASSWORD, "newPassword": PASSWORD, "confirmPassword": PASSWORD},
    )
    assert restored.status_code == 200, restored.json()
    client.tokens = restored.json()
    assert restored.json()["userDto"]["roles"] == ["USER"]
    assert client.call("get", "/api/users/sessions").status_code == 200
