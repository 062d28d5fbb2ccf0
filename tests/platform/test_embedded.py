"""The embedded PostgreSQL: started on demand, once, shared, and left running for the next process."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from platform_site import embedded

ROOT = Path(__file__).resolve().parents[2]

# Slow: the tests start and stop PostgreSQL servers of their own, from new processes.
pytestmark = pytest.mark.slow


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


@pytest.fixture(scope="module")
def pgdata(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("embedded") / "pg"
    yield path
    embedded.server_stop(pgdata=path)


def start_in_subprocess(pgdata: Path) -> str:
    code = "import sys; from pathlib import Path; from platform_site import embedded; print(embedded.server_start(pgdata=Path(sys.argv[1])))"
    result = subprocess.run(
        [sys.executable, "-c", code, str(pgdata)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_processes_starting_a_fresh_server_at_once_share_one_server(pgdata):
    with ThreadPoolExecutor(max_workers=4) as pool:
        urls = list(pool.map(start_in_subprocess, [pgdata] * 4))

    assert len(set(urls)) == 1
    with psycopg.connect(urls[0]) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        database = conn.execute("SELECT current_database()").fetchone()
    assert version is not None
    assert version[0].startswith("18.")
    assert database == ("platform",)


def test_the_server_outlives_the_process_that_started_it(pgdata):
    url = start_in_subprocess(pgdata)
    pid = postmaster_pid(pgdata)

    assert embedded.server_start(pgdata=pgdata) == url
    assert postmaster_pid(pgdata) == pid
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_stopped_server_starts_again_with_its_data(pgdata):
    url = embedded.server_start(pgdata=pgdata)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS survivor (id int)")

    embedded.server_stop(pgdata=pgdata)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    again = embedded.server_start(pgdata=pgdata)

    with psycopg.connect(again) as conn:
        assert conn.execute("SELECT to_regclass('survivor') IS NOT NULL").fetchone() == (True,)


def test_a_set_database_url_is_left_alone(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.internal/exchange")
    monkeypatch.setattr(embedded, "server_start", None)  # calling it would fail the test

    embedded.ensure_database_url()

    assert os.environ["DATABASE_URL"] == "postgresql://app@db.internal/exchange"


def test_manage_py_starts_the_embedded_server_when_database_url_is_unset(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    code = (
        "import os, runpy, sys; sys.argv = ['manage.py', 'shell', '-v', '0', '-c', "
        "'import os; print(os.environ[\"DATABASE_URL\"])']; runpy.run_path('manage.py', run_name='__main__')"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("postgresql://postgres@")
    assert str(embedded.PGDATA).replace("/", "%2F") in result.stdout
