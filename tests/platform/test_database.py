"""The platform's database backend: pooled checkouts without a round trip, and still safe.

A connection closed by the server while it sat in the pool (a restart, a terminated backend, an
idle timeout) must be replaced before a request uses it; a healthy one must be handed out without
a query.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import OperationalError, ProgrammingError, connection
from django.test import override_settings
from prometheus_client import REGISTRY

from platform_site.database import direct_connect, prepared_cursor
from platform_site.db.base import connection_is_quiet

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh_pool() -> Iterator[None]:
    """A pool of its own with one connection, so the next checkout is the one we kill."""
    options = connection.settings_dict["OPTIONS"]["pool"]
    saved = dict(options)
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]
    options.update(min_size=1, max_size=1)
    yield
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]
    options.clear()
    options.update(saved)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid: int = cursor.fetchone()[0]
    return pid


def release_and_terminate() -> int:
    """Give the connection back to the pool, then terminate its backend from another one."""
    pid = backend_pid()
    pooled: psycopg.Connection[Any] = connection.connection
    connection.close()
    with direct_connect(autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while connection_is_quiet(pooled):
        assert time.monotonic() < deadline, "the terminated backend's socket never turned readable"
        time.sleep(0.01)
    return pid


def last_query_start(pid: int) -> Any:
    """When the backend last started a statement, as PostgreSQL's activity view reports it."""
    with direct_connect(autocommit=True) as admin:
        row = admin.execute(
            "SELECT query_start FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
    assert row is not None
    return row[0]


def test_a_connection_the_server_closed_is_replaced_before_use(fresh_pool: None) -> None:
    first = release_and_terminate()

    second = backend_pid()  # no OperationalError: the checkout noticed and replaced it

    assert second != first


@override_settings(DATABASE_CONN_HEALTH_CHECKS=False)
def test_without_the_check_the_dead_connection_reaches_the_request(fresh_pool: None) -> None:
    # The other side of the test above: the check is what saves the request.
    release_and_terminate()

    with pytest.raises(OperationalError):
        backend_pid()


def test_a_healthy_pooled_connection_is_handed_out_without_a_query(fresh_pool: None) -> None:
    first = backend_pid()
    connection.close()
    before = last_query_start(first)

    connection.ensure_connection()

    assert last_query_start(first) == before  # the pool's own check would have run a statement
    assert backend_pid() == first


def test_the_counting_cursor_class_is_built_once() -> None:
    params = [connection.get_connection_params() for _ in range(2)]

    # django-prometheus builds a new cursor class per call, and Django calls once per checkout.
    assert params[0]["cursor_factory"] is params[1]["cursor_factory"]
    assert params[0]["cursor_factory"].__qualname__.startswith("counting_cursor")


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, {"alias": "default", "vendor": "postgresql", **labels})
    return value or 0.0


@pytest.mark.parametrize("prepared", [False, True], ids=["cursor", "prepared_cursor"])
def test_statements_their_duration_and_their_errors_are_counted(prepared: bool) -> None:
    connection.ensure_connection()  # taking a connection may run statements of its own
    before = (
        sample("django_db_execute_total"),
        sample("django_db_execute_many_total"),
        sample("django_db_query_duration_seconds_count"),
        sample("django_db_errors_total", type="UndefinedTable"),
    )
    with prepared_cursor() if prepared else connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.executemany("SELECT %s::int", [(1,), (2,), (3,)])
        with pytest.raises(ProgrammingError):
            cursor.execute("SELECT * FROM no_such_table")
    after = (
        sample("django_db_execute_total"),
        sample("django_db_execute_many_total"),
        sample("django_db_query_duration_seconds_count"),
        sample("django_db_errors_total", type="UndefinedTable"),
    )
    executed, in_batches, timed, failed = (b - a for a, b in zip(before, after, strict=True))
    assert executed >= 5  # Django's own cursor may run a statement of its own too
    assert in_batches == 3
    assert timed == executed - 2  # a batch of three is one call, timed once
    assert failed == 1  # psycopg's own error class, as django-prometheus labels it
