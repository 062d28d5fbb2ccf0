"""The authenticator app (TOTP) and recovery codes, over HTTP, as a person uses them and as an
attacker who knows the password would try them: replay, brute force, reuse, another device's or
another user's requestId (docs/users-api.md, sections 14 and 15)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pyotp
import pytest
from django.db import connection

from accounts.models import AuditEvent, Authenticator, Challenge, OutboxMessage, RecoveryCode, User
from tests.accounts.api import PHONE, outcome, signed_in
from tests.accounts.confirmations import start_enabling
from tests.accounts.test_races import in_parallel
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
CONFIRM = "/api/auth/login/two-factor/confirm"
STEP = timedelta(seconds=30)


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL, phone=PHONE)


def app_on(email: str = EMAIL, device: str = "browser") -> tuple[ApiClient, str, list[str]]:
    """``email``'s account with an authenticator app: the signed-in client, the app's secret and
    the recovery codes. The app's first code is spent: callers move the clock before the next."""
    client = signed_in(email, device=device)
    started = client.call("post", "/api/users/two-factor-authentication/totp")
    assert started.status_code == 200, started.json()
    secret = started.json()["secret"]
    confirmed = client.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started.json()["requestId"], "token": pyotp.TOTP(secret).now()},
    )
    assert confirmed.status_code == 200, confirmed.json()
    return client, secret, confirmed.json()["recoveryCodes"]


def password_step(device: str = "laptop", email: str = EMAIL) -> str:
    """The first step of a sign-in from ``device``: the 428's requestId."""
    response = ApiClient(device_id=device).call(
        "post", "/api/auth/login/email", {"email": email, "password": DEFAULT_PASSWORD}
    )
    assert outcome(response) == (428, "TWO_FACTOR_REQUIRED"), response.json()
    return str(response.json()["requestId"])


def confirm(request_id: str, token: str, device: str = "laptop") -> Any:
    return ApiClient(device_id=device).call(
        "post", CONFIRM, {"requestId": request_id, "token": token}
    )


def now_code(secret: str) -> str:
    return pyotp.TOTP(secret).now()


def window_codes(secret: str) -> set[str]:
    """The codes a confirmation accepts now: the current step's and its two neighbours'."""
    totp = pyotp.TOTP(secret)
    return {totp.at(time.time() + offset) for offset in (-30, 0, 30)}


# --- turning the app on ------------------------------------------------------------------------


def test_adding_an_app_answers_its_secret_and_otpauth_uri_and_changes_nothing_yet(grace, clock):
    client = signed_in(EMAIL)

    response = client.call("post", "/api/users/two-factor-authentication/totp")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["requestId", "secret", "otpauthUri"]
    assert len(pyotp.TOTP(body["secret"]).byte_secret()) == 20  # 160 bits
    assert body["otpauthUri"] == (
        f"otpauth://totp/Exchange%20platform:grace%40example.com?secret={body['secret']}"
        "&issuer=Exchange%20platform"
    )
    me = client.call("get", "/api/users/me").json()
    assert (me["twoFactorEnabled"], me["twoFactorMethod"], me["recoveryCodesRemaining"]) == (
        False,
        None,
        0,
    )


def test_the_apps_first_code_makes_it_the_factor_with_ten_recovery_codes(grace, clock):
    client, _, codes = app_on()

    me = client.call("get", "/api/users/me").json()
    assert (me["twoFactorEnabled"], me["twoFactorMethod"], me["recoveryCodesRemaining"]) == (
        True,
        "TOTP",
        10,
    )
    assert len(set(codes)) == 10
    assert all(len(code) == 11 and code[5] == "-" for code in codes)
    assert AuditEvent.objects.filter(
        user=grace, kind="TWO_FACTOR_ENABLED", details={"method": "TOTP"}
    ).exists()
    assert OutboxMessage.objects.filter(to=EMAIL, template="notice_two_factor_enabled").exists()


