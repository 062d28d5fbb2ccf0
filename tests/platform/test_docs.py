"""The documents a newcomer reads stay true to the code."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def variables_read() -> set[str]:
    settings = (ROOT / "platform_site/settings.py").read_text()
    gunicorn = (ROOT / "deploy/gunicorn.conf.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings))
    read |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', gunicorn))
    return read


def test_the_scan_finds_the_variables():
    assert {"DATABASE_URL", "MANAGEMENT_ENDPOINTS_EXPOSURE", "GUNICORN_WORKERS"} <= variables_read()


def test_every_variable_is_in_env_example():
    listed = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.M))

    assert variables_read() - listed == set()


def test_every_variable_is_in_the_operations_configuration_table():
    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", (ROOT / "docs/operations.md").read_text()))

    assert variables_read() - documented == set()


def test_the_readme_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()

    assert readme.index("make run") < readme.index("make test") < readme.index("## How it fits")


@pytest.mark.django_db
def test_make_run_serves_what_the_readme_promises_on_the_port_asked_for(tmp_path, settings, client):
    # `make run` with a stand-in for the virtualenv's python, which records what it is asked.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(
        f'#!/bin/sh\nprintf "%s|%s\\n" "$*" "$MANAGEMENT_ENDPOINTS_EXPOSURE" >> {tmp_path}/calls\n'
    )
    (fake / "python").chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("DEBUG", "MANAGEMENT_ENDPOINTS_EXPOSURE")
    }

    made = subprocess.run(
        ["make", "--no-print-directory", "-o", "install", "run", f"BIN={fake}", "PORT=8001"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert made.returncode == 0, made.stderr
    calls = [line.split("|") for line in (tmp_path / "calls").read_text().splitlines()]
    assert [argv for argv, _ in calls] == [
        "manage.py migrate --no-input",
        "manage.py seed_demo --base-url http://127.0.0.1:8001",
        "manage.py runserver 127.0.0.1:8001",
    ]
    # The diagram's Prometheus scrape answers under these settings.
    exposure = calls[-1][1]
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = exposure.split(",")
    assert client.get("/actuator/prometheus").status_code == 200
    readme = (ROOT / "README.md").read_text()
    assert "/actuator/prometheus" in readme.split("## Test it")[0]
    assert "make run PORT=8001" in readme
    assert "Ctrl-C" in readme
    assert "make db-stop" in readme
