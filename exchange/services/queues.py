"""Bounded queues (docs/operations.md, "Bounded queues"): what one sender can pile up for a
recipient, how long a message may wait, and the owner's purge.

- A send to a queue holding EXCHANGE_MAX_QUEUE_DEPTH messages is refused with 429 QUEUE_FULL
  (RabbitMQ's reject-publish). The depth is counted in PostgreSQL (no further than the limit)
  at most once per DEPTH_SECONDS per recipient, kept in the shared cache, and every send takes
  its place in that count with an atomic increment in between; an ACK gives its place back only
  at the next counting. So the limit holds exactly for sends however parallel (but for two
  workers counting at the same moment), and a queue emptied a moment ago may refuse for up to
  DEPTH_SECONDS.
- Messages nobody received within EXCHANGE_MESSAGE_RETENTION_DAYS move to the dead letters as
  EXPIRED, and dead letters are dropped after EXCHANGE_DEAD_LETTER_DAYS (queues_trim, run by
  Celery beat), in batches, each in a transaction of its own: no lock is held for long.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from accounts.models import User
from accounts.services.audit import Kind, audit
from exchange import metrics, queue_queries

DEPTH_SECONDS = 2
IDEMPOTENCY_KEY_HOURS = 24  # exchange.tasks forgets Idempotency-Keys after them
BATCH = 1000


def _depth_key(recipient_id: int) -> str:
    return f"exchange:depth:{recipient_id}"


def _reserve(key: str, count: int) -> int | None:
    """``count`` more in the counted depth at ``key``; None when it was not counted lately (or
    the cache is away: django-redis then answers None)."""
    try:
        reserved: int | None = cache.incr(key, count)
    except ValueError:
        return None
    return reserved


# The counted depths of several recipients, each ``count`` more, in one round trip: a publication
# takes a place in every subscriber's queue, and a round trip per subscriber cost 6 ms at 100 of
# them. ARGV: each key's count, then each key's depth to set first where it is absent (-1: none,
# and an absent key answers -1: not counted lately), then the seconds a depth is kept.
_RESERVE_ALL = """
local n = #KEYS
local reserved = {}
for i, key in ipairs(KEYS) do
    local depth = tonumber(ARGV[n + i])
    if depth >= 0 then
        redis.call('SET', key, depth, 'EX', ARGV[2 * n + 1], 'NX')
    end
    if redis.call('EXISTS', key) == 1 then
        reserved[i] = redis.call('INCRBY', key, ARGV[i])
    else
        reserved[i] = -1
    end
