"""Session liveness that each worker remembers, made stale at once on every worker through Redis.

The session row is the truth: a revoked session stops working at once on every worker
(docs/sessions.md, "Tokens and sessions"). Reading it costs the exchange API's hot path a PostgreSQL
round trip per request, the largest part of an authenticated call. With Redis configured
(``REDIS_URL``), a worker remembers the session and user row it read, stamped with the user's
*revision*: a value in Redis that every change to the user or to one of their sessions replaces. A
request reads the revision in the Redis round trip that counts it against its rate limits
(``checked``), and uses the remembered row only while the revision is still the one it was read
under.

A change replaces the revision twice (``revisions_change``):

- before it is written, inside its transaction: when Redis cannot be told, the change fails
  (``CacheUnavailable``, 503) instead of leaving workers to trust rows they should not;
- again once the transaction has committed: a row that a request read from PostgreSQL between the
  first replacement and the commit was read under the first new revision, and the second one drops
  it. After the change's own request has returned, no worker answers from an older row.

Revisions that Redis has lost (a restart, a flush, expiry) are written anew by the next request,
from Redis's clock to the microsecond (a change writes a random one), so no remembered row outlives
them. When Redis does not answer a request, the request reads PostgreSQL and its rate limits let it
through, as django-ratelimit's do (RATELIMIT_FAIL_OPEN).

Every service that writes a User or Session row says so: it writes inside ``changing(user_ids)``,
which replaces the revision before the write and again after the commit. Only the fields in
QUIET (the sign-in time, the session's "last used" and its refresh rotation) are written without
it: none of them can turn a live session's answer into a refusal, and the remembered copy may
show them a little old. tests/accounts/test_session_liveness.py runs every writer and fails
when one forgets, and when a write outside ``changing`` reaches these tables during it.

Without Redis (development, one process) nothing is remembered: every request reads the row.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import hiredis
from django.conf import settings
from django.db import transaction
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from accounts.models import Session
from platform_site.cache import RedisUnavailable
from platform_site.cache import availability as redis_availability
from platform_site.errors import CacheUnavailable
from platform_site.internals import model_instance_copy, redis_socket
from platform_site.ratelimits import Limit, Usage, counter_key, usage_counted

logger = logging.getLogger(__name__)

REVISION_SECONDS = 24 * 3600  # a revision nobody changed is written anew after a day
REMEMBER_SECONDS = 300  # and a remembered row is read again after five minutes regardless
REMEMBER_MAX = 10_000  # rows per worker; past that the worker forgets them all and starts over

# Fields written without changing the revision (see above), by table.
QUIET = {
    "accounts_user": frozenset({"last_login"}),
    "accounts_session": frozenset(
        {"last_used_at", "refresh_jti", "previous_refresh_jti", "refreshed_at"}
    ),
}

# KEYS[1]: the user's revision; KEYS[2..]: rate-limit counters. ARGV[1]: the lifetime of a
# revision written because Redis has none (made of Redis's clock, to the microsecond, so it differs
# from every revision written before it); ARGV[2..]: each counter's lifetime.
_CHECK = """
local revision = redis.call('GET', KEYS[1])
if not revision then
  local now = redis.call('TIME')
  revision = 't' .. now[1] .. '.' .. now[2]
  redis.call('SET', KEYS[1], revision, 'EX', ARGV[1])
end
local result = {revision}
for i = 2, #KEYS do
  local count = redis.call('INCR', KEYS[i])
  if count == 1 then redis.call('EXPIRE', KEYS[i], ARGV[i]) end
  result[i] = count
