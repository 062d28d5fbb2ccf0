"""Device tokens (docs/sessions.md, "Device tokens"): every successful sign-in answers one; sent
back in X-Device-Token (the API) or the cookie device_token (the cabinet and the admin), its
wrong passwords and wrong second-factor codes count against the token alone, so a stranger's
five wrong passwords do not lock its holder out. Without a valid token of the account, nothing
changes: one counter per account."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from accounts.device_tokens import device_token_id
from accounts.models import AuditEvent, OutboxMessage, User
from tests.accounts.api import (
    PASSWORD,
    PHONE,
    by_email,
    by_username,
    other_code,
    outcome,
    register,
)
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "ada@example.com"
CONFIRM_2FA = "/api/auth/login/two-factor/confirm"


def token_of(email: str = EMAIL) -> str:
    response = by_email(email)
    assert response.status_code == 200, response.json()
    return str(response.json()["deviceToken"])


def with_token(token: str) -> dict[str, str]:
    return {"HTTP_X_DEVICE_TOKEN": token}


def wrong_passwords(count: int, **headers: Any) -> list[tuple[int, str]]:
    return [outcome(by_email(EMAIL, f"wrong {n}", **headers)) for n in range(count)]


def test_a_sign_in_by_email_answers_a_device_token_naming_the_account(ada):
    response = by_email(EMAIL)

    token = response.json()["deviceToken"]
    assert device_token_id(token=token, user=ada) is not None
    assert device_token_id(token=token, user=UserFactory.create()) is None


def test_a_sign_in_by_username_answers_a_device_token(ada):
    token = by_username("ada").json()["deviceToken"]

    assert device_token_id(token=token, user=ada) is not None


def test_a_two_factor_confirmation_answers_a_device_token(db):
    grace = UserFactory.create(
        email="grace@example.com", phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )
    started = by_email("grace@example.com")
    assert started.status_code == 428

    confirmed = ApiClient(device_id="browser").call(
        "post",
        CONFIRM_2FA,
        {"requestId": started.json()["requestId"], "token": last_code(PHONE)},
    )

    assert confirmed.status_code == 200, confirmed.json()
    assert device_token_id(token=confirmed.json()["deviceToken"], user=grace) is not None


def test_an_email_verification_confirmation_answers_a_device_token(db):
    started = register("new@example.com")
    confirmed = ApiClient().call(
        "post",
        "/api/auth/register/verify-email/confirm",
        {"requestId": started.json()["requestId"], "token": last_code("new@example.com")},
    )

    assert confirmed.status_code == 200, confirmed.json()
    user = User.objects.get(email="new@example.com")
    assert device_token_id(token=confirmed.json()["deviceToken"], user=user) is not None


def test_five_wrong_passwords_with_a_device_token_lock_that_token_and_not_the_account(ada, clock):
    token = token_of()

    answers = wrong_passwords(5, **with_token(token))
    locked = by_email(EMAIL, **with_token(token))

    assert answers == [(401, "BAD_CREDENTIALS")] * 5
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")
    assert locked.json()["lockedUntil"] == "2026-11-21T09:15:00Z"
    assert locked.json()["detail"] == (
        "Too many wrong passwords with this device token: it is locked until "
        "2026-11-21T09:15:00Z; the account itself is not."
    )
    # Everyone else still meets the account's own counter, untouched.
    assert by_email(EMAIL).status_code == 200


def test_the_owner_with_a_device_token_signs_in_while_the_account_is_locked_for_others(ada, clock):
    token = token_of()
    assert wrong_passwords(5) == [(401, "BAD_CREDENTIALS")] * 5
    assert outcome(by_email(EMAIL)) == (423, "ACCOUNT_LOCKED")

    signed_in = by_email(EMAIL, **with_token(token))

    assert signed_in.status_code == 200, signed_in.json()
    # The answer's token is the same device's, renewed: its counter carries on.
    renewed = signed_in.json()["deviceToken"]
    assert device_token_id(token=renewed, user=ada) == device_token_id(token=token, user=ada)
    assert outcome(by_email(EMAIL)) == (423, "ACCOUNT_LOCKED")


def forged(token: str) -> str:
    return token[:-2] + ("AA" if not token.endswith("AA") else "BB")


@pytest.mark.parametrize("kind", ["forged", "expired", "another account's", "an access token"])
def test_an_invalid_device_token_counts_against_the_account_as_if_none_were_sent(ada, clock, kind):
    if kind == "another account's":
        UserFactory.create(email="bob@example.com")
        token = token_of("bob@example.com")
    elif kind == "an access token":
        token = by_email(EMAIL).json()["accessToken"]
    else:
        token = token_of()
    if kind == "forged":
        token = forged(token)
    if kind == "expired":
        clock.shift(timedelta(days=90, seconds=1))

    answers = wrong_passwords(5, **with_token(token))

    assert answers == [(401, "BAD_CREDENTIALS")] * 5
    assert outcome(by_email(EMAIL)) == (423, "ACCOUNT_LOCKED")
    assert outcome(by_email(EMAIL, **with_token(token))) == (423, "ACCOUNT_LOCKED")


def test_a_device_token_is_valid_for_ninety_days_by_default(ada, clock):
    token = token_of()
    wrong_passwords(5)
    clock.shift(timedelta(days=89, hours=23))

    # The account's lock ran out long ago: lock it again, then the token still opens it.
    wrong_passwords(5)

    assert by_email(EMAIL, **with_token(token)).status_code == 200


def test_the_audit_log_names_the_counter_each_failure_went_to(ada, clock):
    token = token_of()
    token_id = device_token_id(token=token, user=ada)

    wrong_passwords(1, **with_token(token))
    wrong_passwords(1)
    by_email("nobody@example.com", "wrong")

    failures = AuditEvent.objects.filter(kind="SIGN_IN_FAILED").order_by("pk")
    assert [event.details for event in failures] == [
        {"counter": f"device:{token_id}"},
        {"counter": "account"},
        {"counter": "unknown"},
    ]


def test_a_device_tokens_lock_is_audited_on_its_counter_and_no_lock_notice_is_mailed(ada, clock):
    token = token_of()
    token_id = device_token_id(token=token, user=ada)

    wrong_passwords(5, **with_token(token))

    [locked] = AuditEvent.objects.filter(kind="LOCKED")
    assert locked.details == {"counter": f"device:{token_id}"}
    assert not OutboxMessage.objects.filter(user=ada, template="notice_account_locked").exists()


# --- The second factor ---------------------------------------------------------------------


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(
        username="grace",
        email="grace@example.com",
        phone=PHONE,
        two_factor_enabled=True,
        code_factor="SMS",
    )


def password_step(**headers: Any) -> Any:
    return by_email("grace@example.com", DEFAULT_PASSWORD, **headers)


def confirm(request_id: str, code: str, **headers: Any) -> Any:
    return ApiClient(device_id="browser").call(
        "post", CONFIRM_2FA, {"requestId": request_id, "token": code}, **headers
    )


def grace_token() -> str:
    started = password_step()
    confirmed = confirm(started.json()["requestId"], last_code(PHONE))
    assert confirmed.status_code == 200, confirmed.json()
    return str(confirmed.json()["deviceToken"])


def ten_wrong_codes(**headers: Any) -> list[tuple[int, str]]:
    answers = []
    for _ in range(2):
        started = password_step(**headers)
        assert outcome(started) == (428, "TWO_FACTOR_REQUIRED")
        wrong = other_code(last_code(PHONE))
        answers += [
            outcome(confirm(started.json()["requestId"], wrong, **headers)) for _ in range(5)
        ]
    return answers


def test_ten_wrong_codes_with_a_device_token_lock_that_token_and_not_the_account(grace, clock):
    token = grace_token()

    answers = ten_wrong_codes(**with_token(token))

    assert answers == [(400, "CODE_INVALID")] * 10
    assert outcome(password_step(**with_token(token))) == (423, "ACCOUNT_LOCKED")
    assert outcome(password_step()) == (428, "TWO_FACTOR_REQUIRED")


def test_the_owner_with_a_device_token_passes_the_second_factor_while_others_locked_it(
    grace, clock
):
    token = grace_token()
    assert ten_wrong_codes() == [(400, "CODE_INVALID")] * 10
    assert outcome(password_step()) == (423, "ACCOUNT_LOCKED")

    started = password_step(**with_token(token))
    assert outcome(started) == (428, "TWO_FACTOR_REQUIRED")
    confirmed = confirm(started.json()["requestId"], last_code(PHONE), **with_token(token))

    assert confirmed.status_code == 200, confirmed.json()
    assert outcome(password_step()) == (423, "ACCOUNT_LOCKED")


# --- The cabinet and the admin keep it in a cookie -------------------------------------------


def test_the_cabinets_sign_in_keeps_the_device_token_in_an_httponly_cookie(ada):
    response = Client().post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})

    cookie = response.cookies["device_token"]
    assert device_token_id(token=cookie.value, user=ada) is not None
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert cookie["max-age"] == 90 * 86400
    assert not cookie["secure"]


def test_the_cookie_is_secure_when_the_sign_in_came_over_https(ada):
    response = Client().post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD}, secure=True)

    assert response.cookies["device_token"]["secure"] is True


def test_the_cabinet_sends_its_cookie_back_and_signs_in_while_the_account_is_locked(ada, clock):
    browser = Client()
    assert browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD}).status_code == 302
    browser.post("/logout")
    wrong_passwords(5)

    again = browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})
    stranger = Client().post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})

    assert again.status_code == 302
    assert stranger.status_code == 200  # the form again, with the lock's message


def test_the_cabinets_code_page_keeps_and_honours_the_cookie(grace, clock):
    browser = Client()
    started = browser.post("/login", {"login": "grace@example.com", "password": DEFAULT_PASSWORD})
    page = started["Location"]
    done = browser.post(page, {"code": last_code(PHONE)})
    assert done.status_code == 302
    assert "device_token" in done.cookies
    browser.post("/logout")
    assert ten_wrong_codes() == [(400, "CODE_INVALID")] * 10

    started = browser.post("/login", {"login": "grace@example.com", "password": DEFAULT_PASSWORD})
    done = browser.post(started["Location"], {"code": last_code(PHONE)})

    assert (done.status_code, done["Location"]) == (302, "/bus")


def test_the_admins_sign_in_keeps_the_device_token_and_sends_it_back(db, clock):
    staff = UserFactory.create(
        username="ops", email="ops@example.com", is_staff=True, is_superuser=True
    )
    browser = Client()
    login = "/admin/login/?next=/admin/"
    first = browser.post(login, {"username": "ops", "password": DEFAULT_PASSWORD})
    assert device_token_id(token=first.cookies["device_token"].value, user=staff) is not None
    browser.post("/logout")
    for n in range(5):
        Client().post(login, {"username": "ops", "password": f"wrong {n}"})
    assert outcome(by_username("ops")) == (423, "ACCOUNT_LOCKED")

    again = browser.post(login, {"username": "ops", "password": DEFAULT_PASSWORD})

    assert (again.status_code, again["Location"]) == (302, "/admin/")


def test_a_password_change_answers_a_device_token(ada):
    client = ApiClient(device_id="browser")
    client.tokens = by_email(EMAIL).json()

    changed = client.call(
        "patch",
        "/api/users/change-password",
        {
            "currentPassword": DEFAULT_PASSWORD,
            "newPassword": PASSWORD,
            "confirmPassword": PASSWORD,
        },
    )

    assert changed.status_code == 200, changed.json()
    assert device_token_id(token=changed.json()["deviceToken"], user=ada) is not None
