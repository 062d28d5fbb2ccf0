"""Sending, receiving and acknowledging messages: at-least-once delivery between adapters.

Every operation is scoped to the calling adapter as recipient (or sender): ids of other adapters'
messages behave exactly like ids that do not exist.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import connection, transaction

from accounts.models import User
from exchange import metrics, queries
from exchange.errors import IdempotencyKeyReused, SendNotAllowed
from exchange.models import IdempotencyKey, Message
from exchange.selectors import may_send
from exchange.services.queues import queue_admit
from exchange.wakeups import FALLBACK_POLL_SECONDS, wakeups
from platform_site.database import prepared_cursor
from platform_site.errors import PayloadTooLarge

AckStatus = Literal["acked", "alreadyAcked", "deadLettered", "notFound"]
ReleaseStatus = Literal["released", "leaseLost", "notFound"]
ExtendStatus = Literal["extended", "leaseLost", "notFound"]


@dataclass(frozen=True)
class Sent:
    message_id: uuid.UUID
    duplicate: bool


@dataclass(frozen=True)
class Delivery:
    message_id: uuid.UUID
    delivery_count: int
    json: str  # the delivery as the API shows it, rendered by PostgreSQL (queries.RECEIVE)

    @property
    def redelivered(self) -> bool:
        return self.delivery_count > 1


@dataclass(frozen=True)
class Receipt:
    message_id: uuid.UUID
    lease_token: uuid.UUID


def receipt_handle(message_id: uuid.UUID, lease_token: uuid.UUID) -> str:
    """The receipt handle's format (queries.RECEIVE renders it in SQL): base64url, no padding."""
    return base64.urlsafe_b64encode(message_id.bytes + lease_token.bytes).rstrip(b"=").decode()


_RECEIPT_HANDLE = re.compile(r"[A-Za-z0-9_-]{43}")


def receipt_parse(handle: str) -> Receipt | None:
    """The receipt in ``handle``, or None if it is not one this server issued the shape of
    (base64url of 32 bytes, unpadded: what the API's schema says)."""
    if not _RECEIPT_HANDLE.fullmatch(handle):
        return None
    raw = base64.urlsafe_b64decode(handle + "=")
    return Receipt(message_id=uuid.UUID(bytes=raw[:16]), lease_token=uuid.UUID(bytes=raw[16:]))


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def message_send(
    *,
    sender: User,
    to: int,
    type: str,
    payload: Any,
    headers: dict[str, str],
    idempotency_key: str | None,
) -> Sent:
    """Queue a message for adapter ``to``. Replaying an Idempotency-Key with the same message
    returns the first message's id (``duplicate``), also after it was delivered; with a different
    message it is IdempotencyKeyReused."""
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.EXCHANGE_MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(
            f"The payload is {size} bytes of JSON; "
            f"the limit is {settings.EXCHANGE_MAX_PAYLOAD_BYTES}."
        )
    if not may_send(sender=sender, recipient_id=to):
        raise SendNotAllowed()
    message_id = uuid.uuid4()
    with transaction.atomic():
        if idempotency_key is not None:
            body_hash = hashlib.sha256(
                _canonical({"to": to, "type": type, "payload": payload, "headers": headers})
            ).hexdigest()
            # A parallel send with the same key waits on this row's unique index entry and then
            # finds it: one message per key, whatever the timing.
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO exchange_idempotencykey "
                    "(sender_id, key, message_id, body_hash, created_at) "
                    "VALUES (%s, %s, %s, %s, now()) "
                    "ON CONFLICT (sender_id, key) DO NOTHING RETURNING id",
                    [sender.pk, idempotency_key, message_id, body_hash],
                )
                claimed = cursor.fetchone() is not None
            if not claimed:
                first = IdempotencyKey.objects.get(sender=sender, key=idempotency_key)
                if first.body_hash != body_hash:
                    raise IdempotencyKeyReused()
                return Sent(message_id=first.message_id, duplicate=True)
        # After the key: a replay of a message already queued is a duplicate, even when full.
        queue_admit(recipient_id=to)
        Message.objects.create(
            message_id=message_id,
            recipient_id=to,
            sender=sender,
            type=type,
            payload=payload,
            headers=headers,
        )
        with connection.cursor() as cursor:
            cursor.execute(queries.NOTIFY, {"recipient": to})  # delivered when this commits
    metrics.sent.inc()
    return Sent(message_id=message_id, duplicate=False)


def _claim(
    *, adapter: User, device_key: str, max_messages: int, lease_seconds: int
) -> list[Delivery]:
    with prepared_cursor() as cursor:
        cursor.execute(
            queries.RECEIVE,
            {
                "recipient": adapter.pk,
                "device": device_key,
                "max": max_messages,
                "lease": lease_seconds,
                "max_deliveries": settings.EXCHANGE_MAX_DELIVERIES,
            },
        )
        rows = cursor.fetchall()
    rows.sort(key=lambda row: row[0])  # RETURNING has no order; the queue's is seq
    deliveries = [Delivery(message_id=row[1], delivery_count=row[2], json=row[3]) for row in rows]
    redelivered = sum(1 for delivery in deliveries if delivery.redelivered)
    if redelivered:
        metrics.redeliveries.inc(redelivered)
    return deliveries


