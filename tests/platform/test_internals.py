"""platform_site.internals: each library's private detail that the platform relies on, one test for
each function, written to fail when the library changes it (a new release under `make
lock-upgrade`), so that the function is looked at before anything misbehaves."""

from __future__ import annotations

import inspect
import socket
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.db import DatabaseError, ProgrammingError, connections
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoPostgresWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models.base import ModelState
from django.test import RequestFactory
from django_prometheus.db.backends.postgresql.base import DatabaseWrapper as PrometheusWrapper
from django_ratelimit.core import get_usage
from django_redis import get_redis_connection
from rest_framework.request import Request

from accounts.models import User
from platform_site import embedded
from platform_site.internals import (
    connection_params_without_prometheus,
    cursor_wrapped,
    embedded_server_lock,
    http_request_of,
    locmem_cache_entries,
    model_instance_copy,
    ratelimit_rate,
    ratelimit_window_end,
    redis_socket,
)
from tests.factories import UserFactory

START = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
KEYS = ["adapter:1", "adapter:2", "email:ada@example.com", "203.0.113.7"]


def test_the_django_request_is_the_one_drf_wraps() -> None:
    django_request = RequestFactory().get("/")

    assert http_request_of(Request(django_request)) is django_request


def test_the_redis_socket_is_the_one_redis_py_connected(sessions_remembered: Any) -> None:
    pool = get_redis_connection("default").connection_pool
    connection_ = pool.get_connection()
    try:
        connection_.connect()
        sock = redis_socket(connection_)
        assert isinstance(sock, socket.socket)
        assert sock.getpeername()[1] == 6379
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert sock.recv(16) == b"+PONG\r\n"
    finally:
        pool.release(connection_)


def test_django_keeps_per_instance_only_what_a_copy_makes_anew() -> None:
    # A field added to Django's ModelState would be dropped by the copy: look at it first.
    kept = {name for name in vars(ModelState) if not name.startswith("__")}

    assert kept == {"db", "adding", "fields_cache"}


@pytest.mark.django_db
def test_a_copied_instance_is_a_stored_row_of_its_own() -> None:
    stored = User.objects.get(pk=UserFactory.create(first_name="Ada").pk)

    copy = model_instance_copy(stored)
    copy.first_name = "Grace"
    copy.save(update_fields=["first_name"])  # an UPDATE: the copy is not being added

    assert copy._state is not stored._state
    assert (copy._state.db, copy._state.adding) == ("default", False)
    assert stored.first_name == "Ada"
    assert User.objects.get(pk=stored.pk).first_name == "Grace"
    assert User.objects.count() == 1


def test_skipping_django_prometheus_leaves_django_s_parameters_but_the_cursor() -> None:
    wrapper = connections["default"]
    ours = connection_params_without_prometheus(wrapper)
    theirs = PrometheusWrapper.get_connection_params(wrapper)

    assert ours == DjangoPostgresWrapper.get_connection_params(wrapper)
    # django-prometheus's override only swaps in a counting subclass of Django's cursor.
    assert {k: v for k, v in theirs.items() if k != "cursor_factory"} == {
        k: v for k, v in ours.items() if k != "cursor_factory"
    }
    assert issubclass(theirs["cursor_factory"], ours["cursor_factory"])


@pytest.mark.django_db
def test_a_wrapped_cursor_is_django_s_own_wrapping() -> None:
    wrapper = connections["default"]
    wrapper.ensure_connection()
    with cursor_wrapped(wrapper, wrapper.connection.cursor()) as cursor:
        assert isinstance(cursor, CursorWrapper)
        assert not isinstance(cursor, CursorDebugWrapper)
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)

    wrapper.force_debug_cursor = True  # as DEBUG does: the query log
    try:
        with cursor_wrapped(wrapper, wrapper.connection.cursor()) as cursor:
            cursor.execute("SELECT 2")
        assert wrapper.queries_log[-1]["sql"] == "SELECT 2"
    finally:
        wrapper.force_debug_cursor = False

    refused: list[BaseException] = []

    def elsewhere() -> None:
        try:
            cursor_wrapped(wrapper, wrapper.connection.cursor())
        except DatabaseError as error:
            refused.append(error)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert refused, "another thread's use of the connection was not refused"

    with (
        cursor_wrapped(wrapper, wrapper.connection.cursor()) as cursor,
        pytest.raises(ProgrammingError),  # psycopg's error, raised as Django's
    ):
        cursor.execute("SELECT * FROM no_such_table")


def test_a_local_memory_cache_counts_its_entries() -> None:
    cache = LocMemCache("internals", {})
    cache.clear()
    cache.set_many({"a": 1, "b": 2})

    assert locmem_cache_entries(cache) == 2
    assert locmem_cache_entries(DummyCache("internals", {})) is None


def test_the_embedded_server_lock_is_the_one_the_library_starts_servers_under() -> None:
    server_class = embedded._library().postgres_server.PostgresServer

    lock = embedded_server_lock(server_class.__new__(server_class))

    assert type(lock).__name__ == "InterProcessLock"
    assert hasattr(lock, "__enter__")
    assert "with self._lock:" in inspect.getsource(server_class.__init__)


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        ("3/s", (3, 1)),
        ("5/m", (5, 60)),
        ("10/5m", (10, 300)),
        ("100/h", (100, 3600)),
        ("7/d", (7, 86400)),
    ],
)
def test_a_rate_reads_as_django_ratelimit_reads_it(rate: str, expected: tuple[int, int]) -> None:
    request = RequestFactory().get("/")
    usage = get_usage(request, group="internals", key=lambda group, request: "k", rate=rate)

    assert ratelimit_rate(rate) == expected
    assert usage is not None
    assert usage["limit"] == expected[0]


@pytest.mark.parametrize("period", [1, 60, 300, 3600])
def test_a_window_ends_when_django_ratelimit_s_does(period: int) -> None:
    from django_ratelimit.core import _get_window

    with time_machine.travel(START, tick=False) as traveller:
        for _ in range(2 * period):
            now = int(datetime.now(UTC).timestamp())
            for key in KEYS:
                assert ratelimit_window_end(key, period, now) == _get_window(key, period), (
                    key,
                    now,
                )
            traveller.shift(1)


def test_the_worker_s_serve_is_uvicorn_worker_s_own_but_for_the_server_class() -> None:
    """platform_site.internals.uvicorn_worker_serve repeats uvicorn_worker's private _serve
    (which has no setting for the server class), and platform_site.worker.Worker overrides it."""
    from uvicorn_worker import UvicornWorker

    source = inspect.getsource(UvicornWorker._serve)
    body = [line.strip() for line in source.splitlines()[1:] if line.strip()]

    assert body == [
        "self.config.app = self.wsgi",
        "server = Server(config=self.config)",
        "self._install_sigquit_handler()",
        "await server.serve(sockets=self.sockets)",
        "if not server.started:",
        "sys.exit(Arbiter.WORKER_BOOT_ERROR)",
    ]
    assert "self._serve()" in inspect.getsource(UvicornWorker.run)
