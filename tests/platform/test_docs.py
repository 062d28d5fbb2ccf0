"""The documents a newcomer reads stay true to the code."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from platform_site.embedded import free_port

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


def make_run(
    tmp_path: Path, *arguments: str, target: str = "run"
) -> subprocess.CompletedProcess[str]:
    """`make run` (or ``target``) with a stand-in for the virtualenv's python, which records what
    it is asked and hands the port check (platform_site.embedded) to the real one: nothing is
    migrated, seeded or served. The calls are in tmp_path/calls, each
    "argv|MANAGEMENT_ENDPOINTS_EXPOSURE|DEBUG|GUNICORN_BIND"."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(
        "#!/bin/sh\n"
        'printf "%s|%s|%s|%s\\n" "$*" "$MANAGEMENT_ENDPOINTS_EXPOSURE" "$DEBUG" "$GUNICORN_BIND"'
        f" >> {tmp_path}/calls\n"
        f'if [ "$2" = platform_site.embedded ]; then exec {sys.executable} "$@"; fi\n'
    )
    (fake / "python").chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("DEBUG", "MANAGEMENT_ENDPOINTS_EXPOSURE")
    }
    # Set, so that the recipes do not ask the embedded PostgreSQL for its URL (one more call,
    # made only where the suite runs without DATABASE_URL); the stand-in connects to nothing.
    env["DATABASE_URL"] = "postgresql://make-run@127.0.0.1:1/unused"
    return subprocess.run(
        ["make", "--no-print-directory", "-o", "install", target, f"BIN={fake}", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def calls_of(tmp_path: Path) -> list[list[str]]:
    return [line.split("|") for line in (tmp_path / "calls").read_text().splitlines()]


@pytest.mark.django_db
def test_make_run_serves_what_the_readme_promises_on_the_port_asked_for(tmp_path, settings, client):
    port = free_port()

    made = make_run(tmp_path, f"PORT={port}")

    assert made.returncode == 0, made.stderr
    calls = calls_of(tmp_path)
    assert [argv for argv, *_ in calls] == [
        f"-m platform_site.embedded check-port --host 127.0.0.1 --port {port}",
        "manage.py migrate --no-input",
        f"manage.py seed_demo --base-url http://127.0.0.1:{port}",
        f"-m platform_site.develop --host 127.0.0.1 --port {port}",
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


def test_make_serve_runs_the_production_server_on_the_port_asked_for(tmp_path):
    port = free_port()

    made = make_run(tmp_path, f"PORT={port}", target="serve")

    assert made.returncode == 0, made.stderr
    assert [(argv, debug, bind) for argv, _, debug, bind in calls_of(tmp_path)] == [
        (f"-m platform_site.embedded check-port --host 127.0.0.1 --port {port}", "", ""),
        ("manage.py migrate --no-input", "", ""),
        # deploy/serve: gunicorn's processes with their event loops, DEBUG off, on HOST:PORT.
        (
            "-m gunicorn --config deploy/gunicorn.conf.py platform_site.asgi:application",
            "false",
            f"127.0.0.1:{port}",
        ),
    ]
    readme = (ROOT / "README.md").read_text()
    assert "make serve" in readme


def test_make_run_on_a_taken_port_says_who_listens_and_stops_before_migrating(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        made = make_run(tmp_path, f"PORT={port}")

    assert made.returncode != 0
    assert [argv for argv, *_ in calls_of(tmp_path)] == [
        f"-m platform_site.embedded check-port --host 127.0.0.1 --port {port}"
    ]
    assert f"127.0.0.1:{port} is taken: process {os.getpid()} (" in made.stderr
    assert "another `make run`" in made.stderr
    assert "Nothing was migrated or seeded" in made.stderr
    assert re.search(r"make run PORT=\d+$", made.stderr, re.M)


def test_the_readme_says_a_second_make_run_keeps_the_demo_passwords_and_how_to_rotate_them():
    run_it = (ROOT / "README.md").read_text().split("## Test it")[0]

    assert "new passwords on every run" not in run_it
    assert ".data/demo-accounts.json" in run_it
    assert "make demo-rotate" in run_it
    assert "is taken" in run_it