def test_an_app_replaces_the_sms_code_and_the_old_recovery_codes(clock):
    pending = start_enabling("a")
    sms_codes = pending.confirm(pending.code()).json()["recoveryCodes"]
    email = User.objects.get(phone="+4915123456781").email
    # Signing in now needs the SMS code: the account's client from the enabling stays signed in.
    client = pending.client
    started = client.call("post", "/api/users/two-factor-authentication/totp").json()

    confirmed = client.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started["requestId"], "token": now_code(started["secret"])},
    )

    assert confirmed.status_code == 200
    assert client.call("get", "/api/users/me").json()["twoFactorMethod"] == "TOTP"
    assert OutboxMessage.objects.filter(to=email, template="notice_two_factor_changed").exists()
    clock.shift(STEP)
    request_id = password_step(email=email)
    assert outcome(confirm(request_id, sms_codes[0])) == (400, "CODE_INVALID")


@pytest.mark.parametrize("token", ["000000", "12345", "abcdef", "1234567"])
def test_a_wrong_code_at_enabling_counts_like_any_code_and_the_budget_ends_in_429(
    grace, clock, token
):
    client = signed_in(EMAIL)
    started = client.call("post", "/api/users/two-factor-authentication/totp").json()
    # The app's codes around now must not happen to be the wrong token (one chance in 333,333):
    # then the clock moves on a step until none is.
    while token in window_codes(started["secret"]):
        clock.shift(STEP)
    body = {"requestId": started["requestId"], "token": token}

    answers = [
        client.call("post", "/api/users/two-factor-authentication/totp/confirm", body)
        for _ in range(6)
    ]

    assert [(a.status_code, a.json()["code"], a.json()["attemptsRemaining"]) for a in answers] == [
        (400, "CODE_INVALID", 4),
        (400, "CODE_INVALID", 3),
        (400, "CODE_INVALID", 2),
        (400, "CODE_INVALID", 1),
        (400, "CODE_INVALID", 0),
        (429, "ATTEMPTS_EXCEEDED", 0),
    ]
    right = {"requestId": started["requestId"], "token": now_code(started["secret"])}
    late = client.call("post", "/api/users/two-factor-authentication/totp/confirm", right)
    assert outcome(late) == (429, "ATTEMPTS_EXCEEDED")
    assert client.call("get", "/api/users/me").json()["twoFactorEnabled"] is False


def test_another_users_enabling_request_id_cannot_be_confirmed_even_with_the_right_code(
    grace, clock
):
    UserFactory.create(username="mallory", email="mallory@example.com")
    started = signed_in(EMAIL).call("post", "/api/users/two-factor-authentication/totp").json()
    mallory = signed_in("mallory@example.com")

    response = mallory.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started["requestId"], "token": now_code(started["secret"])},
    )

    assert response.json() == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "The code is wrong.",
        "code": "CODE_INVALID",
        "attemptsRemaining": 0,
    }
    assert Challenge.objects.get(pk=started["requestId"]).attempts_left == 5
    assert not User.objects.filter(two_factor_enabled=True, code_factor="SMS").exists()


def test_the_secret_is_stored_encrypted_and_another_key_cannot_read_it(grace, clock, settings):
    _, secret, _ = app_on()
    [stored] = Authenticator.objects.filter(user=grace).values_list("secret", flat=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM accounts_authenticator")
        dumped = cursor.fetchone()[0]

    assert secret not in stored
    assert secret not in dumped
    assert stored.startswith("v1:")
    clock.shift(STEP)
    settings.TOTP_ENCRYPTION_KEY = "another-key-than-the-one-that-encrypted-the-secret"
    request_id = password_step()
    assert outcome(confirm(request_id, now_code(secret))) == (400, "CODE_INVALID")


# --- signing in with the app ------------------------------------------------------------------------


def test_sign_in_with_an_app_is_428_totp_without_a_resend_and_its_code_signs_in(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)

    response = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )

    assert response.status_code == 428
    body = response.json()
    assert set(body) == {
        "type",
        "title",
        "status",
        "detail",
        "code",
        "requestId",
        "confirmMethod",
        "otherMethods",
    }
    assert (body["code"], body["confirmMethod"], body["otherMethods"]) == (
        "TWO_FACTOR_REQUIRED",
        "TOTP",
        [],
    )
    resend = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/two-factor/resend", {"requestId": body["requestId"]}
    )
    assert outcome(resend) == (400, "NOTHING_TO_RESEND")
    signed = confirm(body["requestId"], now_code(secret))
    assert signed.status_code == 200, signed.json()
    assert signed.json()["userDto"]["twoFactorMethod"] == "TOTP"


