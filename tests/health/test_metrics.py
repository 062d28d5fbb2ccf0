"""Spring's /actuator/metrics and the Prometheus exposition, read from one registry."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from platform_site import metrics

pytestmark = pytest.mark.django_db

PROMETHEUS_TEXT = "text/plain;version=0.0.4;charset=utf-8"
ALL_ENDPOINTS = ["health", "info", "metrics", "prometheus"]


def promtool() -> str:
    path = os.environ.get("PROMTOOL") or str(
        Path(__file__).resolve().parents[2] / ".data/tools/prometheus/usr/bin/promtool"
    )
    assert Path(path).is_file(), f"promtool not found at {path}: run `make tools`"
    return path


def count_of(client: Client, uri: str) -> float:
    response = client.get(f"/actuator/metrics/http.server.requests?tag=uri:{quote(uri)}")
    if response.status_code == 404:
        return 0.0
    measurements = {m["statistic"]: m["value"] for m in response.json()["measurements"]}
    return float(measurements["COUNT"])


@pytest.fixture
def exposed(settings: Any) -> None:
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ALL_ENDPOINTS


def test_names_list_the_spring_meters(client):
    client.get("/api/actuator/health")

    response = client.get("/actuator/metrics")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.spring-boot.actuator.v3+json"
    names = response.json()["names"]
    assert names == sorted(set(names))
    for name in (
        "http.server.requests",
        "process.cpu.usage",
        "process.resident.memory",
        "hikaricp.connections.active",
        "hikaricp.connections.max",
        "cache.size",
    ):
        assert name in names


def test_requests_are_counted_under_their_route_template(client):
    template = "/api/actuator/health/{path}"
    before = count_of(client, template)

    for component in ("db", "ping", "diskSpace"):
        client.get(f"/api/actuator/health/{component}")

    assert count_of(client, template) == before + 3
    assert count_of(client, "/api/actuator/health/db") == 0.0


def test_a_meter_has_springs_shape_and_tag_filters_narrow_it(client):
    client.get("/api/actuator/health")
    client.get("/api/actuator/health/nothing-here")

    whole = client.get("/actuator/metrics/http.server.requests").json()
    only_200 = client.get("/actuator/metrics/http.server.requests?tag=status:200").json()

    assert list(whole) == ["name", "description", "baseUnit", "measurements", "availableTags"]
    assert whole["name"] == "http.server.requests"
    assert whole["baseUnit"] == "seconds"
    assert [m["statistic"] for m in whole["measurements"]] == ["COUNT", "TOTAL_TIME", "MAX"]
    tags = {tag["tag"]: tag["values"] for tag in whole["availableTags"]}
    assert set(tags) == {"error", "exception", "method", "outcome", "status", "uri"}
    assert {"200", "404"} <= set(tags["status"])
    assert {"SUCCESS", "CLIENT_ERROR"} <= set(tags["outcome"])
    assert "status" not in {tag["tag"] for tag in only_200["availableTags"]}
    count = {m["statistic"]: m["value"] for m in whole["measurements"]}["COUNT"]
    count_200 = {m["statistic"]: m["value"] for m in only_200["measurements"]}["COUNT"]
    assert 0 < count_200 < count


def test_gauges_have_a_value_statistic(client):
    body = client.get("/actuator/metrics/hikaricp.connections.max?tag=pool:default").json()

    assert body["name"] == "hikaricp.connections.max"
    assert body["description"] == "Max connections"
    assert body["measurements"] == [{"statistic": "VALUE", "value": 4.0}]
    assert body["availableTags"] == []


def test_tag_without_a_colon_is_a_400_with_springs_message(client):
    response = client.get("/actuator/metrics/http.server.requests?tag=status")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["detail"] == "Each tag parameter must be in the form 'key:value'"


@pytest.mark.parametrize(
    "path",
    ["/actuator/metrics/no.such.meter", "/actuator/metrics/process.cpu.usage?tag=pool:default"],
)
def test_unknown_meter_or_unmatched_tag_is_a_404(client, path):
    response = client.get(path)

    assert response.status_code == 404
    assert response.json()["code"] == "NOT_FOUND"


def test_merging_sums_counts_and_keeps_the_largest_max():
    meter = metrics.Meter("http.server.requests", "", "seconds")
    meter.samples = [
        ("COUNT", {"status": "200"}, 3.0),
        ("COUNT", {"status": "500"}, 2.0),
        ("TOTAL_TIME", {"status": "200"}, 0.3),
        ("TOTAL_TIME", {"status": "500"}, 0.7),
        ("MAX", {"status": "200"}, 0.2),
        ("MAX", {"status": "500"}, 0.5),
    ]

    body = metrics.meter_json(meter, [])

    assert body is not None
    assert body["measurements"] == [
        {"statistic": "COUNT", "value": 5.0},
        {"statistic": "TOTAL_TIME", "value": 1.0},
        {"statistic": "MAX", "value": 0.5},
    ]
    assert body["availableTags"] == [{"tag": "status", "values": ["200", "500"]}]


def test_metrics_are_not_reachable_under_the_public_prefix(client, exposed):
    assert client.get("/api/actuator/metrics").status_code == 404
    assert client.get("/api/actuator/prometheus").status_code == 404


def test_prometheus_is_404_unless_exposed(client):
    assert client.get("/actuator/prometheus").status_code == 404


def scrape(client: Client) -> str:
    response = client.get("/actuator/prometheus")
    assert response.status_code == 200
    assert response["Content-Type"] == PROMETHEUS_TEXT
    return response.content.decode()


@pytest.mark.usefixtures("exposed")
def test_prometheus_exposition_has_the_spring_and_platform_series(client):
    client.get("/api/actuator/health")

    text = scrape(client)

    assert (
        'http_server_requests_seconds_count{error="none",exception="none",method="GET",'
        'outcome="SUCCESS",status="200",uri="/api/actuator/health"}'
    ) in text
    assert "# TYPE http_server_requests_seconds summary" in text
    assert "# TYPE http_server_requests_seconds_max gauge" in text
    assert re.search(r'^hikaricp_connections_active\{pool="default"\} \d', text, re.M)
    assert re.search(r'^hikaricp_connections_max\{pool="default"\} 4\.0$', text, re.M)
    assert re.search(r"^process_cpu_usage \d", text, re.M)
    assert re.search(r"^process_resident_memory_bytes [1-9]", text, re.M)
    assert re.search(r'^cache_size\{cache="default",cache_manager="django"\} \d', text, re.M)
    assert "_created" not in text
    for family in re.findall(r"^# TYPE (\S+)", text, re.M):
        assert f"# HELP {family} " in text, family


@pytest.mark.usefixtures("exposed")
def test_prometheus_exposition_passes_promtool_lint(client):
    client.get("/api/actuator/health")
    client.get("/api/nothing")

    result = subprocess.run(
        [promtool(), "check", "metrics"],
        input=scrape(client).encode(),
        capture_output=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@pytest.mark.usefixtures("exposed")
def test_openmetrics_is_served_when_asked_for(client):
    response = client.get("/actuator/prometheus", HTTP_ACCEPT="application/openmetrics-text")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")


@pytest.mark.usefixtures("exposed")
def test_unresolved_paths_count_as_not_found_not_as_their_raw_path(client):
    # A word, not digits: digits turn up inside the samples' values.
    client.get("/api/some/random/path/unroutable-segment")

    text = scrape(client)

    assert 'uri="NOT_FOUND"' in text
    assert "unroutable-segment" not in text


@pytest.mark.urls("tests.platform.urls")
def test_unhandled_exceptions_are_labelled_with_their_class():
    Client(raise_request_exception=False).get("/api/broken")

    samples = [
        sample
        for family in metrics.scrape_registry().collect()
        if family.name == "http_server_requests_seconds"
        for sample in family.samples
        if sample.name.endswith("_count") and sample.labels["uri"] == "/api/broken"
    ]

    assert [s.labels["exception"] for s in samples] == ["RuntimeError"]
    assert samples[0].labels["error"] == "RuntimeError"
    assert samples[0].labels["outcome"] == "SERVER_ERROR"
