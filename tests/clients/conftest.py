"""The adapters' client (clients/python) against the live platform: the stack's PostgreSQL and
gunicorn (tests/stack/conftest.py), a cabinet user who owns the tests' adapters, and the
``exchange-client`` command installed beside this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg

# The stack's module-scoped fixtures, re-exported: each test module here gets a PostgreSQL of its
# own and two gunicorn workers over it.
from tests.stack.conftest import Adapter, Owner, StackDatabase
from tests.stack.conftest import gunicorn as gunicorn
from tests.stack.conftest import owner as owner
from tests.stack.conftest import stack_database as stack_database

EXCHANGE_CLIENT = Path(sys.executable).parent / "exchange-client"
TOPICS = "/api/users/topics"


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


def topic_create(owner: Owner, name: str) -> int:
    """A topic of the owner's (its adapters may publish to it), made in the cabinet API."""
    answer = owner.http.post(TOPICS, json={"name": name})
    assert answer.status_code == 201, answer.text
    topic_id: int = answer.json()["topicId"]
    return topic_id


def subscribe(owner: Owner, topic_id: int, adapter: Adapter) -> None:
    """The owner's adapter subscribed to the topic, to every type."""
    answer = owner.http.post(
        f"{TOPICS}/{topic_id}/subscriptions", json={"adapterId": adapter.adapter_id}
    )
    assert answer.status_code == 201, answer.text
