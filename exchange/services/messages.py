"""Receiving and acknowledging messages: at-least-once delivery between adapters (sending is
exchange/services/sending.py, releasing and extending leases exchange/services/leases.py).

Every operation is scoped to the calling adapter as recipient: ids of other adapters' messages
behave exactly like ids that do not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from django.conf import settings
from django.db import connection

from accounts.models import User
from exchange import metrics, queries
from exchange.errors import StreamOpen, WebhookActive
from platform_site.database import prepared_cursor

AckStatus = Literal["acked", "alreadyAcked", "deadLettered", "notFound"]


class Delivery(NamedTuple):
    """A received message: a row of queries.RECEIVE as it comes (a tuple, made without a Python
    __init__: a receive makes up to 100)."""

    message_id: str  # canonical text, as the ACK takes it
    delivery_count: int
    json: str  # the delivery as the API shows it, rendered by PostgreSQL (queries.RECEIVE)

    @property
    def redelivered(self) -> bool:
        return self.delivery_count > 1


def _claim(
    *, adapter: User, device_key: str, max_messages: int, lease_seconds: int
) -> list[Delivery]:
    with prepared_cursor() as cursor:
        cursor.execute(
            queries.RECEIVE, _claim_parameters(adapter, device_key, max_messages, lease_seconds)
        )
        return _deliveries(cursor.fetchall())


def _claim_parameters(
    adapter: User, device_key: str, max_messages: int, lease_seconds: int
) -> dict[str, Any]:
    return {
        "recipient": adapter.pk,
        "device": device_key,
        "max": max_messages,
        "lease": lease_seconds,
        "max_deliveries": settings.EXCHANGE_MAX_DELIVERIES,
    }


def _deliveries(rows: list[tuple[str, int, str]]) -> list[Delivery]:
    """queries.RECEIVE's rows; StreamOpen when the device's push stream is open, WebhookActive
    when the recipient's webhook is enabled (the one row then names the refusal)."""
    if rows and rows[-1][0] is None:
        raise WebhookActive() if rows[-1][2] == WebhookActive.code else StreamOpen()
    return delivered(rows)


def delivered(rows: Sequence[tuple[str, int, str]]) -> list[Delivery]:
    """Claimed rows (queries.RECEIVE, STREAM_RECEIVE) as deliveries, counted in the
    redeliveries metric."""
    deliveries = list(map(Delivery._make, rows))
    redelivered = sum(1 for delivery in deliveries if delivery.redelivered)
    if redelivered:
        metrics.redeliveries.inc(redelivered)
    return deliveries


def messages_receive(
    *, adapter: User, device_key: str, max_messages: int, lease_seconds: int
) -> list[Delivery]:
    """Lease up to ``max_messages`` for this consumer instance (``device_key``). Messages the
    instance holds unacknowledged come first. Waiting for messages to arrive is the view's (a
    long poll defers its answer: exchange.api.views)."""
    return _claim(
        adapter=adapter,
        device_key=device_key,
        max_messages=max_messages,
        lease_seconds=lease_seconds,
    )


def messages_ack(
    *, adapter: User, device_key: str, message_ids: Sequence[uuid.UUID | str]
) -> list[tuple[str, AckStatus]]:
    """Acknowledge, idempotently: each id is acked, alreadyAcked, deadLettered or notFound.

    ``message_ids`` are UUIDs or their canonical text (lower case, with hyphens); the results
    name each id once, as text, in the order given.
    """
    unique = list(dict.fromkeys(map(str, message_ids)))
    with prepared_cursor() as cursor:
        cursor.execute(queries.ACK, _ack_parameters(adapter, device_key, unique))
        acked = cursor.fetchall()
    return _ack_results(adapter, unique, acked)


def messages_ack_receive(
    *,
    adapter: User,
    device_key: str,
    message_ids: Sequence[uuid.UUID | str],
    max_messages: int,
    lease_seconds: int,
) -> tuple[list[tuple[str, AckStatus]], list[Delivery]]:
    """``messages_ack``, then ``messages_receive``, as one transaction: the claim sees the ACK
    done, so nothing acknowledged comes back, and neither happens if either fails. Both
    statements go to PostgreSQL in one round trip (psycopg's pipeline mode, whose statements up
    to a sync are one implicit transaction).
    """
    unique = list(dict.fromkeys(map(str, message_ids)))
    with prepared_cursor() as acking, prepared_cursor() as claiming:
        with connection.wrap_database_errors, connection.connection.pipeline():
            acking.execute(queries.ACK, _ack_parameters(adapter, device_key, unique))
            claiming.execute(
                queries.RECEIVE, _claim_parameters(adapter, device_key, max_messages, lease_seconds)
            )
        acked = acking.fetchall()
        try:
            deliveries = _deliveries(claiming.fetchall())
        except (StreamOpen, WebhookActive) as refusal:
            made = "The acknowledgements of this request were made."
            raise type(refusal)(f"{refusal.default_detail} {made}") from None
    return _ack_results(adapter, unique, acked), deliveries


def _ack_parameters(adapter: User, device_key: str, unique: list[str]) -> dict[str, Any]:
    return {"recipient": adapter.pk, "ids": ",".join(unique), "device": device_key}


def _ack_results(
    adapter: User, unique: list[str], acked: list[tuple[str]]
) -> list[tuple[str, AckStatus]]:
    """Each id's status, in the order given: acked (``acked``, the ACK statement's rows: the
    notification's is NULL), or why not."""
    statuses: dict[str, AckStatus] = {row[0]: "acked" for row in acked if row[0] is not None}
    missing = [message_id for message_id in unique if message_id not in statuses]
    if missing:
        with prepared_cursor() as cursor:
            cursor.execute(queries.ACK_LOOKUP, {"recipient": adapter.pk, "ids": ",".join(missing)})
            statuses.update({row[0]: row[1] for row in cursor.fetchall()})
    return [(message_id, statuses.get(message_id, "notFound")) for message_id in unique]
