"""A push stream's database work (exchange/streams.py runs it in Django's threads): its row,
which fences it, and its claims, paced by credits. The SQL is in exchange/queries.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from exchange import queries
from exchange.services.messages import Delivery, delivered
from platform_site.database import prepared_cursor


@dataclass(frozen=True)
class Claimed:
    deliveries: list[Delivery]
    # False once a newer stream of the same device took the row over: nothing was claimed.
    owned: bool
    # True while the recipient's webhook is enabled: nothing was claimed.
    pushed: bool
    # Seconds until the earliest lease of the messages the device held before this claim runs
    # out (None: it held none).
    next_expiry: float | None


def stream_open(*, stream_id: uuid.UUID, adapter_id: int, device_key: str, ttl: int) -> None:
    """Take the device's stream row (a stream that had it ends: REPLACED)."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries.STREAM_OPEN,
            {"stream": stream_id, "recipient": adapter_id, "device": device_key, "ttl": ttl},
        )


def stream_close(*, stream_id: uuid.UUID) -> None:
    """Give the row up, if the stream still has it."""
    with connection.cursor() as cursor:
        cursor.execute(queries.STREAM_CLOSE, {"stream": stream_id})


def streams_hold(*, stream_ids: Sequence[uuid.UUID], ttl: int) -> set[int]:
    """Keep these streams' rows for ``ttl`` seconds more (their server still holds them); the
    recipients among theirs that have a message available now."""
    with connection.cursor() as cursor:
        cursor.execute(queries.STREAMS_HELD, {"streams": list(stream_ids), "ttl": ttl})
        return {row[0] for row in cursor.fetchall()}


def stream_claim(
    *,
    stream_id: uuid.UUID,
    adapter_id: int,
    device_key: str,
    max_outstanding: int,
    lease_seconds: int,
    first: bool,
) -> Claimed:
    """Lease as many messages as the stream's credits allow (``max_outstanding`` less what the
    device holds unsettled); the ``first`` claim takes what the device held first, as a receive
    does."""
    with prepared_cursor() as cursor:
        cursor.execute(
            queries.STREAM_RECEIVE,
            {
                "stream": stream_id,
                "recipient": adapter_id,
                "device": device_key,
                "max": max_outstanding,
                "lease": lease_seconds,
                "first": first,
                "max_deliveries": settings.EXCHANGE_MAX_DELIVERIES,
            },
        )
        *rows, (_, outstanding, next_expiry) = cursor.fetchall()
    return Claimed(
        deliveries=delivered(rows),
        owned=outstanding != -1,
        pushed=outstanding == -2,
        next_expiry=float(next_expiry) if next_expiry else None,
    )


def stream_give_back(*, adapter_id: int, device_key: str, deliveries: Sequence[Delivery]) -> None:
    """Claimed messages the stream does not deliver after all: back in the queue at once, their
    delivery uncounted."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries.STREAM_GIVE_BACK,
            {
                "recipient": adapter_id,
                "device": device_key,
                "ids": ",".join(delivery.message_id for delivery in deliveries),
            },
        )
