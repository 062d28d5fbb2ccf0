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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import User
from accounts.services.audit import Kind, audit
from exchange import metrics, queries
from exchange.errors import QueueFull

DEPTH_SECONDS = 2
BATCH = 1000


def _depth_key(recipient_id: int) -> str:
    return f"exchange:depth:{recipient_id}"


def _reserve(key: str) -> int | None:
    """One more in the counted depth at ``key``; None when it was not counted lately (or the
    cache is away: django-redis then answers None)."""
    try:
        reserved: int | None = cache.incr(key)
    except ValueError:
        return None
    return reserved


def queue_admit(*, recipient_id: int) -> None:
    """Take a place in the recipient's queue for one more message, or QueueFull.

    The place is taken in the counted depth (an atomic increment), so parallel sends cannot
    take the last place twice; a send that fails after this keeps its place until the next
    counting.
    """
    limit = settings.EXCHANGE_MAX_QUEUE_DEPTH
    key = _depth_key(recipient_id)
    reserved = _reserve(key)
    if reserved is None:
        with connection.cursor() as cursor:
            cursor.execute(queries.DEPTH, {"recipient": recipient_id, "limit": limit})
            [(depth,)] = cursor.fetchall()
        cache.add(key, depth, DEPTH_SECONDS)  # a parallel counting may have been first
        reserved = _reserve(key) or depth + 1
    if reserved > limit:
        with contextlib.suppress(ValueError):
            cache.decr(key)  # the place was not taken after all
        metrics.sends_refused.labels("queue_full").inc()
        raise QueueFull()


def queue_purge(*, adapter: User, actor: User) -> int:
    """Delete every message waiting for ``adapter`` (leased ones too; dead letters stay), in
    batches; how many. Audited, with ``actor`` (its owner) as the one who purged."""
    purged = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(queries.PURGE, {"recipient": adapter.pk, "batch": BATCH})
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
    """Messages past their retention to the dead letters (EXPIRED); old dead letters dropped."""
    now = timezone.now()
    expired = _in_batches(
        queries.EXPIRE,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_MESSAGE_RETENTION_DAYS)},
    )
    dropped = _in_batches(
        queries.DEAD_LETTERS_DROP,
        {"cutoff": now - timedelta(days=settings.EXCHANGE_DEAD_LETTER_DAYS)},
    )
    metrics.expired.inc(expired)
    metrics.dead_letters_dropped.inc(dropped)
    return Trimmed(expired=expired, dropped=dropped)
