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


def queue_admit(counts: Mapping[int, int]) -> dict[int, int]:
    """Take places in recipients' queues: ``counts`` maps a recipient to the messages for it;
    the answer, how many of them have a place (the first so many: the rest are QUEUE_FULL).

    The places are taken in the counted depth (an atomic increment), so parallel sends cannot
    take the last place twice; a send that fails after this keeps its place until the next
    counting. Queues not counted lately are counted in one statement.
    """
    limit = settings.EXCHANGE_MAX_QUEUE_DEPTH
    reserved = {
        recipient: _reserve(_depth_key(recipient), count) for recipient, count in counts.items()
    }
    uncounted = [recipient for recipient, total in reserved.items() if total is None]
    if uncounted:
        with connection.cursor() as cursor:
            cursor.execute(queue_queries.DEPTHS, {"recipients": uncounted, "limit": limit})
            depths = dict(cursor.fetchall())
        for recipient in uncounted:
            key, depth, count = _depth_key(recipient), depths[recipient], counts[recipient]
            cache.add(key, depth, DEPTH_SECONDS)  # a parallel counting may have been first
            reserved[recipient] = _reserve(key, count) or depth + count
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


def _in_batches(sql: str, params: dict[str, Any]) -> int:
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
    expired = _in_batches(
        queue_queries.EXPIRE,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_MESSAGE_RETENTION_DAYS)},
    )
    dropped = _in_batches(
        queue_queries.DEAD_LETTERS_DROP,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_DEAD_LETTER_DAYS)},
    )
    # A publication is kept while a copy waits, and an hour longer than its Idempotency-Key,
    # whose replay answers with its figures (IDEMPOTENCY_KEY_HOURS).
    publications = _in_batches(
        queue_queries.PUBLICATIONS_DROP,
        {"cutoff": now - timedelta(hours=IDEMPOTENCY_KEY_HOURS + 1)},
    )
    metrics.expired.inc(expired)
    metrics.dead_letters_dropped.inc(dropped)
    return Trimmed(expired=expired, dropped=dropped, publications=publications)
