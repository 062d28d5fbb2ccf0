"""Reads of the exchange domain: who may send to whom, and queue figures."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.db import connection

from accounts.models import User
from exchange import queries
from exchange.models import DeadLetter, Message
from platform_site.database import prepared_cursor


@dataclass(frozen=True)
class QueueStats:
    available: int
    in_flight: int
    delayed: int
    dead_lettered: int
    oldest_age_seconds: int | None

    @property
    def depth(self) -> int:
        """What counts against EXCHANGE_MAX_QUEUE_DEPTH: every message not yet acknowledged."""
        return self.available + self.in_flight + self.delayed

    def as_json(self) -> dict[str, int | None]:
        return {
            "available": self.available,
            "inFlight": self.in_flight,
            "delayed": self.delayed,
            "deadLettered": self.dead_lettered,
            "oldestAgeSeconds": self.oldest_age_seconds,
        }


def recipients_reachable(*, sender: User, recipient_ids: Collection[int]) -> set[int]:
    """Which of ``recipient_ids`` ``sender`` may send to: adapters of one owner reach each other;
    others need a route from the recipient's owner. (SQL of its own, exchange/queries.py: every
    send asks, and the ORM's query cost more than its answer.)"""
    if not recipient_ids:
        return set()
    with prepared_cursor() as cursor:
        cursor.execute(
            queries.REACHABLE,
            {
                "recipients": ",".join(map(str, recipient_ids)),
                "owner": sender.owner_id,
                "sender": sender.pk,
            },
        )
        return {row[0] for row in cursor.fetchall()}


def queue_stats(*, recipient_ids: Sequence[int]) -> dict[int, QueueStats]:
    if not recipient_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(queries.STATS, {"recipients": list(recipient_ids)})
        rows = cursor.fetchall()
    return {
        row[0]: QueueStats(
            available=row[1],
            in_flight=row[2],
            delayed=row[3],
            dead_lettered=row[4],
            oldest_age_seconds=None if row[5] is None else int(row[5]),
        )
        for row in rows
    }


def queue_totals() -> QueueStats:
    with connection.cursor() as cursor:
        cursor.execute(queries.TOTALS)
        [row] = cursor.fetchall()  # an aggregate without GROUP BY: always one row
    return QueueStats(
        available=row[0],
        in_flight=row[1],
        delayed=row[2],
        dead_lettered=row[3],
        oldest_age_seconds=None if row[4] is None else int(row[4]),
    )


def messages_recent(*, recipient_ids: Sequence[int], limit: int) -> list[Message]:
    """The newest messages still waiting for these recipients (acknowledged ones are gone), with
    their sender and recipient."""
    return list(
        Message.objects.filter(recipient_id__in=recipient_ids)
        .select_related("recipient", "sender")
        .order_by("-seq")[:limit]
    )


def dead_letters_recent(*, recipient_ids: Sequence[int], limit: int) -> list[DeadLetter]:
    """The newest dead letters of these recipients, with their sender and recipient."""
    return list(
        DeadLetter.objects.filter(recipient_id__in=recipient_ids)
        .select_related("recipient", "sender")
        .order_by("-dead_at")[:limit]
    )
