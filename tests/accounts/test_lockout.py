"""The lock: five consecutive wrong passwords lock the account until lockedUntil, and until then
sign-in answers 423 before anything else is checked, the right password included
(docs/sessions.md, "Signing in"). Parallel attempts are in test_races.py; the administration's
side of the one counter, and its unlock button, in test_admin_sign_in.py and test_admin.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from axes.models import AccessAttempt

from accounts.models import Challenge, OutboxMessage, User
from accounts.services.lockout import gate_unlock
from tests.accounts.api import (
    T0,
    WAYS_IN,
    WayIn,
    by_email,
    by_username,
    change_password,
    outcome,
    signed_in,
    state,
    ways_in,
)
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db


def lock(way: WayIn) -> None:
    for _ in range(5):
        assert way("wrong password").status_code == 401


@ways_in
def test_the_fifth_wrong_password_locks_until_locked_until_even_for_the_right_password(
    adapter, settings, way: WayIn
):
    settings.ACCOUNTS_LOCKOUT_SECONDS = 900
    with time_machine.travel(T0, tick=False):
        statuses = [way("wrong password").status_code for _ in range(5)]
        locked = way()
    with time_machine.travel(T0 + timedelta(seconds=901), tick=False):
        after = way()

    assert statuses == [401] * 5
    assert locked.status_code == 423
    assert locked.json() == {
        "type": "about:blank",
        "title": "Locked",
        "status": 423,
        "detail": "Too many wrong passwords: the account is locked until 2026-11-21T09:15:00Z.",
        "code": "ACCOUNT_LOCKED",
        "lockedUntil": "2026-11-21T09:15:00Z",
    }
    assert after.status_code == 200


@ways_in
def test_every_wrong_password_before_the_lock_answers_the_same_401(adapter, way: WayIn):
    # The cabinet counts the last ones down (tests/cabinet): the API says nothing of the count.
    answers = [way("wrong password") for _ in range(5)]

    assert [answer.status_code for answer in answers] == [401] * 5
    assert all(answer.json() == answers[0].json() for answer in answers)
    assert answers[0].json() == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "The login or password is wrong.",
        "code": "BAD_CREDENTIALS",
    }


def test_the_lock_does_not_grow_while_locked_and_ends_at_locked_until(adapter, settings):
    settings.ACCOUNTS_LOCKOUT_SECONDS = 900
    with time_machine.travel(T0, tick=False):
        for _ in range(5):
            by_username("erp", "wrong")
    with time_machine.travel(T0 + timedelta(minutes=10), tick=False):
        for _ in range(3):
            assert by_username("erp", "wrong").json()["lockedUntil"] == "2026-11-21T09:15:00Z"
    with time_machine.travel(T0 + timedelta(minutes=15, seconds=1), tick=False):
        assert by_username("erp", DEFAULT_PASSWORD).status_code == 200


def test_a_success_resets_the_consecutive_count(adapter):
    for _ in range(4):
        by_username("erp", "wrong")
    assert by_username("erp", DEFAULT_PASSWORD).status_code == 200

    statuses = [by_username("erp", "wrong").status_code for _ in range(5)]

    assert statuses == [401] * 5
    assert by_username("erp", DEFAULT_PASSWORD).status_code == 423


def test_one_counter_per_account_whichever_identifier_is_typed(owner):
    by_email("owner@example.com", "wrong")
    by_email("OWNER@example.com", "wrong")
    by_email("Owner@Example.com", "wrong")
    by_username("owner", "wrong")
    by_username("owner", "wrong")

    assert by_email("owner@example.com", DEFAULT_PASSWORD).status_code == 423
    assert by_username("owner", DEFAULT_PASSWORD).status_code == 423


def test_five_wrong_current_passwords_lock_the_account(ada):
    client = signed_in("ada@example.com")

    wrong = [change_password(client, "wrong password") for _ in range(5)]
    sixth = change_password(client, DEFAULT_PASSWORD)

    assert [outcome(r) for r in wrong] == [(400, "VALIDATION_FAILED")] * 5
    assert outcome(sixth) == (423, "ACCOUNT_LOCKED")
    assert "lockedUntil" in sixth.json()
    sign_in = by_email("ada@example.com")
    assert outcome(sign_in) == (423, "ACCOUNT_LOCKED")
    ada.refresh_from_db()
    assert ada.check_password(DEFAULT_PASSWORD)


def test_a_forged_x_forwarded_for_does_not_reset_the_count(adapter):
    for hop in range(5):
        by_username("erp", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{hop}")

    assert (
        by_username("erp", DEFAULT_PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.9").status_code == 423
    )


@pytest.mark.parametrize(
    ("way_name", "states"),
    [
        ("user-by-email", ["unconfirmed"]),
        ("user-by-email", ["disabled"]),
        ("user-by-email", ["two-factor"]),
        ("user-by-email", ["credentials-expired"]),
        ("user-by-email", ["expired"]),
        ("adapter-by-login", ["disabled"]),
    ],
    ids=lambda value: "+".join(value) if isinstance(value, list) else value,
)
def test_a_locked_account_gets_423_whatever_else_holds(adapter, way_name, states):
    way = WAYS_IN[way_name]
    fields: dict[str, Any] = {}
    for name in states:
        fields.update(state(name))
    User.objects.filter(username=way.username).update(**fields)
    lock(way)

    response = way()

    assert outcome(response) == (423, "ACCOUNT_LOCKED")
    assert "lockedUntil" in response.json()
    # No registration code for an unconfirmed address: only the notice of the lock.
    assert [m.template for m in OutboxMessage.objects.all()] in ([], ["notice_account_locked"])
    assert Challenge.objects.count() == 0


def test_an_administrator_unlock_clears_the_lock(adapter):
    for _ in range(5):
        by_username("erp", "wrong")

    gate_unlock(user=adapter)

    assert by_username("erp", DEFAULT_PASSWORD).status_code == 200


def test_django_axes_keeps_the_record_of_failures_under_the_accounts_login(owner):
    by_email("OWNER@example.com", "wrong")
    by_username("owner", "wrong")
    by_username("ghost", "wrong")

    attempts = {
        attempt.username: attempt.failures_since_start for attempt in AccessAttempt.objects.all()
    }

    assert attempts == {"owner": 2, "ghost": 1}
