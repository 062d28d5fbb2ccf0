"""docker-compose.yml's `observability` profile, checked offline as the rest of the file is
(tests/deploy/test_compose.py): Compose's own `config` with the profile on, and what it adds:
Prometheus on the internal network with deploy/observability's scrape configuration and rules,
Grafana with the dashboard and its datasource provisioned, published on the host's loopback
only; without the profile, none of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_compose import compose, filled_env
from tests.observability.promql import OBSERVABILITY, ROOT

PROFILE_SERVICES = {"prometheus", "grafana"}


@pytest.fixture(scope="module")
def env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return filled_env(tmp_path_factory.mktemp("observability") / "test.env")


@pytest.fixture(scope="module")
def config(env_file: Path) -> dict[str, Any]:
    result = compose("--profile", "observability", "config", "--format", "json", env_file=env_file)
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Bind mounts, container path -> path in this checkout."""
    return {
        volume["target"]: str(Path(volume["source"]).relative_to(ROOT))
        for volume in service["volumes"]
        if volume["type"] == "bind"
    }


def test_compose_config_passes_with_the_profile(env_file: Path):
    result = compose("--profile", "observability", "config", "--quiet", env_file=env_file)

    assert result.returncode == 0, result.stderr


def test_the_profile_alone_adds_prometheus_and_grafana(config: dict[str, Any], env_file: Path):
    without = compose("config", "--format", "json", env_file=env_file)
    assert without.returncode == 0, without.stderr
    plain = set(json.loads(without.stdout)["services"])

    assert set(config["services"]) - plain == PROFILE_SERVICES
    for name in PROFILE_SERVICES:
        assert config["services"][name]["profiles"] == ["observability"]


def test_prometheus_scrapes_the_backend_on_the_internal_network_with_the_rules(
    config: dict[str, Any],
):
    prometheus = config["services"]["prometheus"]

    assert set(prometheus["networks"]) == {"internal"}
    assert set(config["services"]["backend"]["networks"]) >= {"internal"}
    assert not prometheus.get("ports")
    assert mounts(prometheus) == {
        "/etc/prometheus/prometheus.yml": "deploy/observability/prometheus/prometheus.yml",
        "/etc/prometheus/rules/alerts.yml": "deploy/observability/prometheus/alerts.yml",
    }
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    scraping = yaml.safe_load((OBSERVABILITY / "prometheus/prometheus.yml").read_text())
    assert scraping["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    jobs = {job["job_name"]: job for job in scraping["scrape_configs"]}
    assert jobs["platform"]["metrics_path"] == "/actuator/prometheus"
    assert jobs["platform"]["static_configs"] == [{"targets": ["backend:8000"]}]
    # The backend admits Prometheus's Host header and exposes the endpoint it reads.
    backend = config["services"]["backend"]["environment"]
    assert "backend" in backend["ALLOWED_HOSTS"].split(",")
    assert "prometheus" in backend["MANAGEMENT_ENDPOINTS_EXPOSURE"].split(",")
    assert jobs["platform-webhooks"]["dns_sd_configs"] == [
        {"names": ["webhooks"], "type": "A", "port": 9100}
    ]
    assert "9100" in " ".join(config["services"]["webhooks"]["command"])


def test_grafana_gets_the_dashboard_and_datasource_and_listens_on_loopback_only(
    config: dict[str, Any],
):
    grafana = config["services"]["grafana"]

    assert [(port["host_ip"], port["target"]) for port in grafana["ports"]] == [("127.0.0.1", 3000)]
    assert mounts(grafana) == {
        "/etc/grafana/provisioning": "deploy/observability/grafana/provisioning",
        "/etc/grafana/dashboards": "deploy/observability/grafana/dashboards",
    }
    provisioning = OBSERVABILITY / "grafana" / "provisioning"
    [provider] = yaml.safe_load((provisioning / "dashboards/platform.yml").read_text())["providers"]
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    [datasource] = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert (datasource["type"], datasource["url"]) == ("prometheus", "http://prometheus:9090")
    assert datasource["isDefault"] is True
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (OBSERVABILITY / "grafana/dashboards" / Path(home).name).is_file()
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_the_profiles_services_rotate_their_logs_and_restart(config: dict[str, Any]):
    for name in PROFILE_SERVICES:
        service = config["services"][name]
        assert service["logging"]["driver"] == "json-file", name
        assert service["logging"]["options"] == {"max-size": "100m", "max-file": "10"}, name
        assert service["restart"] == "unless-stopped", name
        assert service["healthcheck"]["test"][0] == "CMD", name
