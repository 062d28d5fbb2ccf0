"""Password reset and sign-in do not tell whether an e-mail address has an account: the same
status, the same body shape and the same time (contract sections 3 and 4)."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from accounts.models import Challenge, SignInGate
from tests.conftest import ApiClient
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

KNOWN = "ada@example.com"
UNKNOWN = "nobody@example.com"
SAMPLES = 30
WARM_UP = 3
MAX_RELATIVE_DIFFERENCE = 0.10
RESET_REPEATS = 10  # a reset takes a few milliseconds: one hiccup is a large share of it
SIGN_IN_REPEATS = 3


@pytest.fixture(autouse=True)
def _ada(db: Any) -> None:
    UserFactory.create(username="ada", email=KNOWN)


@pytest.fixture
def every_sample_does_real_work(settings: Any) -> None:
    """No rate limit and no resend cooldown: otherwise a sample answers from a shortcut."""
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "10000/m"
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0


def reset(email: str) -> Any:
    return ApiClient().call("post", "/api/auth/reset-password", {"email": email})


def sign_in(email: str) -> Any:
    return ApiClient().call(
        "post", "/api/auth/login/email", {"email": email, "password": "wrong password"}
    )


def without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != "requestId"}


def test_reset_password_answers_known_and_unknown_emails_alike(settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 60

    known, unknown = reset(KNOWN), reset(UNKNOWN)
    known_again, unknown_again = reset(KNOWN), reset(UNKNOWN)

    assert known.status_code == unknown.status_code == 200
    assert known["Content-Type"] == unknown["Content-Type"]
    assert list(known.json()) == list(unknown.json()) == ["requestId", "retryAfterSeconds"]
    assert without_request_id(known.json()) == without_request_id(unknown.json())
    assert known.json()["retryAfterSeconds"] == 60
    # Within the cooldown both answer with their pending challenge, counting down alike.
    assert known_again.json()["requestId"] == known.json()["requestId"]
    assert unknown_again.json()["requestId"] == unknown.json()["requestId"]
    assert known_again.json()["retryAfterSeconds"] == unknown_again.json()["retryAfterSeconds"]
    assert Challenge.objects.filter(user__isnull=True).count() == 1


def test_sign_in_answers_known_and_unknown_emails_alike():
    known, unknown = sign_in(KNOWN), sign_in(UNKNOWN)

    assert known.status_code == unknown.status_code == 401
    assert known.json() == unknown.json()
    assert known.json()["code"] == "BAD_CREDENTIALS"
    assert known["Content-Type"] == unknown["Content-Type"]


def median_seconds(
    call: Callable[[str], Any], expected_status: int, before: Callable[[], None], repeats: int
) -> tuple[float, float]:
    """Median times of ``call(KNOWN)`` and ``call(UNKNOWN)`` over SAMPLES tries each.

    The tries are interleaved (known, unknown, unknown, known...), so that a change in the
    machine's load falls on both series alike. A try is the fastest of ``repeats`` calls made
    in turns with the other address: on a shared machine one call is now and then descheduled
    for a while, which says nothing about the code path and would blur a real difference.
    """

    def seconds(email: str) -> float:
        before()
        started = time.perf_counter()
        response = call(email)
        elapsed = time.perf_counter() - started
        assert response.status_code == expected_status, response.json()
        return elapsed

    for _ in range(WARM_UP):  # imports, first connections, template loading
        seconds(KNOWN)
        seconds(UNKNOWN)
    known: list[float] = []
    unknown: list[float] = []
    gc.collect()
    gc.disable()  # a collection would land on whichever call happens to trigger it
    try:
        for index in range(SAMPLES):
            tries: dict[str, list[float]] = {KNOWN: [], UNKNOWN: []}
            for repeat in range(repeats):
                order = [KNOWN, UNKNOWN] if (index + repeat) % 2 == 0 else [UNKNOWN, KNOWN]
                for email in order:
                    tries[email].append(seconds(email))
            known.append(min(tries[KNOWN]))
            unknown.append(min(tries[UNKNOWN]))
    finally:
        gc.enable()
    return statistics.median(known), statistics.median(unknown)


def relative_difference(a: float, b: float) -> float:
    return abs(a - b) / max(a, b)


@pytest.mark.usefixtures("every_sample_does_real_work")
def test_reset_password_takes_as_long_for_an_unknown_email_as_for_a_known_one():
    before_count = Challenge.objects.count()

    known, unknown = median_seconds(reset, 200, before=lambda: None, repeats=RESET_REPEATS)

    difference = relative_difference(known, unknown)
    print(  # noqa: T201 (the medians are the measurement: shown with -s)
        f"\nreset-password median: known {known * 1000:.2f} ms, unknown {unknown * 1000:.2f} ms, "
        f"difference {difference:.1%}"
    )
    # Every sample started a challenge: none answered from the cooldown shortcut.
    assert Challenge.objects.count() - before_count == 2 * (SAMPLES * RESET_REPEATS + WARM_UP)
    assert difference < MAX_RELATIVE_DIFFERENCE, (
        f"reset-password medians differ by {difference:.1%}: "
        f"known {known * 1000:.2f} ms, unknown {unknown * 1000:.2f} ms"
    )


@pytest.mark.usefixtures("every_sample_does_real_work")
def test_sign_in_takes_as_long_for_an_unknown_email_as_for_a_known_one():
    def gate_cleared() -> None:
        SignInGate.objects.all().delete()  # never a lock, which answers without hashing

    known, unknown = median_seconds(sign_in, 401, before=gate_cleared, repeats=SIGN_IN_REPEATS)

    difference = relative_difference(known, unknown)
    print(  # noqa: T201 (the medians are the measurement: shown with -s)
        f"\nsign-in median: known {known * 1000:.2f} ms, unknown {unknown * 1000:.2f} ms, "
        f"difference {difference:.1%}"
    )
    assert difference < MAX_RELATIVE_DIFFERENCE, (
        f"sign-in medians differ by {difference:.1%}: "
        f"known {known * 1000:.2f} ms, unknown {unknown * 1000:.2f} ms"
    )
