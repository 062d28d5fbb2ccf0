"""The actuator's health, info and index, byte for byte as Spring Boot serves them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from health import indicators
from platform_site.embedded import free_port

V3 = "application/vnd.spring-boot.actuator.v3+json"

pytestmark = pytest.mark.django_db


@pytest.fixture
def closed_port() -> int:
    return free_port()


@pytest.fixture
def database_gone(closed_port: int) -> Iterator[None]:
    """The health check's database address points at a port where nothing listens."""
    saved = {key: connection.settings_dict[key] for key in ("HOST", "PORT")}
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port))
    yield
    connection.settings_dict.update(saved)


def test_health_is_up_with_db_disk_space_and_ping_in_springs_order(client):
    response = client.get("/api/actuator/health")

    assert response.status_code == 200
    assert response["Content-Type"] == V3
    body = response.json()
    assert list(body) == ["status", "components"]
    assert body["status"] == "UP"
    assert list(body["components"]) == ["db", "diskSpace", "ping"]
    assert body["components"]["db"] == {
        "status": "UP",
        "details": {"database": "PostgreSQL", "validationQuery": "isValid()"},
    }
    assert body["components"]["ping"] == {"status": "UP"}
    disk = body["components"]["diskSpace"]
    assert disk["status"] == "UP"
    assert list(disk["details"]) == ["total", "free", "threshold", "path", "exists"]
    assert disk["details"]["threshold"] == 10485760
    assert disk["details"]["path"] == os.path.join(os.getcwd(), ".")
    assert disk["details"]["exists"] is True
    assert 0 < disk["details"]["free"] <= disk["details"]["total"]


def test_health_body_is_compact_json_like_springs(client):
    content = client.get("/api/actuator/health").content.decode()

    assert content.startswith('{"status":"UP","components":{"db":{"status":"UP"')
    assert ": " not in content
    assert ", " not in content


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (None, V3),
        ("*/*", V3),
        ("application/json", "application/json"),
        (
            "application/vnd.spring-boot.actuator.v2+json",
            "application/vnd.spring-boot.actuator.v2+json",
        ),
        ("application/json;q=0.9, application/vnd.spring-boot.actuator.v3+json", V3),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", V3),
    ],
)
def test_media_type_is_negotiated_as_spring_does(client, accept, content_type):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}

    response = client.get("/api/actuator/health", **headers)

    assert response.status_code == 200
    assert response["Content-Type"] == content_type


def test_media_type_that_cannot_be_produced_is_a_406_problem(client):
    response = client.get("/api/actuator/health", HTTP_ACCEPT="text/html")

    assert response.status_code == 406
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "NOT_ACCEPTABLE"


@pytest.mark.usefixtures("database_gone")
def test_health_is_503_down_when_the_database_is_gone_and_only_the_log_has_the_error(
    client, closed_port, caplog
):
    response = client.get("/api/actuator/health")

    assert response.status_code == 503
    assert response["Content-Type"] == V3
    body = response.json()
    assert body["status"] == "DOWN"
    db = body["components"]["db"]
    assert db["status"] == "DOWN"
    assert db["details"] == {"database": "PostgreSQL", "validationQuery": "isValid()"}
    assert str(closed_port) not in response.content.decode()
    assert body["components"]["ping"] == {"status": "UP"}
    [logged] = [r.getMessage() for r in caplog.records if r.name == "health.indicators"]
    assert logged.startswith("Health: the database is DOWN: OperationalError: connection failed")
    assert str(closed_port) in logged


@pytest.mark.usefixtures("database_gone")
def test_readiness_is_down_while_the_database_is_gone_and_liveness_stays_up(client):
    readiness = client.get("/api/actuator/health/readiness")
    liveness = client.get("/api/actuator/health/liveness")

    assert (readiness.status_code, readiness.json()) == (503, {"status": "DOWN"})
    assert (liveness.status_code, liveness.json()) == (200, {"status": "UP"})


def test_readiness_is_up_when_the_database_answers_and_migrations_are_applied(client, monkeypatch):
    monkeypatch.setattr(indicators, "_migrations_applied", False)

    response = client.get("/api/actuator/health/readiness")

    assert (response.status_code, response.json()) == (200, {"status": "UP"})


def test_readiness_is_down_while_a_migration_is_unapplied(client, monkeypatch):
    monkeypatch.setattr(indicators, "_migrations_applied", False)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = 'accounts'")

    response = client.get("/api/actuator/health/readiness")

    assert (response.status_code, response.json()) == (503, {"status": "DOWN"})


def test_disk_below_the_threshold_is_down_and_takes_health_down(client, settings):
    settings.MANAGEMENT_HEALTH_DISKSPACE_THRESHOLD_BYTES = 2**62

    response = client.get("/api/actuator/health")

    assert response.status_code == 503
    assert response.json()["status"] == "DOWN"
    assert response.json()["components"]["diskSpace"]["status"] == "DOWN"
    assert response.json()["components"]["db"]["status"] == "UP"


