"""PostgreSQL goes away under a running gunicorn and comes back (docs/operations.md, "When
PostgreSQL goes away"): while it is gone, every request that needs it answers 503
SERVICE_UNAVAILABLE with Retry-After, as health and readiness say DOWN; the first request after it
is back succeeds, on every worker. How long each takes is measured by bench/outage.py, not here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase

pytestmark = pytest.mark.stack

DEVICE = "outage-1"
WORKERS = 2  # the gunicorn fixture's: each has a pool and a view of the database of its own


@pytest.fixture
def adapter_http(gunicorn: Gunicorn, owner: Owner) -> Iterator[tuple[Adapter, httpx.Client]]:
    adapter = owner.create_adapter(f"outage-{uuid.uuid4().hex[:8]}")  # the stack lives on
    http = httpx.Client(base_url=gunicorn.base_url, headers={"X-Device-ID": DEVICE}, timeout=30)
    signed_in = http.post(
        "/api/auth/login/username", json={"username": adapter.login, "password": adapter.password}
    )
    assert signed_in.status_code == 200, signed_in.text
    http.headers["Authorization"] = f"Bearer {signed_in.json()['accessToken']}"
    yield adapter, http
    http.close()


def send(http: httpx.Client, adapter: Adapter, n: int) -> httpx.Response:
    return http.post(
        "/api/exchange/messages", json={"to": adapter.adapter_id, "type": "outage", "payload": n}
    )


def outcome(response: httpx.Response) -> tuple[int, Any]:
    if response.headers.get("Content-Type", "").endswith("json"):
        body = response.json()
        return response.status_code, body.get("code") or body.get("status")
    return response.status_code, None


def test_requests_answer_503_while_postgresql_is_gone_and_succeed_once_it_is_back(
    gunicorn: Gunicorn, stack_database: StackDatabase, adapter_http: tuple[Adapter, httpx.Client]
) -> None:
    adapter, http = adapter_http
    assert send(http, adapter, 0).status_code == 201

    stack_database.stop()
    try:
        # More than one request per worker, so that each worker meets the outage, and both the
        # first failure (waiting on the pool) and the later ones (asking the server) are seen.
        during = [send(http, adapter, n) for n in range(1, 2 * WORKERS + 3)]
        during += [http.get("/api/exchange/messages") for _ in range(2 * WORKERS)]
        health = http.get("/api/actuator/health")
        readiness = http.get("/api/actuator/health/readiness")
    finally:
        stack_database.start()
    # The first requests after the restart, on both workers (gunicorn spreads connections).
    after = [send(http, adapter, 100 + n) for n in range(2 * WORKERS)]
    received = http.get("/api/exchange/messages", params={"max": 100}).json()["messages"]

    assert {outcome(r) for r in during} == {(503, "SERVICE_UNAVAILABLE")}
    assert {r.headers["Retry-After"] for r in during} == {"1"}
    assert (health.status_code, health.json()["status"]) == (503, "DOWN")
    assert (readiness.status_code, readiness.json()) == (503, {"status": "DOWN"})
    assert [r.status_code for r in after] == [201] * (2 * WORKERS)
    assert sorted(m["payload"] for m in received) == [0, 100, 101, 102, 103]
    assert http.get("/api/actuator/health").json()["status"] == "UP"


def log_records(gunicorn: Gunicorn, since: int) -> list[dict[str, Any]]:
    """The JSON lines gunicorn's workers wrote after the first ``since`` lines of its log."""
    lines = gunicorn.log.read_text().splitlines()[since:]
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_an_outage_logs_at_most_one_warning_per_request_and_no_error(
    gunicorn: Gunicorn, stack_database: StackDatabase, adapter_http: tuple[Adapter, httpx.Client]
) -> None:
    adapter, http = adapter_http
    since = len(gunicorn.log.read_text().splitlines())

    stack_database.stop()
    try:
        during = [send(http, adapter, n) for n in range(20)]
        during += [http.get("/api/exchange/whoami") for _ in range(20)]
    finally:
        stack_database.start()
    assert send(http, adapter, 100).status_code == 201  # a request that finds it back
    records = log_records(gunicorn, since)

    assert {outcome(r) for r in during} == {(503, "SERVICE_UNAVAILABLE")}
    assert [r for r in records if r["level"] in {"ERROR", "CRITICAL"}] == []
    # The request's own lines: at most one WARNING each. The pool's reconnection lines come once
    # per pooled connection, the long polls' listener's and the webhook deliverer's once per
    # process (each holds a connection of its own), not per request.
    per_process = {"exchange.wakeups", "exchange.webhooks.delivery"}
    ours = [
        r
        for r in records
        if r["level"] == "WARNING" and r["logger"] not in {"psycopg.pool", *per_process}
    ]
    listener = [r["message"] for r in records if r["logger"] == "exchange.wakeups"]
    deliverer = [r["message"] for r in records if r["logger"] == "exchange.webhooks.delivery"]
    changes = [r for r in ours if r["logger"] == "platform_site.db.availability"]
    assert len(ours) - len(changes) <= len(during)
    # Each worker that met the outage says so once, and once that it is over.
    assert 1 <= sum("does not answer" in r["message"] for r in changes) <= WORKERS
    assert sum("answers again" in r["message"] for r in changes) <= WORKERS
    assert sum(message.startswith("Exchange listener lost") for message in listener) <= WORKERS
    assert sum("lost its connection" in message for message in deliverer) <= WORKERS