end
return result
"""
_CHECK_SHA = hashlib.sha1(_CHECK.encode()).hexdigest()  # noqa: S324 (Redis names scripts so)
_held = threading.local()  # each thread's own line to Redis (_Line) for _evaluate()
_changing = threading.local()  # each thread's open changing() blocks: the users each announced

# session id -> (revision, when it was read, the session with its user)
_remembered: dict[uuid.UUID, tuple[bytes, float, Session]] = {}


def enabled() -> bool:
    return bool(settings.REDIS_URL)


def _redis() -> Any:
    from django_redis import get_redis_connection

    return get_redis_connection("default")


def _revision_key(user_id: int) -> str:
    return f"auth:revision:{user_id}"


def checked(*, user_id: int, limits: Sequence[Limit]) -> tuple[bytes | None, list[Usage] | None]:
    """The user's revision and the request counted against ``limits``: one Redis round trip.

    ``(None, None)`` without Redis, or when Redis does not answer.
    """
    if not enabled():
        return None, None
    if not settings.RATELIMIT_ENABLE:
        limits = []
    now = int(time.time())
    counters = [counter_key(limit, now) for limit in limits]
    try:
        result = _evaluate(
            [_revision_key(user_id), *(key for key, _, _ in counters)],
            [REVISION_SECONDS, *(seconds for _, seconds, _ in counters)],
        )
    except RedisUnavailable:
        return None, None  # left aside for a while: said once by platform_site.cache
    except RedisError as error:
        logger.warning("Redis unavailable, session read from PostgreSQL: %s", error)
        return None, None
    revision, *counts = result
    if not limits:  # nothing was counted: the caller counts its own limits, if it has any
        return revision, None
    usages = [
        usage_counted(limit, count=count, window_end=window_end, now=now)
        for limit, count, (_, _, window_end) in zip(limits, counts, counters, strict=True)
    ]
    return revision, usages


def _evaluate(keys: list[str], args: list[Any]) -> Any:
    """The check script, on a line to Redis that this thread keeps to itself. Like every call to
    Redis, it is left aside (RedisUnavailable) while Redis is marked down (platform_site.cache)."""
    redis_availability.admit()
    line: _Line | None = getattr(_held, "line", None)
    if line is None or line.caches is not settings.CACHES:
        line = _Line(settings.CACHES, _redis().connection_pool)
        _held.line = line
    try:
        reply = line.call("EVALSHA", _CHECK_SHA, len(keys), *keys, *args)
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            # A Redis that has not seen the script yet (or was restarted).
            reply = line.call("EVAL", _CHECK, len(keys), *keys, *args)
    except (OSError, hiredis.ProtocolError) as error:
        # The line's state is unknown (a timeout, a reset): the next call starts on a new one.
        _held.line = None
        line.close()
        redis_availability.failed(error)
        raise RedisConnectionError(f"Redis did not answer the session check: {error}") from error
    redis_availability.answered()
    if isinstance(reply, hiredis.ReplyError):
        raise ResponseError(str(reply))
    return reply


class _Line:
    """A connection to Redis that redis-py opens (address, password, database and TLS come from
    the cache's settings) and on which the check script's command is then written and its answer
    read directly, with hiredis.

    redis-py's per-command path (taking a connection from the pool and giving it back, retries,
    its event hooks, its parser's buffering) cost more client CPU than the round trip itself
    (docs/performance.md). On a plain TCP socket the timeout is the kernel's (SO_SNDTIMEO,
    SO_RCVTIMEO): Python's own socket timeout polls the socket before every send and every read,
    and each system call lets the worker's other threads take the interpreter, which under load
    costs a thread switch each time.
    """

    def __init__(self, caches: Any, pool: Any) -> None:
        self.caches = caches
        self.pool = pool
        self.connection = connection = pool.get_connection()
        connection.connect()  # a no-op when the pool handed it out connected
        self.socket = redis_socket(connection)
        self.reader = hiredis.Reader()
        timeout = connection.socket_timeout
        if type(self.socket) is socket.socket and timeout:
            seconds = int(timeout)
            limit = struct.pack("ll", seconds, int((timeout - seconds) * 1_000_000))
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            self.socket.settimeout(None)  # blocking: the kernel times each call out

    def call(self, *args: Any) -> Any:
        """One command and its reply (an error reply is returned as a hiredis.ReplyError)."""
        self.socket.sendall(hiredis.pack_command(args))
        while (reply := self.reader.gets()) is False:
            data = self.socket.recv(65536)  # a kernel timeout raises BlockingIOError, an OSError
            if not data:
                raise ConnectionResetError("Redis closed the connection")
            self.reader.feed(data)
        return reply

    def close(self) -> None:
        self.connection.disconnect()
        self.pool.release(self.connection)  # it connects afresh when next handed out


def remembered(session_id: uuid.UUID, revision: bytes | None) -> Session | None:
    """A copy of the session (and its user) read earlier under ``revision``, if still good."""
    if revision is None:
        return None
    entry = _remembered.get(session_id)
    if entry is None or entry[0] != revision or time.monotonic() - entry[1] > REMEMBER_SECONDS:
        return None
    return _copy(entry[2])


def remember(session_id: uuid.UUID, revision: bytes | None, session: Session) -> None:
    """Keep ``session`` (with its user), read from PostgreSQL after ``revision`` was read from
    Redis."""
    if revision is None:
        return
    if len(_remembered) >= REMEMBER_MAX:
        _remembered.clear()
    _remembered[session_id] = (revision, time.monotonic(), _copy(session))


def _copy(session: Session) -> Session:
    """Each request gets instances of its own (session_touch changes its session), copied field
    by field: building them from the row again through Model.__init__ cost several times as much
    (docs/performance.md, "One request's CPU").
    Every field of both models holds an immutable value (text, numbers, times, UUIDs)."""
    copy = model_instance_copy(session)
    copy.user = model_instance_copy(session.user)
    return copy


def forget(session_id: uuid.UUID) -> None:
    _remembered.pop(session_id, None)


def _replace(user_ids: Iterable[int]) -> None:
    pipeline = _redis().pipeline(transaction=False)
    for user_id in set(user_ids):
        pipeline.set(_revision_key(user_id), secrets.token_hex(8), ex=REVISION_SECONDS)
    pipeline.execute()


def _replace_before(user_ids: list[int]) -> None:
    try:
        _replace(user_ids)
    except RedisError as error:
        logger.warning("Redis unavailable, session change refused: %s", error)
        raise CacheUnavailable() from error


def _replace_after_commit(user_ids: list[int]) -> None:
    def replace() -> None:
        try:
            _replace(user_ids)
        except RedisError:
            # The replacement before the write went through: only rows read between it and the
            # commit can be stale now, for at most REMEMBER_SECONDS.
            logger.exception("Redis unavailable after a session change committed")

    # Outside a transaction (autocommit), Django runs this at once: call it after the write.
    transaction.on_commit(replace)


def revisions_change(user_ids: Iterable[int]) -> None:
    """Make every worker read these users' sessions again. Call inside the change's transaction
    (``transaction.atomic``), before writing; raises CacheUnavailable (503) when Redis cannot be
    told, so the change does not happen."""
    user_ids = list(user_ids)
    if not enabled() or not user_ids:
        return
    _replace_before(user_ids)
    _replace_after_commit(user_ids)


@contextmanager
def changing(user_ids: Iterable[int]) -> Iterator[None]:
    """The transaction of a write to these users' rows or to their sessions: every worker reads
    them again after it. Raises CacheUnavailable (503) before anything is written when Redis
    cannot be told.

    Services nest (a password reset sets the password and ends the sessions, each a writer of its
    own): inside an enclosing ``changing`` of the same users, whose replacements before and after
    its transaction already cover these writes, nothing more is sent to Redis."""
    user_ids = set(user_ids)
    announced: list[set[int]] = _changing.__dict__.setdefault("stack", [])
    with transaction.atomic():
        if not any(user_ids <= outer for outer in announced):
            revisions_change(user_ids)
        announced.append(user_ids)
        try:
            yield
        finally:
            announced.pop()
