"""Reads of the exchange domain: who may send to whom, queue figures, and an owner's adapters
with theirs."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from accounts.models import Session, User
from accounts.session_rules import live_sessions
from exchange import queries, queue_queries
from exchange.models import DeadLetter, Message, Publication, Route
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
        cursor.execute(queue_queries.STATS, {"recipients": list(recipient_ids)})
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
        cursor.execute(queue_queries.TOTALS)
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


@dataclass(frozen=True)
class RouteSender:
    """An adapter of another owner that a route lets send to one of the owner's."""

    adapter_id: int
    login: str
    display_name: str


@dataclass(frozen=True)
class AdapterSummary:
    adapter: User
    active_sessions: int
    queue: QueueStats
    allowed_senders: list[RouteSender]

    @property
    def allowed_sender_ids(self) -> list[int]:
        return [sender.adapter_id for sender in self.allowed_senders]


def adapters_for_owner(*, owner: User) -> list[AdapterSummary]:
    """``owner``'s adapters with their queue figures, in a fixed number of queries."""
    return _summaries(User.objects.filter(owner=owner, kind=User.Kind.ADAPTER))


def adapter_summary(*, adapter: User) -> AdapterSummary:
    """One adapter's figures, as adapters_for_owner gives each (the adapter's own page)."""
    [summary] = _summaries(User.objects.filter(pk=adapter.pk))
    return summary


def _summaries(adapters_found: QuerySet[User]) -> list[AdapterSummary]:
    now = timezone.now()
    adapters = list(
        adapters_found.annotate(
            active_sessions=Count(
                "sessions", filter=Q(sessions__in=Session.objects.filter(live_sessions(now)))
            )
        ).order_by("username")
    )
    ids = [adapter.pk for adapter in adapters]
    stats = queue_stats(recipient_ids=ids)
    senders: dict[int, list[RouteSender]] = {}
    routes = (
        Route.objects.filter(recipient_id__in=ids)
        .values_list("recipient_id", "sender_id", "sender__username", "sender__display_name")
        .order_by("sender_id")
    )
    for recipient_id, sender_id, login, display_name in routes:
        senders.setdefault(recipient_id, []).append(RouteSender(sender_id, login, display_name))
    return [
        AdapterSummary(
            adapter=adapter,
            active_sessions=adapter.active_sessions,
            queue=stats[adapter.pk],
            allowed_senders=senders.get(adapter.pk, []),
        )
        for adapter in adapters
    ]


def route_recipients(*, sender: User) -> list[RouteSender]:
    """The adapters of other owners whose routes let ``sender`` send to them, by login (a
    RouteSender each: the other end of a route, named as the cabinet names adapters)."""
    routes = (
        Route.objects.filter(sender=sender)
        .values_list("recipient_id", "recipient__username", "recipient__display_name")
        .order_by("recipient__username")
    )
    return [RouteSender(*route) for route in routes]


def payloads_of(messages: Iterable[Message | DeadLetter]) -> dict[uuid.UUID, Any]:
    """The payload of each message by its messageId: a topic's copy in the queue has none of its
    own, and is given its publication's (one query for all of them)."""
    shown = list(messages)
    payloads = {message.message_id: message.payload for message in shown}
    copies: dict[uuid.UUID, list[uuid.UUID]] = {}
    for message in shown:
        if message.payload is None and message.publication_id is not None:
            copies.setdefault(message.publication_id, []).append(message.message_id)
    if copies:
        published = Publication.objects.filter(publication_id__in=list(copies)).values_list(
            "publication_id", "payload"
        )
        for publication_id, payload in published:
            for message_id in copies[publication_id]:
                payloads[message_id] = payload
    return payloads