def test_one_component_is_served_alone_on_its_path(client):
    response = client.get("/api/actuator/health/db")

    assert response.status_code == 200
    assert response.json() == {
        "status": "UP",
        "details": {"database": "PostgreSQL", "validationQuery": "isValid()"},
    }
    assert client.get("/api/actuator/health/ping").json() == {"status": "UP"}


def test_unknown_health_path_is_a_404_problem(client):
    response = client.get("/api/actuator/health/broker")

    assert response.status_code == 404
    assert response.json()["code"] == "NOT_FOUND"


@pytest.mark.parametrize("prefix", ["/api/actuator", "/actuator"])
def test_health_urls_answer_under_both_prefixes(client, prefix):
    assert client.get(f"{prefix}/health").status_code == 200
    assert client.get(f"{prefix}/health/liveness").status_code == 200
    assert client.get(f"{prefix}/info").status_code == 200


def test_head_is_answered_like_get(client):
    response = client.head("/api/actuator/health")

    assert response.status_code == 200
    assert response["Content-Type"] == V3


def test_other_methods_are_a_405_problem_not_a_csrf_failure(client):
    response = client.post("/api/actuator/health")

    assert response.status_code == 405
    assert response.json()["code"] == "METHOD_NOT_ALLOWED"
    assert response["Allow"] == "GET, HEAD"


def test_info_names_the_build_and_runtime(client, settings):
    settings.GIT_COMMIT = "0123abc"

    body = client.get("/api/actuator/info").json()

    assert body["build"] == {"name": "exchange-platform", "version": settings.PLATFORM_VERSION}
    assert body["git"] == {"commit": {"id": "0123abc"}}
    assert set(body["runtime"]) == {"python", "django"}


def links(response: Any) -> dict[str, Any]:
    assert response.status_code == 200
    return dict(response.json()["_links"])


def test_public_index_links_health_and_info_only(client, settings):
    settings.ALLOWED_HOSTS = ["platform.example"]

    body = links(client.get("/api/actuator", HTTP_HOST="platform.example"))

    assert body == {
        "self": {"href": "http://platform.example/api/actuator", "templated": False},
        "health": {"href": "http://platform.example/api/actuator/health", "templated": False},
        "health-path": {
            "href": "http://platform.example/api/actuator/health/{*path}",
            "templated": True,
        },
        "info": {"href": "http://platform.example/api/actuator/info", "templated": False},
    }


def test_internal_index_adds_metrics_and_prometheus_when_exposed(client, settings):
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ["health", "info", "metrics", "prometheus"]

    body = links(client.get("/actuator"))

    assert list(body) == [
        "self",
        "health",
        "health-path",
        "info",
        "metrics",
        "metrics-requiredMetricName",
        "prometheus",
    ]
    assert body["metrics-requiredMetricName"] == {
        "href": "http://testserver/actuator/metrics/{requiredMetricName}",
        "templated": True,
    }


def test_endpoint_left_out_of_the_exposure_is_a_404(client, settings):
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ["health"]

    assert client.get("/api/actuator/info").status_code == 404
    assert client.get("/actuator/metrics").status_code == 404
    assert "info" not in links(client.get("/api/actuator"))


def test_health_json_never_mentions_a_broker(client):
    assert "broker" not in json.dumps(client.get("/api/actuator/health").json())


def test_redis_is_no_component_unless_enabled(client, settings, sessions_remembered):
    assert settings.MANAGEMENT_HEALTH_REDIS_ENABLED is False

    assert list(client.get("/api/actuator/health").json()["components"]) == [
        "db",
        "diskSpace",
        "ping",
    ]
    assert client.get("/api/actuator/health/redis").status_code == 404


def test_an_enabled_redis_component_shows_the_servers_version(
    client, settings, sessions_remembered
):
    settings.MANAGEMENT_HEALTH_REDIS_ENABLED = True
    version = sessions_remembered.info("server")["redis_version"]

    response = client.get("/api/actuator/health")

    assert response.status_code == 200
    assert list(response.json()["components"]) == ["db", "diskSpace", "ping", "redis"]
    assert response.json()["components"]["redis"] == {
        "status": "UP",
        "details": {"version": version},
    }
    assert client.get("/api/actuator/health/redis").json()["status"] == "UP"


def test_an_enabled_redis_that_does_not_answer_takes_health_down_and_is_left_aside(
    client, settings, closed_port, caplog
):
    from platform_site.cache import availability

    settings.MANAGEMENT_HEALTH_REDIS_ENABLED = True
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"

    response = client.get("/api/actuator/health")

    assert response.status_code == 503
    assert response.json()["status"] == "DOWN"
    assert response.json()["components"]["redis"] == {
        "status": "DOWN",
        "details": {"error": "ConnectionError"},
    }
    assert response.json()["components"]["db"]["status"] == "UP"
    assert str(closed_port) not in response.content.decode()  # the reason is the log's
    assert availability.down  # what the probe saw counts for the process's requests


def test_an_enabled_redis_component_without_redis_configured_is_down(client, settings):
    settings.MANAGEMENT_HEALTH_REDIS_ENABLED = True
    settings.REDIS_URL = ""

    body = client.get("/api/actuator/health/redis").json()

    assert body == {"status": "DOWN", "details": {"error": "REDIS_URL is not set"}}