end
return reserved
"""


def _reserve_all(
    counts: Mapping[int, int], depths: Mapping[int, int] | None = None
) -> dict[int, int | None]:
    """Each recipient's counted depth, ``counts`` more: None where it was not counted lately
    (or the cache is away). With ``depths`` (just counted), each is set first where a parallel
    counting has not set it. With Redis, in one round trip, on the keys and integers the cache
    writes (django-redis keeps an int as a Redis integer, under the cache's make_key:
    tests/exchange/test_bounded_queues.py holds the two alike); without, key by key."""
    if not settings.REDIS_URL:
        reserved: dict[int, int | None] = {}
        for recipient, count in counts.items():
            if depths is not None:
                cache.add(_depth_key(recipient), depths[recipient], DEPTH_SECONDS)
            reserved[recipient] = _reserve(_depth_key(recipient), count)
        return reserved
    recipients = list(counts)
    try:
        replies = get_redis_connection("default").eval(
            _RESERVE_ALL,
            len(recipients),
            *[cache.make_key(_depth_key(recipient)) for recipient in recipients],
            *[counts[recipient] for recipient in recipients],
            *[-1 if depths is None else depths[recipient] for recipient in recipients],
            DEPTH_SECONDS,
        )
    except RedisError:
        return dict.fromkeys(recipients)
    return {
        recipient: None if reply < 0 else reply
        for recipient, reply in zip(recipients, replies, strict=True)
    }


def queue_admit(counts: Mapping[int, int]) -> dict[int, int]:
    """Take places in recipients' queues: ``counts`` maps a recipient to the messages for it;
    the answer, how many of them have a place (the first so many: the rest are QUEUE_FULL).

    The places are taken in the counted depth (an atomic increment), so parallel sends cannot
    take the last place twice; a send that fails after this keeps its place until the next
    counting. Queues not counted lately are counted in one statement.
    """
    limit = settings.EXCHANGE_MAX_QUEUE_DEPTH
    reserved = _reserve_all(counts)
    uncounted = [recipient for recipient, total in reserved.items() if total is None]
    if uncounted:
        with connection.cursor() as cursor:
            cursor.execute(queue_queries.DEPTHS, {"recipients": uncounted, "limit": limit})
            depths = dict(cursor.fetchall())
        # A parallel counting may have set a depth first: then it is taken as it is.
        counted = _reserve_all({recipient: counts[recipient] for recipient in uncounted}, depths)
        for recipient in uncounted:
            reserved[recipient] = counted[recipient] or depths[recipient] + counts[recipient]
    admitted: dict[int, int] = {}
    for recipient, count in counts.items():
        total = cast(int, reserved[recipient])
        admitted[recipient] = max(0, count - max(0, total - limit))
        refused = count - admitted[recipient]
        if refused:
            with contextlib.suppress(ValueError):
                cache.decr(_depth_key(recipient), refused)  # those places were not taken
            metrics.sends_refused.labels("queue_full").inc(refused)
    return admitted


def queue_release(counts: Mapping[int, int]) -> None:
    """Give back places queue_admit took for messages that were not queued after all."""
    for recipient, count in counts.items():
        with contextlib.suppress(ValueError):
            cache.decr(_depth_key(recipient), count)


def queue_purge(*, adapter: User, actor: User) -> int:
    """Delete every message waiting for ``adapter`` (leased ones too; dead letters stay), in
    batches; how many. Audited, with ``actor`` (its owner) as the one who purged."""
    purged = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(queue_queries.PURGE, {"recipient": adapter.pk, "batch": BATCH})
            count: int = cursor.rowcount
        purged += count
        if count < BATCH:
            break
    cache.delete(_depth_key(adapter.pk))
    metrics.purged.inc(purged)
    audit(Kind.QUEUE_PURGED, user=adapter, actor=actor, purged=purged)
    return purged


@dataclass(frozen=True)
class Trimmed:
    expired: int
    dropped: int
    publications: int


def in_batches(sql: str, params: dict[str, Any]) -> int:
    """Run ``sql`` (a statement over at most %(batch)s rows, answering a row for each) until a
    batch is not full, each batch in a transaction of its own; how many rows in all."""
    done = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, {**params, "batch": BATCH})
            count: int = cursor.rowcount
        done += count
        if count < BATCH:
            return done


def queues_trim() -> Trimmed:
    """Messages past their retention to the dead letters (EXPIRED); old dead letters and
    publications no copy waits for dropped."""
    now = timezone.now()
    expired = in_batches(
        queue_queries.EXPIRE,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_MESSAGE_RETENTION_DAYS)},
    )
    dropped = in_batches(
        queue_queries.DEAD_LETTERS_DROP,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_DEAD_LETTER_DAYS)},
    )
    # A publication is kept while a copy waits, and an hour longer than its Idempotency-Key,
    # whose replay answers with its figures (IDEMPOTENCY_KEY_HOURS).
    publications = in_batches(
        queue_queries.PUBLICATIONS_DROP,
        {"cutoff": now - timedelta(hours=IDEMPOTENCY_KEY_HOURS + 1)},
    )
    metrics.expired.inc(expired)
    metrics.dead_letters_dropped.inc(dropped)
    return Trimmed(expired=expired, dropped=dropped, publications=publications)
