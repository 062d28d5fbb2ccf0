"""Races on confirmation codes and on the sign-in lock, with real threads on real PostgreSQL
connections: the attempt budget, single use and the lockout hold however many requests arrive
together (docs/sessions.md, "Signing in" and "Confirmation codes")."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from django.db import connections, transaction

from accounts.devices import Device
from accounts.models import Challenge, OutboxMessage, Session, SignInGate, User
from accounts.services.challenges import challenge_start
from accounts.services.code_checks import challenge_confirm
from accounts.services.sign_in_second_factor import sign_in_two_factor_confirm
from platform_site.errors import ApplicationError
from tests.accounts.api import by_email, other_code, register
from tests.conftest import ApiClient, last_code
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")
Purpose = Challenge.Purpose


def in_parallel(call: Callable[[int], T], n: int) -> list[T]:
    """``call(0)`` ... ``call(n - 1)``, each in its own thread, released together."""
    barrier = threading.Barrier(n, timeout=30)

    def run(index: int) -> T:
        try:
            barrier.wait()
            return call(index)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def answer(call: Callable[[], Any]) -> tuple[int, str, Any]:
    """(status, code, attemptsRemaining) of a service call: 200 when it returns."""
    try:
        call()
    except ApplicationError as error:
        return error.status, error.code, error.extra.get("attemptsRemaining")
    return 200, "", None


def started_with_code(
    purpose: Challenge.Purpose, user: User, address: str
) -> tuple[uuid.UUID, str]:
    """A new challenge and its code, read from the outbox before the delivery empties it."""
    with transaction.atomic():
        challenge = challenge_start(purpose=purpose, user=user, address=address).challenge
        code = last_code(address)
    return challenge.pk, code


@pytest.fixture
def ada() -> User:
    """Ada with a phone, for the SMS flows (tests/accounts/conftest.py's has none)."""
    return UserFactory.create(username="ada", email="ada@example.com", phone="+4915123456781")


# The flows whose code the platform sends (an authenticator app's: tests/accounts/test_totp.py).
SENT = [purpose for purpose in Purpose if purpose != Purpose.ENABLE_TOTP]


@pytest.mark.parametrize("purpose", SENT, ids=[p.value for p in SENT])
def test_twenty_parallel_wrong_codes_spend_exactly_the_attempt_budget(ada, settings, purpose):
    settings.ACCOUNTS_CODE_ATTEMPTS = 5
    address = ada.phone if purpose in (Purpose.SIGN_IN, Purpose.ENABLE_TWO_FACTOR) else ada.email
    request_id, code = started_with_code(purpose, ada, address)
    wrong = other_code(code)

    answers = in_parallel(
        lambda _: answer(
            lambda: challenge_confirm(request_id=request_id, purpose=purpose, code=wrong)
        ),
        20,
    )

    assert Counter((status, code) for status, code, _ in answers) == {
        (400, "CODE_INVALID"): 5,
        (429, "ATTEMPTS_EXCEEDED"): 15,
    }
    # Each wrong guess saw its own decrement: no two were counted as one.
    assert sorted(left for status, _, left in answers if status == 400) == [0, 1, 2, 3, 4]
    assert Challenge.objects.get(pk=request_id).attempts_left == 0
    assert answer(lambda: challenge_confirm(request_id=request_id, purpose=purpose, code=code))[
        :2
    ] == (429, "ATTEMPTS_EXCEEDED")


def test_parallel_wrong_codes_follow_a_larger_budget_setting(ada, settings):
    settings.ACCOUNTS_CODE_ATTEMPTS = 7
    request_id, code = started_with_code(Purpose.PASSWORD_RESET, ada, ada.email)

    answers = in_parallel(
        lambda _: answer(
            lambda: challenge_confirm(
                request_id=request_id, purpose=Purpose.PASSWORD_RESET, code=other_code(code)
            )
        ),
        20,
    )

    assert Counter(status for status, _, _ in answers) == {400: 7, 429: 13}
    assert Challenge.objects.get(pk=request_id).attempts_left == 0


@pytest.mark.parametrize("round_", range(10))
def test_two_parallel_right_codes_succeed_exactly_once(ada, round_):
    request_id, code = started_with_code(Purpose.REGISTRATION, ada, ada.email)

    answers = in_parallel(
        lambda _: answer(
            lambda: challenge_confirm(
                request_id=request_id, purpose=Purpose.REGISTRATION, code=code
            )
        ),
        2,
    )

    assert sorted(status for status, _, _ in answers) == [200, 400]
    assert [c for status, c, _ in answers if status == 400] == ["CODE_INVALID"]
    assert Challenge.objects.get(pk=request_id).used_at is not None


def test_parallel_right_two_factor_codes_start_exactly_one_session(ada):
    ada.two_factor_enabled = True
    ada.save()
    device = Device(key="d:phone", device_id="phone", user_agent="", ip="")
    for _ in range(5):
        request_id, code = started_with_code(Purpose.SIGN_IN, ada, ada.phone)

        def confirm(_: int, request_id: uuid.UUID = request_id, code: str = code) -> Any:
            return answer(
                lambda: sign_in_two_factor_confirm(
                    request_id=request_id, code=code, device=device, request=None
                )
            )

        answers = in_parallel(confirm, 4)

        assert sorted(status for status, _, _ in answers) == [200, 400, 400, 400]
    assert Session.objects.filter(user=ada).count() == 5


def test_parallel_wrong_two_factor_codes_across_sign_ins_get_exactly_ten_compared(ada):
    ada.two_factor_enabled = True
    ada.save()
    device = Device(key="d:laptop", device_id="laptop", user_agent="", ip="")
    # Three sign-ins' challenges, five wrong codes for each, all at once.
    challenges = [started_with_code(Purpose.SIGN_IN, ada, ada.phone) for _ in range(3)]

    def confirm(index: int) -> tuple[int, str, Any]:
        request_id, code = challenges[index // 5]
        return answer(
            lambda: sign_in_two_factor_confirm(
                request_id=request_id, code=other_code(code), device=device, request=None
            )
        )

    answers = in_parallel(confirm, 15)

    # 400: the code was compared; 429: the lock, set by the tenth, closed the sign-in first.
    assert Counter(code for _, code, _ in answers) == {"CODE_INVALID": 10, "ATTEMPTS_EXCEEDED": 5}
    assert SignInGate.objects.get(key=f"user:{ada.pk}").locked_until is not None
    assert not Challenge.objects.filter(user=ada, attempts_left__gt=0).exists()
    assert by_email("ada@example.com").status_code == 423


def test_parallel_registrations_of_a_taken_email_mail_its_owner_once(ada, settings):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"

    statuses = in_parallel(lambda _: register("ada@example.com").status_code, 10)

    assert statuses == [200] * 10
    told = OutboxMessage.objects.filter(template="email_taken", user=ada)
    assert told.count() == 1


def wrong_passwords_in_parallel(email: str, n: int) -> Counter[int]:
    SignInGate.objects.all().delete()

    def attempt(index: int) -> int:
        response = ApiClient(device_id=f"d{index}").call(
            "post", "/api/auth/login/email", {"email": email, "password": f"wrong {index}"}
        )
        return int(response.status_code)

    return Counter(in_parallel(attempt, n))


@pytest.mark.parametrize("round_", range(3))
def test_fifty_parallel_wrong_passwords_get_exactly_five_password_checks(ada, settings, round_):
    # Rate limits would answer 429 before the gate; every attempt must reach it.
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"

    statuses = wrong_passwords_in_parallel("ada@example.com", 50)

    # 401: the password was checked; 423: the lock answered first.
    assert statuses == {401: 5, 423: 45}
    locked = by_email("ADA@example.com")
    assert locked.status_code == 423


def test_fifty_parallel_wrong_passwords_for_an_unknown_email_lock_it_the_same_way(settings):
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"

    statuses = wrong_passwords_in_parallel("nobody@example.com", 50)

    assert statuses == {401: 5, 423: 45}


def test_twenty_parallel_wrong_passwords_with_a_device_token_and_twenty_without_get_five_checks_each(
    ada, settings
):
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"
    token = by_email("ada@example.com").json()["deviceToken"]

    def attempt(index: int) -> tuple[bool, int]:
        with_token = index % 2 == 0
        headers = {"HTTP_X_DEVICE_TOKEN": token} if with_token else {}
        response = ApiClient(device_id=f"d{index}").call(
            "post",
            "/api/auth/login/email",
            {"email": "ada@example.com", "password": f"wrong {index}"},
            **headers,
        )
        return with_token, int(response.status_code)

    answers = Counter(in_parallel(attempt, 40))

    # 401: the password was checked; 423: that counter's lock answered first.
    assert answers == {(True, 401): 5, (True, 423): 15, (False, 401): 5, (False, 423): 15}
    token_gate, account_gate = SignInGate.objects.exclude(key__startswith="unknown:").order_by(
        "key"
    )
    assert (token_gate.key[:7], token_gate.failures) == ("device:", 5)
    assert (account_gate.key, account_gate.failures) == (f"user:{ada.pk}", 5)