def test_a_code_that_passed_once_does_not_pass_again_in_its_window(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)
    code = now_code(secret)
    assert confirm(password_step(), code).status_code == 200

    for seconds in (0, 10, 25):  # the same step, and within the window after it
        clock.shift(timedelta(seconds=seconds))
        replay = confirm(password_step(), code)
        assert outcome(replay) == (400, "CODE_ALREADY_USED"), seconds


def test_a_code_older_than_one_that_passed_is_refused(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP * 4)
    totp = pyotp.TOTP(secret)
    older, newer = totp.at(time.time() - 30), totp.now()
    assert confirm(password_step(), newer).status_code == 200

    assert outcome(confirm(password_step(), older)) == (400, "CODE_ALREADY_USED")


def test_codes_of_the_steps_around_now_pass_and_further_ones_do_not(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP * 10)
    totp = pyotp.TOTP(secret)
    now = time.time()

    assert outcome(confirm(password_step(), totp.at(now - 60))) == (400, "CODE_INVALID")
    assert confirm(password_step(), totp.at(now - 30)).status_code == 200
    assert confirm(password_step(), totp.at(now + 30)).status_code == 200
    assert outcome(confirm(password_step(), totp.at(now + 60))) == (400, "CODE_INVALID")


def test_an_app_sign_in_is_confirmed_only_from_the_device_that_typed_the_password(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)
    request_id = password_step(device="laptop")

    stolen = confirm(request_id, now_code(secret), device="attacker")

    assert stolen.json()["code"] == "CODE_INVALID"
    assert stolen.json()["attemptsRemaining"] == 0
    assert Challenge.objects.get(pk=request_id).attempts_left == 5  # nothing spent
    assert confirm(request_id, now_code(secret), device="laptop").status_code == 200


def test_ten_wrong_app_codes_across_sign_ins_lock_the_account_and_tell_its_owner(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)
    right = now_code(secret)
    wrong = f"{(int(right) + 1) % 10**6:06d}"
    answers = []
    for _ in range(2):
        request_id = password_step()
        answers += [confirm(request_id, wrong).json()["attemptsRemaining"] for _ in range(5)]

    assert answers == [4, 3, 2, 1, 0] * 2
    locked = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")
    assert OutboxMessage.objects.filter(to=EMAIL, template="notice_account_locked").count() == 1
    assert AuditEvent.objects.filter(user=grace, kind="LOCKED").count() == 1


def test_a_right_app_code_resets_the_count_of_wrong_ones(grace, clock):
    _, secret, _ = app_on()
    for _ in range(3):
        clock.shift(STEP)
        request_id = password_step()
        right = now_code(secret)
        wrong = f"{(int(right) + 1) % 10**6:06d}"
        for _ in range(4):
            assert outcome(confirm(request_id, wrong)) == (400, "CODE_INVALID")
        assert confirm(request_id, right).status_code == 200

    assert password_step()  # 12 wrong codes in all, never 10 in a row: not locked


def test_two_parallel_confirmations_of_one_code_on_two_sign_ins_let_exactly_one_in(
    transactional_db, clock
):
    UserFactory.create(username="grace", email=EMAIL, phone=PHONE)
    _, secret, _ = app_on()
    clock.shift(STEP)
    request_ids = [password_step(), password_step()]
    code = now_code(secret)

    statuses = in_parallel(lambda i: confirm(request_ids[i], code).status_code, 2)

    assert sorted(statuses) == [200, 400]


