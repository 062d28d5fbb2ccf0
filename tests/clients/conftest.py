"""The adapters' client (clients/python) against the live platform: the stack's PostgreSQL and
gunicorn (tests/stack/conftest.py), a cabinet user who owns the tests' adapters, and the
``exchange-client`` command installed beside this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

# The stack's module-scoped fixtures, re-exported: each test module here gets a PostgreSQL of its
# own and two gunicorn workers over it.
from tests.stack.conftest import Gunicorn, StackDatabase
from tests.stack.conftest import gunicorn as gunicorn
from tests.stack.conftest import stack_database as stack_database

EXCHANGE_CLIENT = Path(sys.executable).parent / "exchange-client"
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


@pytest.fixture(scope="module")
def owner(gunicorn: Gunicorn, stack_database: StackDatabase) -> Iterator[Owner]:
    stack_database.shell(
        "from accounts.models import User\n"
        "User.objects.create_user(\n"
        f"    username='client-owner', email={OWNER_EMAIL!r}, password={OWNER_PASSWORD!r},\n"
        "    first_name='Ada', last_name='Lovelace', phone='+4915112345678', email_confirmed=True,\n"
        ")\n"
    )
    cabinet = Owner(gunicorn.base_url)
    yield cabinet
    cabinet.http.close()


def cli_env(base_url: str, adapter: Adapter, device: str, **extra: str) -> dict[str, str]:
    """The environment ``exchange-client`` reads, over this process's (minus any EXCHANGE_*)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXCHANGE_")}
    env.update(
        {
            "EXCHANGE_URL": base_url,
            "EXCHANGE_LOGIN": adapter.login,
            "EXCHANGE_PASSWORD": adapter.password,
            "EXCHANGE_DEVICE_ID": device,
            **extra,
        }
    )
    return env


def run_cli(
    *arguments: str, env: Mapping[str, str], stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXCHANGE_CLIENT), *arguments],
        env=env,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )


def stock(
    database: StackDatabase, adapter: Adapter, count: int, *, type: str = "stock"
) -> list[str]:
    """``count`` messages queued for ``adapter`` in one statement, payload ``{"n": 1..count}``
    (queue order); their ids in that order."""
    with psycopg.connect(database.url, autocommit=True) as conn:
        rows = conn.execute(
            "INSERT INTO exchange_message (message_id, recipient_id, type, payload, headers, receive_count) "
            "SELECT gen_random_uuid(), %s, %s, jsonb_build_object('n', n), '{}', 0 "
            "FROM generate_series(1, %s) AS n ORDER BY n RETURNING message_id, seq",
            [adapter.adapter_id, type, count],
        ).fetchall()
    return [str(message_id) for message_id, _ in sorted(rows, key=lambda row: row[1])]


def query(database: StackDatabase, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database.url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()
