"""A Redis that accepts connections and never answers (docs/operations.md, "When Redis is slow or
gone"): gunicorn's answers stay what they are without Redis (sessions read from PostgreSQL, rate
limits open, queues counted in PostgreSQL), a session revoked before the stall stays revoked, a
change that must tell every worker (logout) is refused with 503, health says Redis is DOWN, and
once Redis answers again everything works as before. Answers only: how long each call takes while
Redis is stalled is measured outside the suite (docs/operations.md, "When Redis is slow or gone").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase, wait_until
from tests.stack.processes import running_gunicorn
from tests.stack.servers import Forwarder

pytestmark = pytest.mark.stack

REDIS = ("127.0.0.1", 6379)
DATABASE = 12  # a Redis database of this module's own
WORKERS = 2  # the stack's gunicorn


@pytest.fixture(scope="module")
def redis_forwarder() -> Iterator[Forwarder]:
    forwarder = Forwarder(REDIS)
    forwarder.start()
    yield forwarder
    forwarder.resume()
    forwarder.stop()


@pytest.fixture(scope="module")
def gunicorn(
    stack_database: StackDatabase,
    tmp_path_factory: pytest.TempPathFactory,
    redis_forwarder: Forwarder,
) -> Iterator[Gunicorn]:
    """The stack's gunicorn, with Redis behind the forwarder and its health component on."""
    env = {
        "REDIS_URL": f"redis://127.0.0.1:{redis_forwarder.port}/{DATABASE}",
        "MANAGEMENT_HEALTH_REDIS_ENABLED": "true",
        "REDIS_SOCKET_TIMEOUT_SECONDS": "1",
        "REDIS_UNAVAILABLE_SECONDS": "2",
        "ACCOUNTS_RATE_LIMIT_IP": "10000/m",
        "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m",
    }
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("redis-stall"), env) as server:
        yield server


class Consumer:
    """An adapter's session: its own device and token pair."""

    def __init__(self, base_url: str, adapter: Adapter) -> None:
        self.base_url = base_url
        self.device = f"stall-{uuid.uuid4().hex[:8]}"
        self.http = httpx.Client(
            base_url=base_url, headers={"X-Device-ID": self.device}, timeout=30
        )
        answer = self.http.post(
            "/api/auth/login/username",
            json={"username": adapter.login, "password": adapter.password},
        )
        assert answer.status_code == 200, answer.text
        self.tokens: dict[str, Any] = answer.json()
        self.http.headers["Authorization"] = f"Bearer {self.tokens['accessToken']}"

    def whoami_everywhere(self, times: int = 12) -> set[tuple[int, str | None]]:
        """``times`` whoamis, each on a connection of its own, from four threads: both workers
        answer some."""

        def call(_: int) -> tuple[int, str | None]:
            with httpx.Client(base_url=self.base_url, timeout=30) as client:
                answer = client.get("/api/exchange/whoami", headers=dict(self.http.headers))
            return answer.status_code, answer.json().get("code")

        with ThreadPoolExecutor(4) as pool:
            return set(pool.map(call, range(times)))


def test_a_stalled_redis_changes_no_answer_but_refuses_changes_to_sessions(
    gunicorn: Gunicorn, owner: Owner, redis_forwarder: Forwarder
) -> None:
    adapter = owner.create_adapter(f"stall-{uuid.uuid4().hex[:8]}")
    first, revoked = Consumer(gunicorn.base_url, adapter), Consumer(gunicorn.base_url, adapter)
    # Both workers remember both sessions alive; then one ends, with Redis answering.
    assert first.whoami_everywhere() == {(200, None)}
    assert revoked.whoami_everywhere() == {(200, None)}
    logout = revoked.http.post(
        "/api/auth/logout", json={"refreshToken": revoked.tokens["refreshToken"]}
    )
    assert logout.status_code == 200, logout.text
    with gunicorn.client() as anonymous:
        assert anonymous.get("/api/actuator/health").json()["components"]["redis"]["status"] == "UP"

    since = len(gunicorn.log.read_text().splitlines())
    redis_forwarder.stall()
    try:
        whoami = first.http.get("/api/exchange/whoami")
        sent = first.http.post(
            "/api/exchange/messages",
            json={"to": adapter.adapter_id, "type": "stall", "payload": {"n": 1}},
        )
        received = first.http.get("/api/exchange/messages")
        second = Consumer(gunicorn.base_url, adapter)
        signed_in = second.http.post(
            "/api/auth/login/username",
            json={"username": adapter.login, "password": adapter.password},
        )
        refreshed = second.http.post(
            "/api/auth/refresh", json={"refreshToken": second.tokens["refreshToken"]}
        )
        refused = first.http.post(
            "/api/auth/logout", json={"refreshToken": first.tokens["refreshToken"]}
        )
        with gunicorn.client() as anonymous:
            health = anonymous.get("/api/actuator/health")
        first_sessions = first.whoami_everywhere()
        revoked_sessions = revoked.whoami_everywhere()
    finally:
        redis_forwarder.resume()
    records = [
        json.loads(line)
        for line in gunicorn.log.read_text().splitlines()[since:]
        if line.startswith("{")
    ]

    assert whoami.status_code == 200, whoami.text
    assert sent.status_code == 201, sent.text
    assert [m["messageId"] for m in received.json()["messages"]] == [sent.json()["messageId"]]
    assert signed_in.status_code == 200, signed_in.text
    assert refreshed.status_code == 200, refreshed.text
    # Ending a session must reach every worker's memory of it: without Redis it is refused.
    assert (refused.status_code, refused.json()["code"]) == (503, "SERVICE_UNAVAILABLE")
    assert refused.headers["Retry-After"] == "1"
    assert health.status_code == 503
    assert health.json()["components"]["redis"] == {
        "status": "DOWN",
        "details": {"error": "TimeoutError"},
    }
    assert health.json()["components"]["db"]["status"] == "UP"
    # Read from PostgreSQL, not taken for alive: the live session answers, the ended one does not.
    assert first_sessions == {(200, None)}
    assert revoked_sessions == {(401, "TOKEN_REVOKED")}
    # Said once per worker that met it, never as an ERROR per call.
    assert [r for r in records if r["level"] in {"ERROR", "CRITICAL"}] == []
    stalls = [r for r in records if r["message"].startswith("Redis does not answer")]
    assert 1 <= len(stalls) <= 2 * WORKERS  # each worker's, and its health probe's

    # Redis answers again: the health check's probe says so at once, and within
    # REDIS_UNAVAILABLE_SECONDS every worker uses it again (each has left it aside until then).
    with gunicorn.client() as anonymous:
        assert anonymous.get("/api/actuator/health").json()["status"] == "UP"

    def logged_out() -> bool:
        answer = first.http.post(
            "/api/auth/logout", json={"refreshToken": first.tokens["refreshToken"]}
        )
        assert answer.status_code in {200, 503}, answer.text
        return answer.status_code == 200

    wait_until(logged_out, timeout=30, what="a logout once Redis answers again")
    assert first.whoami_everywhere() == {(401, "TOKEN_REVOKED")}
