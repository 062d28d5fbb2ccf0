"""Whether Redis answers, as this process last saw it: while it does not, nothing waits for it.

A Redis that accepts connections and never answers costs each call its socket timeout
(REDIS_SOCKET_TIMEOUT_SECONDS), and a request makes several calls: rate limits, the session's
revision, the queue's depth. So the first call that fails (a timeout, a refused or reset
connection) marks Redis down for this process, and for REDIS_UNAVAILABLE_SECONDS every later call,
of that request and of every other thread, fails at once without touching the network. When the
while has run out, one call (the first thread to ask) tries Redis again, while the others keep
leaving it aside; its answer marks Redis up again, or down for another while. The health check's
probe counts too (health.indicators.redis_health). Each change is logged once, at WARNING.

Every connection to Redis goes through this: the cache's connection pool makes its connections of
the classes below (settings.redis_caches), and the session check's own line asks ``admit()``
before it writes (accounts/liveness.py). A call left aside raises RedisUnavailable, a redis-py
ConnectionError, so every caller's existing handling of a Redis outage applies unchanged: what
each use then does is in docs/operations.md, "When Redis is slow or gone".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)


class RedisUnavailable(RedisConnectionError):
    """Redis was left aside: this process saw it fail within REDIS_UNAVAILABLE_SECONDS."""


class RedisAvailability:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._down = False
        self._left_at = 0.0  # when Redis was last left aside (or last tried)
        self._trying: int | None = None  # the thread that tries Redis again after a while
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._down

    def admit(self) -> None:
        """Return if a call to Redis may go ahead; raise RedisUnavailable if it is left aside."""
        if not self._down:
            return
        with self._lock:
            if not self._down or self._trying == threading.get_ident():
                return
            now = self._clock()
            if now < self._left_at + settings.REDIS_UNAVAILABLE_SECONDS:
                raise RedisUnavailable("Redis did not answer a moment ago; left aside for now")
            # This thread tries it; the others keep leaving it aside until its answer.
            self._trying = threading.get_ident()
            self._left_at = now

    def failed(self, error: BaseException) -> None:
        with self._lock:
            self._left_at = self._clock()
            self._trying = None
            if not self._down:
                self._down = True
                logger.warning(
                    "Redis does not answer (%s): left aside for %s s at a time",
                    error,
                    settings.REDIS_UNAVAILABLE_SECONDS,
                )

    def answered(self) -> None:
        if not self._down:
            return
        with self._lock:
            self._trying = None
            if self._down:
                self._down = False
                logger.warning("Redis answers again")


availability = RedisAvailability()

_FAILURES = (RedisConnectionError, RedisTimeoutError)


class _Guarded:
    """A redis-py connection that asks ``availability`` before it connects or sends, and tells
    it how each attempt went."""

    def connect(self) -> None:
        availability.admit()
        try:
            super().connect()  # type: ignore[misc]
        except RedisUnavailable:
            raise
        except _FAILURES as error:
            availability.failed(error)
            raise

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        availability.admit()
        try:
            super().send_packed_command(command, check_health)  # type: ignore[misc]
        except RedisUnavailable:
            raise
        except _FAILURES as error:
            availability.failed(error)
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().read_response(*args, **kwargs)  # type: ignore[misc]
        except _FAILURES as error:
            availability.failed(error)
            raise
        availability.answered()
        return response


class GuardedConnection(_Guarded, Connection):
    pass


class GuardedSSLConnection(_Guarded, SSLConnection):
    pass


class GuardedUnixConnection(_Guarded, UnixDomainSocketConnection):
    pass


def guarded_connection_class(url: str) -> type[Connection] | type[UnixDomainSocketConnection]:
    """The guarded class of the connections redis-py would make for ``url``."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "rediss":
        return GuardedSSLConnection
    if scheme == "unix":
        return GuardedUnixConnection
    return GuardedConnection
