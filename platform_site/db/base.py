"""PostgreSQL with django-prometheus's query metrics, a cheap checkout from the pool, and
prepared statements for the exchange's hot path (``prepared_cursor``).

With Django's psycopg pool, every request that touches the database takes a connection from the
pool and gives it back. Two costs of that step are not worth paying on every request:

- django-prometheus builds a new cursor class each time Django asks for the connection parameters,
  and Django asks on every checkout (a new class is slow to build and leaves garbage for the cycle
  collector), and its cursors look their labelled series up on every statement. The counting
  cursor here (``counting_cursor``) feeds django-prometheus's own metrics, with the series looked
  up once per database alias and cursor class.
- The pool's health check is a round trip per checkout. A pooled connection is idle: PostgreSQL
  says nothing on it unless it is closing it (a restart, a terminated backend, an idle timeout),
  and then the socket turns readable. So the round trip is made only when the socket has
  something to say, and a connection that fails it is replaced, as the pool's own check does.
"""

from __future__ import annotations

import functools
import select
import time
from typing import Any

import psycopg
from django.conf import settings
from django.db.backends.utils import CursorWrapper
from django_prometheus.db import (
    errors_total,
    execute_many_total,
    execute_total,
    query_duration_seconds,
)
from django_prometheus.db.backends.postgresql import base
from psycopg_pool import ConnectionPool, PoolTimeout

from platform_site.db.availability import availability
from platform_site.internals import connection_params_without_prometheus, cursor_wrapped

# libpq's shortest: a server that refuses answers at once; a host that drops packets, in this.
PROBE_CONNECT_TIMEOUT_SECONDS = 2


@functools.cache
def counting_cursor(cursor_class: type, alias: str, vendor: str) -> type:
    """``cursor_class`` counting its statements, their duration and their errors in
    django-prometheus's metrics (``django_db_*``), as its ExportingCursorWrapper does, but with the
    labelled series looked up here once: the wrapper's three ``labels()`` calls per statement cost
    more than the rest of its bookkeeping."""
    executed = execute_total.labels(alias, vendor)
    in_batches = execute_many_total.labels(alias, vendor)
    duration = query_duration_seconds.labels(alias, vendor)

    class CountingCursor(cursor_class):  # type: ignore[misc]
        def execute(self, *args: Any, **kwargs: Any) -> Any:
            executed.inc()
            return self._measured(super().execute, *args, **kwargs)

        def executemany(self, query: Any, param_list: Any, *args: Any, **kwargs: Any) -> Any:
            executed.inc(len(param_list))
            in_batches.inc(len(param_list))
            return self._measured(super().executemany, query, param_list, *args, **kwargs)

        def _measured(self, method: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            except Exception as error:
                errors_total.labels(alias, vendor, type(error).__name__).inc()
                raise
            finally:
                duration.observe(time.perf_counter() - started)

    return CountingCursor


def connection_is_quiet(connection: psycopg.Connection[Any]) -> bool:
    """True when an idle connection's socket has nothing to read: the server has not closed it."""
    if connection.closed:
        return False
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    return not poller.poll(0)


class DatabaseWrapper(base.DatabaseWrapper):  # type: ignore[misc]  # django-prometheus is untyped
    def get_connection_params(self) -> dict[str, Any]:
        # Django's parameters (skipping django-prometheus's override), with the counting cursor.
        params = connection_params_without_prometheus(self)
        cursor_class = params["cursor_factory"]
        params["cursor_factory"] = counting_cursor(cursor_class, self.alias, self.vendor)
        return params

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        pool = self.pool
        if pool is None:
            return super().get_new_connection(conn_params)
        connection = self._checked_out(conn_params)
        if not settings.DATABASE_CONN_HEALTH_CHECKS:
            return connection
        # Every connection the pool holds may have been closed by the same restart.
        for _ in range(pool.max_size + 1):
            if connection_is_quiet(connection):
                return connection
            try:
                ConnectionPool.check_connection(connection)
            except psycopg.Error:
                pool.putconn(connection)  # broken: the pool discards it and opens another
                connection = self._checked_out(conn_params)
            else:
                return connection
        return connection

    def _checked_out(self, conn_params: dict[str, Any]) -> Any:
        """A connection from the pool, waited for in slices of the pool's own timeout up to
        DATABASE_POOL_TIMEOUT_SECONDS; or at once the OperationalError of a server that does
        not answer (platform_site.db.availability)."""
        probe = {key: value for key, value in conn_params.items() if key != "cursor_factory"}
        probe["connect_timeout"] = PROBE_CONNECT_TIMEOUT_SECONDS
        deadline = time.monotonic() + settings.DATABASE_POOL_TIMEOUT_SECONDS
        while True:
            if availability.down and not availability.answers(probe):
                raise psycopg.OperationalError("PostgreSQL does not answer")
            try:
                return super().get_new_connection(conn_params)
            except PoolTimeout:
                # A busy pool, or a server that is gone: only the server can say which.
                if not availability.answers(probe) or time.monotonic() >= deadline:
                    raise

    def prepared_cursor(self) -> CursorWrapper:
        """A cursor that binds parameters on the server, for the few statements that every exchange
        request runs. psycopg prepares a statement on its fifth run on a connection, and from then
        PostgreSQL neither parses nor plans it again (pooled connections live for an hour).
        Django's own cursors bind on the client, so every run is parsed and planned afresh.
        PostgreSQL must be able to tell each parameter's type from the statement."""
        self.ensure_connection()
        with self.wrap_database_errors:
            cursor_class = counting_cursor(psycopg.Cursor, self.alias, self.vendor)
            return cursor_wrapped(self, cursor_class(self.connection))
