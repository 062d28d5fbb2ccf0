"""Two gunicorn instances, one Redis: a client's per-IP sign-in limit is counted once across both."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django_ratelimit.core import _get_window

from tests.stack.conftest import Gunicorn, StackDatabase
from tests.stack.processes import running_gunicorn

pytestmark = pytest.mark.stack

# A Redis database of these tests' own (CI's suite uses 0).
REDIS_URL = "redis://127.0.0.1:6379/11"
LIMIT = 5
PERIOD_SECONDS = 60


@pytest.fixture(scope="module")
def two_gunicorns(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Gunicorn, Gunicorn]]:
    workdir = tmp_path_factory.mktemp("rate-limits")
    env = {
        "REDIS_URL": REDIS_URL,
        "ACCOUNTS_RATE_LIMIT_IP": f"{LIMIT}/m",
        "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m",
        # The client address comes from X-Forwarded-For, as behind nginx: each run counts an
        # address of its own, so parallel runs sharing the Redis database never add up.
        "TRUSTED_PROXIES": "127.0.0.1",
    }
    with (
        running_gunicorn(stack_database, workdir / "a", env) as a,
        running_gunicorn(stack_database, workdir / "b", env) as b,
    ):
        yield a, b


def random_ip() -> str:
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


def sign_in(server: Gunicorn, client_ip: str) -> httpx.Response:
    # An unknown login each time: the 5-failure lock of one login never answers first.
    return httpx.post(
        f"{server.base_url}/api/auth/login/username",
        json={"username": f"ghost-{uuid.uuid4().hex[:12]}", "password": "wrong"},
        headers={"X-Forwarded-For": client_ip, "X-Device-ID": "probe"},
        timeout=30,
    )


def test_the_per_ip_limit_is_counted_across_gunicorn_instances(
    two_gunicorns: tuple[Gunicorn, Gunicorn],
) -> None:
    a, b = two_gunicorns
    # A counter lives for a window that ends at a second of the minute set by the address: take
    # an address whose window does not end during the test.
    client_ip = random_ip()
    while _get_window(client_ip, PERIOD_SECONDS) - time.time() < 15:
        client_ip = random_ip()
    other_ip = random_ip()
    while other_ip == client_ip:
        other_ip = random_ip()

    responses = [sign_in(server, client_ip) for server in (a, b, a, b, a)]

    assert [response.status_code for response in responses] == [401] * LIMIT
    assert [response.headers["X-Rate-Limit-Remaining"] for response in responses] == [
        "4",
        "3",
        "2",
        "1",
        "0",
    ]
    assert {response.headers["X-Rate-Limit-Limit"] for response in responses} == {str(LIMIT)}

    for server in (b, a):
        limited = sign_in(server, client_ip)
        assert limited.status_code == 429, limited.text
        assert limited.json()["code"] == "RATE_LIMITED"
        retry_after = int(limited.headers["Retry-After"])
        assert 1 <= retry_after <= PERIOD_SECONDS
        assert limited.headers["X-Rate-Limit-Retry-After-Seconds"] == str(retry_after)
        assert "no-store" in limited.headers["Cache-Control"]
        assert limited.headers["X-Rate-Limit-Remaining"] == "0"

    # Another client is not limited by this one's count.
    other = sign_in(b, other_ip)
    assert other.status_code == 401
    assert other.headers["X-Rate-Limit-Remaining"] == "4"
