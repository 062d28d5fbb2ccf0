"""Wrong second-factor codes across sign-ins lock the account, whichever kind of code they are:
the SMS code, the authenticator app's or a recovery code count toward one run per account, over
the API and on the cabinet's code page alike (docs/sessions.md, "Second factors"). Played as the
attacker who knows the password plays it: a fresh sign-in each time a challenge's attempts run
out, wrong codes across them."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from accounts.models import AuditEvent, OutboxMessage, Session, User
from tests.accounts.api import PHONE, by_email, other_code, outcome, signed_in
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
CONFIRM = "/api/auth/login/two-factor/confirm"
# Well-formed recovery codes that are not Grace's.
NOT_HERS = ["abcde-fghjk", "mnpqr-stuvw", "xyz23-45678", "9abcd-efghj", "kmnpq-rstuv"]


@pytest.fixture
def grace(db: Any) -> User:
    """Grace, with two-factor sign-in by SMS."""
    return UserFactory.create(
        username="grace", email=EMAIL, phone=PHONE, two_factor_enabled=True, code_factor="SMS"
    )


@pytest.fixture
def recovery_codes(db: Any) -> list[str]:
    """Grace turns two-factor sign-in by SMS on over the API: her recovery codes."""
    UserFactory.create(username="grace", email=EMAIL, phone=PHONE)
    client = signed_in(EMAIL)
    started = client.call("patch", "/api/users/two-factor-authentication")
    confirmed = client.call(
        "post",
        "/api/users/two-factor-authentication/confirm",
        {"requestId": started.json()["requestId"], "token": last_code(PHONE)},
    )
    assert confirmed.status_code == 200, confirmed.json()
    return list(confirmed.json()["recoveryCodes"])


def password_step(device: str = "laptop") -> Any:
    return ApiClient(device_id=device).call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )


def started(device: str = "laptop") -> str:
    """A sign-in's requestId: the password is right, the SMS code is asked for."""
    response = password_step(device)
    assert outcome(response) == (428, "TWO_FACTOR_REQUIRED"), response.json()
    assert response.json()["confirmMethod"] == "SMS"
    return str(response.json()["requestId"])


def confirm(request_id: str, token: str, device: str = "laptop") -> Any:
    return ApiClient(device_id=device).call(
        "post", CONFIRM, {"requestId": request_id, "token": token}
    )


def sign_in_codes_sent() -> int:
    return OutboxMessage.objects.filter(to=PHONE, template="sign_in_code").count()


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_wrong_sms_codes_across_fresh_sign_ins_lock_the_account_before_another_sms_is_sent(
    grace, clock
):
    sign_ins, answers = [], []
    for _ in range(4):  # the attack: a fresh sign-in each time five wrong codes are spent
        response = password_step()
        sign_ins.append(outcome(response))
        if response.status_code == 428:
            request_id, wrong = response.json()["requestId"], other_code(last_code(PHONE))
            answers += [confirm(request_id, wrong).json() for _ in range(5)]

    assert sign_ins == [(428, "TWO_FACTOR_REQUIRED")] * 2 + [(423, "ACCOUNT_LOCKED")] * 2
    assert [answer["code"] for answer in answers] == ["CODE_INVALID"] * 10
    assert [answer["attemptsRemaining"] for answer in answers] == [4, 3, 2, 1, 0] * 2
    assert sign_in_codes_sent() == 2  # none after the lock
    assert OutboxMessage.objects.filter(to=EMAIL, template="notice_account_locked").count() == 1
    [locked] = AuditEvent.objects.filter(user=grace, kind="LOCKED")
    assert locked.details == {"cause": "second_factor", "counter": "account"}


def test_wrong_recovery_codes_count_in_the_same_run_as_wrong_sms_codes(recovery_codes, clock):
    first = started()
    wrong_sms = [outcome(confirm(first, other_code(last_code(PHONE)))) for _ in range(5)]
    second = started()
    wrong_recovery = [outcome(confirm(second, code)) for code in NOT_HERS]

    assert wrong_sms == wrong_recovery == [(400, "CODE_INVALID")] * 5
    assert outcome(password_step()) == (423, "ACCOUNT_LOCKED")
    # Her own recovery code does not open a locked account either.
    assert outcome(confirm(second, recovery_codes[0])) == (429, "ATTEMPTS_EXCEEDED")


@pytest.mark.parametrize("right_code", ["sms", "recovery"])
def test_a_right_code_of_either_kind_ends_the_run_of_wrong_ones(recovery_codes, clock, right_code):
    for round_ in range(3):
        request_id = started()
        sent = last_code(PHONE)
        for _ in range(4):
            assert outcome(confirm(request_id, other_code(sent))) == (400, "CODE_INVALID")
        right = sent if right_code == "sms" else recovery_codes[round_]
        assert confirm(request_id, right).status_code == 200

    # Twelve wrong codes in all, never ten in a row: not locked.
    assert outcome(password_step()) == (428, "TWO_FACTOR_REQUIRED")


def lock_by_wrong_passwords() -> None:
    answers = [outcome(by_email(EMAIL, "wrong password")) for _ in range(5)]
    assert answers == [(401, "BAD_CREDENTIALS")] * 5


def lock_by_wrong_codes(clock: Any) -> None:
    clock.shift(timedelta(seconds=61))  # past the resend cooldown: sign-ins get fresh challenges
    for _ in range(2):
        request_id, wrong = started(device="attacker"), other_code(last_code(PHONE))
        for _ in range(5):
            assert outcome(confirm(request_id, wrong, device="attacker"))[1] == "CODE_INVALID"


LOCKS = {
    "wrong-passwords": lambda clock: lock_by_wrong_passwords(),
    "wrong-codes": lock_by_wrong_codes,
}


@pytest.mark.parametrize("lock", list(LOCKS))
def test_a_sign_in_still_open_when_the_account_locks_confirms_nothing(grace, clock, lock):
    request_id, right = started(device="phone"), last_code(PHONE)

    LOCKS[lock](clock)
    response = confirm(request_id, right, device="phone")

    assert outcome(response) == (429, "ATTEMPTS_EXCEEDED")
    assert not Session.objects.filter(user=grace).exists()
    assert outcome(password_step()) == (423, "ACCOUNT_LOCKED")


def test_the_cabinets_code_page_counts_toward_the_same_run_and_refuses_a_locked_account(
    grace, clock
):
    browser = Client()
    over_api = started()
    for _ in range(5):
        confirm(over_api, other_code(last_code(PHONE)))
    to_code = browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})
    assert to_code["Location"].startswith("/login/two-factor?requestId=")
    wrong = other_code(last_code(PHONE))

    pages = [text(browser.post(to_code["Location"], {"code": wrong})) for _ in range(5)]

    assert [re.findall(r"Attempts left: (\d)", page) for page in pages] == [
        ["4"],
        ["3"],
        ["2"],
        ["1"],
        ["0"],
    ]
    refused = text(browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD}))
    assert "the account is locked until" in refused
    assert outcome(password_step()) == (423, "ACCOUNT_LOCKED")
    assert sign_in_codes_sent() == 2
    assert not Session.objects.filter(user=grace).exists()


def test_the_cabinets_code_page_of_a_sign_in_still_open_when_the_account_locks_takes_no_code(
    grace, clock
):
    browser = Client()
    to_code = browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})
    right = last_code(PHONE)

    lock_by_wrong_passwords()
    page = browser.post(to_code["Location"], {"code": right})

    assert page.status_code == 200
    assert "Too many wrong codes: this code no longer works. Start again." in text(page)
    assert browser.get("/bus").status_code == 302
    assert not Session.objects.filter(user=grace).exists()
