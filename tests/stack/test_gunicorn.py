"""The operations interface under real gunicorn workers, with the database taken away and back."""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from platform_site import embedded
from tests.stack.conftest import Gunicorn, StackDatabase, wait_until

pytestmark = pytest.mark.stack

REQUESTS = 200
CLIENTS = 8
PING_ROUTE = "/api/actuator/health/{path}"


def sample(exposition: str, family: str, labels: str) -> float:
    match = re.search(rf"^{family}\{{{re.escape(labels)}\}} (\S+)$", exposition, re.M)
    assert match, f"{family}{{{labels}}} not in the exposition"
    return float(match.group(1))


LABELS = (
    f'error="none",exception="none",method="GET",outcome="SUCCESS",status="200",uri="{PING_ROUTE}"'
)


@pytest.fixture(scope="module")
def pinged(gunicorn: Gunicorn) -> float:
    """REQUESTS pings from CLIENTS threads at once, so both workers serve some; the count before.

    The readiness probe that waited for gunicorn shares the ping's route template, hence the
    baseline.
    """
    with gunicorn.client() as client:
        baseline = sample(
            client.get("/actuator/prometheus").text, "http_server_requests_seconds_count", LABELS
        )

    def ping(index: int) -> int:
        with gunicorn.client() as client:
            response = client.get(
                "/api/actuator/health/ping", headers={"X-Request-ID": f"ping-{index}"}
            )
        assert response.headers["X-Request-ID"] == f"ping-{index}"
        return response.status_code

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        statuses = list(pool.map(ping, range(REQUESTS)))
    assert statuses == [200] * REQUESTS
    return baseline


def test_both_workers_served_requests(gunicorn, pinged):
    pids = {path.stem.rsplit("_", 1)[-1] for path in gunicorn.metrics_dir.glob("summary_*.db")}

    assert len(pids) == 2


def test_request_counts_add_up_across_workers(gunicorn, pinged):
    with gunicorn.client() as client:
        exposition = client.get("/actuator/prometheus").text
        meter = client.get(
            "/actuator/metrics/http.server.requests", params={"tag": f"uri:{PING_ROUTE}"}
        ).json()

    assert sample(exposition, "http_server_requests_seconds_count", LABELS) == pinged + REQUESTS
    assert {m["statistic"]: m["value"] for m in meter["measurements"]}["COUNT"] == pinged + REQUESTS


def test_pool_gauges_sum_the_live_workers(gunicorn, pinged):
    with gunicorn.client() as client:
        exposition = client.get("/actuator/prometheus").text

    assert sample(exposition, "hikaricp_connections_max", 'pool="default"') == 2 * 4
    assert sample(exposition, "hikaricp_connections_min", 'pool="default"') == 2 * 1


def test_the_multi_worker_exposition_passes_promtool(gunicorn, pinged):
    promtool = os.environ.get("PROMTOOL") or str(
        Path(__file__).resolve().parents[2] / ".data/tools/prometheus/usr/bin/promtool"
    )
    with gunicorn.client() as client:
        exposition = client.get("/actuator/prometheus").content

    result = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, check=False
    )

    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def test_each_request_is_one_json_log_line(gunicorn, pinged):
    lines = [
        json.loads(line) for line in gunicorn.log.read_text().splitlines() if line.startswith("{")
    ]
    pings = [line for line in lines if str(line.get("requestId")).startswith("ping-")]

    assert len(pings) == REQUESTS
    assert {line["requestId"] for line in pings} == {f"ping-{index}" for index in range(REQUESTS)}
    for line in pings:
        assert line["logger"] == "platform.request"
        assert line["route"] == PING_ROUTE
        assert line["method"] == "GET"
        assert line["status"] == 200
        assert line["level"] == "INFO"
        assert line["durationMs"] >= 0
        assert line["time"].endswith("Z")


def test_health_goes_down_with_the_database_and_comes_back(gunicorn, stack_database: StackDatabase):
    with gunicorn.client() as client:
        assert client.get("/api/actuator/health").status_code == 200

        embedded.server_stop(pgdata=stack_database.pgdata)
        down = client.get("/api/actuator/health")
        readiness = client.get("/api/actuator/health/readiness")
        liveness = client.get("/api/actuator/health/liveness")

        embedded.server_start(pgdata=stack_database.pgdata)
        recovery = wait_until(
            lambda: client.get("/api/actuator/health").status_code == 200,
            timeout=30,
            what="health UP again",
        )
        back = client.get("/api/actuator/health").json()

    assert down.status_code == 503
    assert down.headers["Content-Type"] == "application/vnd.spring-boot.actuator.v3+json"
    body = down.json()
    assert body["status"] == "DOWN"
    assert body["components"]["db"]["status"] == "DOWN"
    # The psycopg error names the server's socket path: it goes to the log, not to the public.
    assert body["components"]["db"]["details"] == {
        "database": "PostgreSQL",
        "validationQuery": "isValid()",
    }
    assert str(stack_database.pgdata) not in down.text
    assert "No such file or directory" in gunicorn.log.read_text()
    assert (readiness.status_code, readiness.json()) == (503, {"status": "DOWN"})
    assert (liveness.status_code, liveness.json()) == (200, {"status": "UP"})
    assert back["components"]["db"] == {
        "status": "UP",
        "details": {"database": "PostgreSQL", "validationQuery": "isValid()"},
    }
    assert recovery < 30
