"""Signing in: the outcome order of contract section 3, the lock after 5 wrong passwords.

An unknown login does the work of a wrong password (the same hashing, the same statements); how
long each takes is measured by bench/enumeration.py (docs/performance.md), not here: a wall-clock
assertion fails on a busy machine.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from axes.models import AccessAttempt
from django.utils import timezone

from accounts.services.lockout import gate_unlock
from tests.accounts.api import SIGNED_IN_FIELDS, T0, by_email, by_username
from tests.enumeration import ARGON2_CONFIGURED
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


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
        "profileIncompleted": False,
        "resetPasswordRequired": False,
        "roles": ["ADAPTER"],
    }


@time_machine.travel(T0, tick=False)
def test_token_expiry_times_are_rfc3339_utc_and_follow_the_settings(adapter, settings):
    settings.JWT_ACCESS_TTL_SECONDS = 900
    settings.JWT_REFRESH_TTL_SECONDS = 3600

    body = by_username("erp", DEFAULT_PASSWORD).json()

    assert body["accessTokenExpiresAt"] == "2026-11-21T09:15:00Z"
    assert body["refreshTokenExpiresAt"] == "2026-11-21T10:00:00Z"


def test_a_cabinet_user_signs_in_by_email_whatever_its_case(owner):
    response = by_email("OWNER@Example.COM", DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert response.json()["userDto"]["roles"] == ["USER"]
    assert response.json()["userDto"]["profileIncompleted"] is True  # no phone yet


@pytest.mark.parametrize(
    ("identifier", "password"),
    [
        ("erp", "wrong password"),
        ("ERP", DEFAULT_PASSWORD),  # the login is case-sensitive
        ("erp", DEFAULT_PASSWORD + " "),  # the password exactly as typed
        ("nobody-here", DEFAULT_PASSWORD),
    ],
)
def test_wrong_credentials_and_unknown_accounts_get_the_same_401(adapter, identifier, password):
    response = by_username(identifier, password)

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


def test_the_fifth_wrong_password_locks_until_locked_until_even_for_the_right_password(
    adapter, settings
):
    settings.ACCOUNTS_LOCKOUT_SECONDS = 900
    with time_machine.travel(T0, tick=False):
        statuses = [by_username("erp", "wrong").status_code for _ in range(5)]
        locked = by_username("erp", DEFAULT_PASSWORD)

    assert statuses == [401] * 5
    assert locked.status_code == 423
    assert locked.json() == {
        "type": "about:blank",
        "title": "Locked",
        "status": 423,
        "detail": "Too many wrong passwords: the account is locked until lockedUntil.",
        "code": "ACCOUNT_LOCKED",
        "lockedUntil": "2026-11-21T09:15:00Z",
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


def test_unknown_identifiers_lock_the_same_way_so_423_reveals_nothing(adapter):
    ghost = [by_username("ghost", "wrong") for _ in range(6)]
    real = [by_username("erp", "wrong") for _ in range(6)]

    assert [r.status_code for r in ghost] == [r.status_code for r in real] == [401] * 5 + [423]
    assert set(ghost[-1].json()) == set(real[-1].json())


def test_a_forged_x_forwarded_for_does_not_reset_the_count(adapter):
    for hop in range(5):
        by_username("erp", "wrong", HTTP_X_FORWARDED_FOR=f"203.0.113.{hop}")

    assert (
        by_username("erp", DEFAULT_PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.9").status_code == 423
    )


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


def test_a_disabled_account_is_403_only_for_the_right_password(adapter):
    adapter.is_active = False
    adapter.save()

    assert by_username("erp", "wrong").json()["code"] == "BAD_CREDENTIALS"
    response = by_username("erp", DEFAULT_PASSWORD)
    assert (response.status_code, response.json()["code"]) == (403, "ACCOUNT_DISABLED")


def test_an_account_past_its_expiry_is_403(adapter):
    adapter.account_expires_at = timezone.now() - timedelta(seconds=1)
    adapter.save()

    response = by_username("erp", DEFAULT_PASSWORD)

    assert (response.status_code, response.json()["code"]) == (403, "ACCOUNT_EXPIRED")


def test_expired_credentials_are_401_action_reset_password(adapter):
    adapter.credentials_expire_at = timezone.now() - timedelta(seconds=1)
    adapter.save()

    response = by_username("erp", DEFAULT_PASSWORD)

    assert (response.status_code, response.json()["code"]) == (401, "ACTION_RESET_PASSWORD")


def test_the_password_max_age_expires_cabinet_users_credentials_but_not_adapters(settings):
    settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS = 90
    old = timezone.now() - timedelta(days=91)
    person = UserFactory.create(username="person", password_changed_at=old)
    AdapterFactory.create(username="robot", owner=person, password_changed_at=old)

    assert by_username("person", DEFAULT_PASSWORD).json()["code"] == "ACTION_RESET_PASSWORD"
    assert by_username("robot", DEFAULT_PASSWORD).status_code == 200


def test_a_locked_account_is_refused_before_the_disabled_check(adapter):
    adapter.is_active = False
    adapter.save()
    for _ in range(5):
        by_username("erp", "wrong")

    assert by_username("erp", DEFAULT_PASSWORD).status_code == 423


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


def test_an_unknown_login_costs_the_same_password_hashing_as_a_wrong_password(adapter, work_of):
    known = work_of(lambda: by_username("erp", "wrong"))
    unknown = work_of(lambda: by_username("ghost", "wrong"))

    assert known.status == unknown.status == 401
    assert [hashing.operation for hashing in known.hashing] == ["verify"]  # the stored hash
    assert [hashing.operation for hashing in unknown.hashing] == ["encode"]  # a throwaway one
    assert known.hashing_costs == unknown.hashing_costs  # every Argon2 parameter alike
    assert [hashing.configuration for hashing in unknown.hashing] == [ARGON2_CONFIGURED]


def test_an_unknown_login_runs_the_same_statements_as_a_wrong_password_up_to_the_lock(
    adapter, settings, work_of
):
    settings.ACCOUNTS_LOCKOUT_THRESHOLD = 2  # a first failure, the locking one, then locked
    known = [work_of(lambda: by_username("erp", "wrong")) for _ in range(3)]
    unknown = [work_of(lambda: by_username("ghost", "wrong")) for _ in range(3)]

    assert [work.status for work in known] == [work.status for work in unknown] == [401, 401, 423]
    for known_attempt, unknown_attempt in zip(known, unknown, strict=True):
        assert known_attempt.statements == unknown_attempt.statements
        assert known_attempt.on_commit == unknown_attempt.on_commit == []