# --- recovery codes --------------------------------------------------------------------------------


def test_a_recovery_code_signs_in_once_and_is_used_up(grace, clock):
    _, _, codes = app_on()
    clock.shift(STEP)

    first = confirm(password_step(), codes[3].upper().replace("-", " "))
    again = confirm(password_step(), codes[3])

    assert first.status_code == 200, first.json()
    assert first.json()["userDto"]["recoveryCodesRemaining"] == 9
    assert outcome(again) == (400, "CODE_INVALID")
    assert again.json()["attemptsRemaining"] == 4
    assert AuditEvent.objects.filter(user=grace, kind="RECOVERY_CODE_USED").count() == 1
    assert OutboxMessage.objects.filter(to=EMAIL, template="notice_recovery_code_used").exists()


def test_a_recovery_code_stands_in_for_an_sms_code_too(clock):
    pending = start_enabling("a")
    codes = pending.confirm(pending.code()).json()["recoveryCodes"]
    email = User.objects.get(phone="+4915123456781").email

    response = confirm(password_step(email=email), codes[0])

    assert response.status_code == 200, response.json()
    assert response.json()["userDto"]["twoFactorMethod"] == "SMS"


def test_two_parallel_sign_ins_with_one_recovery_code_let_exactly_one_in(transactional_db, clock):
    UserFactory.create(username="grace", email=EMAIL, phone=PHONE)
    _, _, codes = app_on()
    request_ids = [password_step(), password_step(), password_step()]

    statuses = in_parallel(lambda i: confirm(request_ids[i], codes[0]).status_code, 3)

    assert sorted(statuses) == [200, 400, 400]
    assert RecoveryCode.objects.filter(used_at__isnull=False).count() == 1


def test_recovery_codes_are_stored_as_keyed_hashes_only(grace, clock):
    _, _, codes = app_on()

    stored = list(RecoveryCode.objects.values_list("code_hash", flat=True))

    assert len(stored) == 10
    assert all(len(value) == 64 for value in stored)
    plain = {code.replace("-", "") for code in codes}
    assert not plain & set(stored)
    assert not any(code in value for code in plain for value in stored)


def test_new_recovery_codes_end_the_old_ones(grace, clock):
    client, _, old = app_on()

    response = client.call("post", "/api/users/two-factor-authentication/recovery-codes")

    new = response.json()["recoveryCodes"]
    assert (response.status_code, len(new)) == (200, 10)
    assert not set(new) & set(old)
    assert outcome(confirm(password_step(), old[0])) == (400, "CODE_INVALID")
    assert confirm(password_step(), new[0]).status_code == 200
    assert AuditEvent.objects.filter(user=grace, kind="RECOVERY_CODES_GENERATED").count() == 1


def test_recovery_codes_without_two_factor_are_409(grace):
    client = signed_in(EMAIL)

    response = client.call("post", "/api/users/two-factor-authentication/recovery-codes")

    assert outcome(response) == (409, "TWO_FACTOR_NOT_ENABLED")
    assert RecoveryCode.objects.count() == 0


def test_turning_the_app_off_ends_it_and_its_recovery_codes(grace, clock):
    client, _, _ = app_on()

    response = client.call("delete", "/api/users/two-factor-authentication")

    assert response.json() == {"twoFactorEnabled": False}
    me = client.call("get", "/api/users/me").json()
    assert (me["twoFactorMethod"], me["recoveryCodesRemaining"]) == (None, 0)
    assert Authenticator.objects.count() == RecoveryCode.objects.count() == 0
    assert signed_in(EMAIL)  # 200 at once
    assert OutboxMessage.objects.filter(to=EMAIL, template="notice_two_factor_disabled").exists()
