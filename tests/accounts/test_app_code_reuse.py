"""An authenticator app's code typed a second time within its window: 400 CODE_ALREADY_USED with
attemptsRemaining wherever an app's code is checked (a sign-in's second step, a proof of the
owner), counted as a wrong code is, and the cabinet's sentence asking for the app's next code
(docs/users-api.md, section 14; docs/errors.md)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pyotp
import pytest
from django.test import Client

from accounts.models import User
from tests.accounts.api import PHONE, outcome
from tests.accounts.test_second_factors import STEP, app_on, confirm, now_code, password_step
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
STALE = timedelta(seconds=301)
REUSED = "This code was already used. Wait for the next code your authenticator app shows."


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL, phone=PHONE)


def test_an_app_code_signs_in_once_and_the_same_code_again_is_code_already_used(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)
    code = now_code(secret)

    first = confirm(password_step(), code)
    again = confirm(password_step(), code)

    assert first.status_code == 200, first.json()
    assert again.status_code == 400
    assert again.json() == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "The code was already used: wait for the next code the app shows.",
        "code": "CODE_ALREADY_USED",
        "attemptsRemaining": 4,
    }


def test_reused_app_codes_count_toward_the_lock_as_wrong_codes_do(grace, clock):
    _, secret, _ = app_on()
    clock.shift(STEP)
    code = now_code(secret)
    assert confirm(password_step(), code).status_code == 200
    answers = []
    for _ in range(2):
        request_id = password_step()
        answers += [confirm(request_id, code).json() for _ in range(5)]

    assert [a["code"] for a in answers] == ["CODE_ALREADY_USED"] * 10
    assert [a["attemptsRemaining"] for a in answers] == [4, 3, 2, 1, 0] * 2
    locked = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert outcome(locked) == (423, "ACCOUNT_LOCKED")


def test_an_app_code_proves_the_owner_once_and_again_is_code_already_used(grace, clock):
    client, secret, _ = app_on()
    clock.shift(STALE)
    token = pyotp.TOTP(secret).now()
    recovery_codes = "/api/users/two-factor-authentication/recovery-codes"

    first = client.call("post", recovery_codes, {"token": token})
    again = client.call("post", recovery_codes, {"token": token})

    assert first.status_code == 200, first.json()
    assert outcome(again) == (400, "CODE_ALREADY_USED")
    assert again.json()["attemptsRemaining"] == 4


def test_the_code_that_turned_the_app_on_does_not_sign_in_in_its_window(grace, clock):
    _, secret, _ = app_on()

    again = confirm(password_step(), now_code(secret))

    assert outcome(again) == (400, "CODE_ALREADY_USED")
    assert again.json()["attemptsRemaining"] == 4


# --- the cabinet -------------------------------------------------------------------------------


def cabinet_app_on(person: User) -> tuple[Client, str]:
    """``person`` signed in to the cabinet with an authenticator app turned on: the client and
    the app's secret (its first code spent)."""
    browser = Client()
    browser.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})
    started = browser.post("/settings/two-factor/app/start")
    page = browser.get(started["Location"]).content.decode()
    secret = re.search(r'id="totp-secret">([A-Z2-7]+)<', page)
    assert secret is not None
    enabled = browser.post(started["Location"], {"code": pyotp.TOTP(secret.group(1)).now()})
    assert enabled.status_code == 200
    return browser, secret.group(1)


def test_the_cabinets_second_step_says_a_reused_code_was_used_and_to_wait_for_the_next(
    grace, clock
):
    _, secret = cabinet_app_on(grace)
    client = Client()
    step = client.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})["Location"]

    page = client.post(step, {"code": pyotp.TOTP(secret).now()}).content.decode()

    assert f"{REUSED} Attempts left: 4." in page
    assert "The code is wrong." not in page


def test_the_cabinets_proof_of_the_owner_says_a_reused_code_was_used(grace, clock):
    browser, secret = cabinet_app_on(grace)

    page = browser.post(
        "/settings/profile/delete",
        {"password": DEFAULT_PASSWORD, "token": pyotp.TOTP(secret).now()},
    ).content.decode()

    assert f"{REUSED} Nothing was changed." in page
    assert User.objects.filter(pk=grace.pk).exists()