def messages_receive(
    *, adapter: User, device_key: str, max_messages: int, lease_seconds: int, wait_seconds: float
) -> list[Delivery]:
    """Lease up to ``max_messages`` for this consumer instance (``device_key``), waiting up to
    ``wait_seconds`` for one to arrive. Messages the instance holds unacknowledged come first."""
    deadline = time.monotonic() + wait_seconds
    claim = functools.partial(
        _claim,
        adapter=adapter,
        device_key=device_key,
        max_messages=max_messages,
        lease_seconds=lease_seconds,
    )
    deliveries = claim()
    if deliveries or wait_seconds <= 0:
        return deliveries
    with wakeups.waiting_slot(), wakeups.expect(adapter.pk) as arrived:
        while True:
            # The first pass also catches a send that committed between the claim above and
            # registering for its notification.
            deliveries = claim()
            remaining = deadline - time.monotonic()
            if deliveries or remaining <= 0:
                return deliveries
            # Hand the connection back to the pool: nothing is held while waiting.
            if not connection.in_atomic_block:
                connection.close()
            arrived.wait(min(remaining, FALLBACK_POLL_SECONDS))
            arrived.clear()


def messages_ack(
    *, adapter: User, device_key: str, message_ids: Sequence[uuid.UUID | str]
) -> list[tuple[str, AckStatus]]:
    """Acknowledge, idempotently: each id is acked, alreadyAcked, deadLettered or notFound.

    ``message_ids`` are UUIDs or their canonical text (lower case, with hyphens); the results
    name each id once, as text, in the order given.
    """
    unique = list(dict.fromkeys(map(str, message_ids)))
    with prepared_cursor() as cursor:
        cursor.execute(
            queries.ACK, {"recipient": adapter.pk, "ids": ",".join(unique), "device": device_key}
        )
        statuses: dict[str, AckStatus] = {row[0]: "acked" for row in cursor.fetchall()}
        missing = [message_id for message_id in unique if message_id not in statuses]
        if missing:
            cursor.execute(queries.ACK_LOOKUP, {"recipient": adapter.pk, "ids": ",".join(missing)})
            statuses.update({row[0]: row[1] for row in cursor.fetchall()})
    return [(message_id, statuses.get(message_id, "notFound")) for message_id in unique]


LostStatus = Literal["leaseLost", "notFound"]


def _under_receipts(
    *, adapter: User, statement: str, params: dict[str, Any], receipts: Sequence[Receipt]
) -> tuple[dict[uuid.UUID, tuple[Any, ...]], dict[uuid.UUID, LostStatus]]:
    """Run a lease statement (RELEASE, EXTEND) for these receipts.

    Returns the rest of the row of each message it touched, and for every other receipt whether
    the caller still has the message under a newer lease (leaseLost) or not at all (notFound):
    another adapter's message is notFound, like one that never existed.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            statement,
            {
                **params,
                "recipient": adapter.pk,
                "ids": [receipt.message_id for receipt in receipts],
                "tokens": [receipt.lease_token for receipt in receipts],
            },
        )
        touched = {row[0]: tuple(row[1:]) for row in cursor.fetchall()}
        others = [receipt.message_id for receipt in receipts if receipt.message_id not in touched]
        held: set[uuid.UUID] = set()
        if others:
            cursor.execute(queries.HELD, {"recipient": adapter.pk, "ids": others})
            held = {row[0] for row in cursor.fetchall()}
    lost: dict[uuid.UUID, LostStatus] = {
        message_id: "leaseLost" if message_id in held else "notFound" for message_id in others
    }
    return touched, lost


def messages_release(
    *, adapter: User, receipts: Sequence[Receipt], delay_seconds: int
) -> list[tuple[uuid.UUID, ReleaseStatus]]:
    """Give leased messages back to the queue now or after ``delay_seconds`` (a nack)."""
    released, lost = _under_receipts(
        adapter=adapter,
        statement=queries.RELEASE,
        params={"delay": delay_seconds},
        receipts=receipts,
    )
    return [
        (
            receipt.message_id,
            "released" if receipt.message_id in released else lost[receipt.message_id],
        )
        for receipt in receipts
    ]


def leases_extend(
    *, adapter: User, receipts: Sequence[Receipt], lease_seconds: int
) -> list[tuple[uuid.UUID, ExtendStatus, datetime | None]]:
    """Extend leases still held under these receipts to ``lease_seconds`` from now."""
    extended, lost = _under_receipts(
        adapter=adapter,
        statement=queries.EXTEND,
        params={"lease": lease_seconds},
        receipts=receipts,
    )
    return [
        (receipt.message_id, "extended", extended[receipt.message_id][0])
        if receipt.message_id in extended
        else (receipt.message_id, lost[receipt.message_id], None)
        for receipt in receipts
    ]
