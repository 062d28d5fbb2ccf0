"""Sign-in and refresh races, attacked over HTTP in parallel against real gunicorn workers."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.stack.conftest import Gunicorn, StackDatabase

pytestmark = pytest.mark.stack

PASSWORD = "a-long-and-unusual-passphrase"


def create_adapter(database: StackDatabase, login: str) -> None:
    database.shell(
        "from accounts.models import User\n"
        "from accounts.services.adapters import adapter_create\n"
        f"owner = User.objects.create_user(username='{login}-owner', email='{login}@example.com')\n"
        f"adapter = User.objects.get(pk=adapter_create(owner=owner, login='{login}').adapter_id)\n"
        f"adapter.set_password({json.dumps(PASSWORD)})\n"
        "adapter.save()\n"
    )


def sign_in(gunicorn: Gunicorn, login: str, password: str, device: str) -> httpx.Response:
    return httpx.post(
        f"{gunicorn.base_url}/api/auth/login/username",
        json={"username": login, "password": password},
        headers={"X-Device-ID": device},
        timeout=60,
    )


def test_fifty_parallel_wrong_passwords_get_at_most_five_password_checks(
    gunicorn: Gunicorn, stack_database: StackDatabase
) -> None:
    create_adapter(stack_database, "target")

    with ThreadPoolExecutor(max_workers=50) as pool:
        statuses = list(
            pool.map(lambda n: sign_in(gunicorn, "target", "wrong", f"d{n}").status_code, range(50))
        )

    # 401 means the password was checked; 423 means the lock answered first.
    assert statuses.count(401) == 5
    assert statuses.count(423) == 45
    assert sign_in(gunicorn, "target", PASSWORD, "d0").status_code == 423


def test_parallel_sign_ins_with_the_right_password_all_succeed(
    gunicorn: Gunicorn, stack_database: StackDatabase
) -> None:
    # A fleet of adapter instances starting together must not lock its own account.
    create_adapter(stack_database, "fleet")

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(
            pool.map(lambda n: sign_in(gunicorn, "fleet", PASSWORD, f"i{n}").status_code, range(16))
        )

    assert statuses == [200] * 16


def test_of_parallel_refreshes_of_one_token_exactly_one_wins(
    gunicorn: Gunicorn, stack_database: StackDatabase
) -> None:
    create_adapter(stack_database, "racer")
    headers = {"X-Device-ID": "racer-1"}
    tokens = sign_in(gunicorn, "racer", PASSWORD, "racer-1").json()

    def refresh(_: int) -> httpx.Response:
        return httpx.post(
            f"{gunicorn.base_url}/api/auth/refresh",
            json={"refreshToken": tokens["refreshToken"]},
            headers=headers,
            timeout=30,
        )

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(refresh, range(20)))

    winners = [response for response in responses if response.status_code == 200]
    assert len(winners) == 1
    losers = {response.json()["code"] for response in responses if response.status_code != 200}
    assert losers == {"TOKEN_REVOKED"}  # refused, the session kept
    whoami = httpx.get(
        f"{gunicorn.base_url}/api/exchange/whoami",
        headers={**headers, "Authorization": f"Bearer {winners[0].json()['accessToken']}"},
    )
    assert whoami.status_code == 200
