"""The auth rate limits are counted by the flows both doors call (docs/sessions.md, "Rate
limits"): every code the cabinet's pages and the API's endpoints confirm or resend counts
against the client's IP and its challenge, and neither door gets more tries than the other."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import Client

from accounts.models import Challenge
from tests.accounts.api import NEW_PASSWORD, PASSWORD, outcome
from tests.accounts.confirmations import Pending, start_registration, start_reset, start_sign_in
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

WRONG_CODE = "000000"
TOO_MANY = "Too many attempts. Try again in"


@pytest.fixture(autouse=True)
def _two_per_challenge(settings: Any) -> Iterator[None]:
    settings.ACCOUNTS_RATE_LIMIT_IP = "10000/m"
    settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "2/m"
    with time_machine.travel(datetime.now(UTC), tick=False):  # no window ends during a test
        yield


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def attempts_left(path: str) -> int:
    request_id = path.split("requestId=")[1]
    return Challenge.objects.get(pk=request_id).attempts_left


def registered_in_the_cabinet(client: Client) -> str:
    answer = client.post(
        "/register",
        {"email": "new@example.com", "new_password": PASSWORD, "confirm_password": PASSWORD},
    )
    return str(answer["Location"])


def signed_in_half_way_in_the_cabinet(client: Client) -> str:
    user = UserFactory.create(
        email="careful@example.com",
        phone="+4915123456789",
        two_factor_enabled=True,
        code_factor="SMS",
    )
    answer = client.post("/login", {"login": user.email, "password": DEFAULT_PASSWORD})
    return str(answer["Location"])


def reset_asked_in_the_cabinet(client: Client) -> str:
    user = UserFactory.create(email="forgetful@example.com")
    return str(client.post("/reset-password", {"email": user.email})["Location"])


CODE_PAGES: dict[str, tuple[Callable[[Client], str], dict[str, str]]] = {
    "registration": (registered_in_the_cabinet, {}),
    "two-factor": (signed_in_half_way_in_the_cabinet, {}),
    "reset": (
        reset_asked_in_the_cabinet,
        {"new_password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
    ),
}
code_pages = pytest.mark.parametrize(
    ("start", "fields"), list(CODE_PAGES.values()), ids=list(CODE_PAGES)
)


@code_pages
def test_every_cabinet_code_page_refuses_codes_past_the_limit_before_comparing_them(
    start: Callable[[Client], str], fields: dict[str, str]
) -> None:
    client = Client()
    page = start(client)

    answers = [client.post(page, {"code": WRONG_CODE, **fields}) for _ in range(3)]

    assert [TOO_MANY in text(answer) for answer in answers] == [False, False, True]
    assert "The code is wrong. Attempts left: 3." in text(answers[1])
    assert attempts_left(page) == 3  # the limited code spent no attempt


@code_pages
def test_every_cabinet_code_page_refuses_resends_past_the_limit(
    start: Callable[[Client], str], fields: dict[str, str]
) -> None:
    client = Client()
    page = start(client)

    answers = [client.post(page, {"action": "resend"}, follow=True) for _ in range(3)]

    assert [TOO_MANY in text(answer) for answer in answers] == [False, False, True]
    assert "You can ask again in" in text(answers[1])


API_FLOWS = {"registration": start_registration, "sign-in": start_sign_in, "reset": start_reset}
api_flows = pytest.mark.parametrize("start", list(API_FLOWS.values()), ids=list(API_FLOWS))


@api_flows
def test_every_api_code_endpoint_refuses_codes_past_the_limit_with_the_headers(
    start: Callable[[str], Pending],
) -> None:
    pending = start("a")

    answers = [pending.confirm(WRONG_CODE) for _ in range(3)]

    assert [outcome(a) for a in answers] == [(400, "CODE_INVALID")] * 2 + [(429, "RATE_LIMITED")]
    assert [a["X-Rate-Limit-Remaining"] for a in answers] == ["1", "0", "0"]
    limited = answers[2]
    assert limited["X-Rate-Limit-Limit"] == "2"
    assert int(limited["Retry-After"]) == limited.json()["retryAfterSeconds"] > 0
    assert Challenge.objects.get(pk=pending.request_id).attempts_left == 3


@api_flows
def test_every_api_resend_endpoint_refuses_resends_past_the_limit(
    start: Callable[[str], Pending],
) -> None:
    pending = start("a")

    answers = [pending.resend() for _ in range(3)]

    assert [outcome(a) for a in answers] == [(429, "RESEND_TOO_EARLY")] * 2 + [
        (429, "RATE_LIMITED")
    ]


def test_the_cabinet_and_the_api_count_one_challenge_on_one_counter() -> None:
    client = Client()
    page = signed_in_half_way_in_the_cabinet(client)
    request_id = page.split("requestId=")[1]
    pending = Pending(
        flow="sign-in",
        request_id=request_id,
        address="+4915123456789",
        client=ApiClient(device_id="browser"),
        confirm_path="/api/auth/login/two-factor/confirm",
        resend_path="/api/auth/login/two-factor/resend",
    )

    by_page = client.post(page, {"code": WRONG_CODE})
    by_api = pending.confirm(WRONG_CODE)
    by_page_again = client.post(page, {"code": WRONG_CODE})

    assert TOO_MANY not in text(by_page)
    assert outcome(by_api) == (400, "CODE_INVALID")
    assert TOO_MANY in text(by_page_again)
