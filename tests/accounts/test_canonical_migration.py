"""The migration that brings existing accounts to canonical addresses and NFKC logins: it fills
what it can, renames what is free, and stops with a report where two accounts would become one.

Each test migrates a database of its own on the suite's PostgreSQL server, in a subprocess, as
an operator's `manage.py migrate` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection

from tests.accounts.api import KELVIN, LONG_S
from tests.conftest import ROOT

BEFORE = "0004_user_manager"

# Slow: each test migrates a database of its own, in a new process.
pytestmark = pytest.mark.slow


@pytest.fixture
def database(db: Any) -> Iterator[str]:
    """The URL of a new, empty database on the suite's server; dropped afterwards."""
    params = connection.get_connection_params()
    name = f"canon_{uuid.uuid4().hex[:12]}"
    admin = {k: params[k] for k in ("host", "port", "user") if params.get(k)}
    with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    host = quote(str(params.get("host", "")), safe="")
    yield f"postgresql://{params['user']}@{host}:{params.get('port', 5432)}/{name}"
    with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def migrate(url: str, *target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", *target],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=300,
    )


def add_users(url: str, *users: tuple[str, str]) -> None:
    with psycopg.connect(url) as conn:
        for username, email in users:
            conn.execute(
                "INSERT INTO accounts_user (username, email, kind, password, is_superuser, "
                "is_staff, is_active, date_joined, first_name, last_name, phone, "
                "email_confirmed, two_factor_enabled, reset_password_required) VALUES "
                "(%s, %s, 'USER', '!', false, false, true, now(), '', '', '', true, false, false)",
                [username, email],
            )


def rows(url: str) -> dict[str, tuple[str, str]]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT username, email, email_canonical FROM accounts_user ORDER BY id"
        ).fetchall()
    return {email: (username, canonical) for username, email, canonical in found}


@pytest.mark.django_db(transaction=True)
def test_existing_accounts_get_canonical_addresses_and_nfkc_logins(database):
    assert migrate(database, "accounts", BEFORE).returncode == 0
    add_users(
        database,
        ("ada", "Ada@Example.com"),
        ("\uff4b\uff45\uff56", KELVIN),  # a full-width login, and a look-alike address
    )

    result = migrate(database)

    assert result.returncode == 0, result.stderr
    assert rows(database) == {
        "Ada@Example.com": ("ada", "ada@example.com"),
        KELVIN: ("kev", "kev1@example.org"),
    }
    assert "keeps its address" in result.stdout  # the look-alike is reported, not changed
    assert "login '\uff4b\uff45\uff56' is now 'kev'" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_two_accounts_that_would_become_one_stop_the_migration_with_their_names(database):
    assert migrate(database, "accounts", BEFORE).returncode == 0
    # The old constraint compared lower(email): the long s (U+017F) is lower-case already.
    add_users(database, ("sam", "sam@example.org"), ("longs", LONG_S), ("kev\uff11", "x@y.org"))

    result = migrate(database)

    assert result.returncode != 0
    assert "share the address 'sam@example.org'" in result.stderr
    assert "longs" in result.stderr
    assert "kev\uff11" not in result.stderr  # its NFKC form is free: a rename
    with psycopg.connect(database) as conn:  # nothing half-done: the column never came
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'accounts_user' AND column_name = 'email_canonical'"
        ).fetchall()
    assert columns == []
