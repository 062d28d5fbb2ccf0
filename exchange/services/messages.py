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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import connection, transaction

from accounts.models import User
from exchange import metrics, queries
from exchange.errors import IdempotencyKeyReused, QueueFull, SendNotAllowed
from exchange.models import IdempotencyKey
from exchange.selectors import recipients_reachable
from exchange.services.queues import queue_admit
from exchange.wakeups import FALLBACK_POLL_SECONDS, wakeups
from platform_site.database import prepared_cursor
from platform_site.errors import ApplicationError, PayloadTooLarge

AckStatus = Literal["acked", "alreadyAcked", "deadLettered", "notFound"]
ReleaseStatus = Literal["released", "leaseLost", "notFound"]
ExtendStatus = Literal["extended", "leaseLost", "notFound"]


@dataclass(frozen=True)
class Outgoing:
    """A message to send: what an adapter gives, in the API's names' order."""

    to: int
    type: str
    payload: Any
    headers: dict[str, str]
    idempotency_key: str | None = None


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


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _body_hash(message: Outgoing) -> str:
    """What an idempotency key remembers of its message: the same for the same message, however
    its JSON was spaced or its keys ordered."""
    canonical = json.dumps(
        {
            "to": message.to,
            "type": message.type,
            "payload": message.payload,
            "headers": message.headers,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def message_send(
    *,
    sender: User,
    to: int,
    type: str,
    payload: Any,
    headers: dict[str, str],
    idempotency_key: str | None,
) -> Sent:
    """Queue a message for adapter ``to``: messages_send of one, its failure raised."""
    message = Outgoing(
        to=to, type=type, payload=payload, headers=headers, idempotency_key=idempotency_key
    )
    [outcome] = messages_send(sender=sender, messages=[message])
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def messages_send(*, sender: User, messages: Sequence[Outgoing]) -> list[Sent | ApplicationError]:
    """Queue messages, each on its own: the outcome of each, in order, is Sent or the error that
    refused it (PayloadTooLarge, SendNotAllowed, IdempotencyKeyReused, QueueFull), and one
    message's failure does not fail the others.

    An idempotency key replayed with the same message gives the first message's id
    (``duplicate``), also after it was delivered, and with a different message
    IdempotencyKeyReused. Within one call, a key's later messages have the outcome of its first.
    Whatever the number of messages, a call costs at most seven statements in one transaction
    (tests/exchange/test_batch_send.py counts them).
    """
    sending = _Sending(sender, messages)
    sending.match_keys()
    sending.measure()
    sending.check_routes()
    sending.queue()
    return sending.outcomes()


class _Sending:
    """One call of messages_send: its messages, by position, and what has become of each."""

    def __init__(self, sender: User, messages: Sequence[Outgoing]) -> None:
        self.sender = sender
        self.messages = messages
        self.failed: dict[int, ApplicationError] = {}
        self.sent: dict[int, Sent] = {}
        self.repeats: dict[int, int] = {}  # a key's later message -> its first message
        self.hashes: dict[int, str] = {}  # the body hash of each message with a key
        self.payloads: dict[int, str] = {}  # each payload measured, as compact JSON
        self.ids: dict[int, uuid.UUID] = {}

    def pending(self) -> list[int]:
        """The positions of the messages that are neither failed nor sent nor a repeat yet."""
        return [
            position
            for position in range(len(self.messages))
            if position not in self.failed
            and position not in self.sent
            and position not in self.repeats
        ]

    def match_keys(self) -> None:
        """A key's later messages: repeats of its first when the same, else IdempotencyKeyReused."""
        first_of: dict[str, int] = {}
        for position, message in enumerate(self.messages):
            if message.idempotency_key is None:
                continue
            self.hashes[position] = _body_hash(message)
            first = first_of.setdefault(message.idempotency_key, position)
            if first == position:
                continue
            if self.hashes[first] == self.hashes[position]:
                self.repeats[position] = first
            else:
                self.failed[position] = IdempotencyKeyReused()

    def measure(self) -> None:
        limit = settings.EXCHANGE_MAX_PAYLOAD_BYTES
        for position in self.pending():
            self.payloads[position] = _json(self.messages[position].payload)
            size = len(self.payloads[position].encode())
            if size > limit:
                self.failed[position] = PayloadTooLarge(
                    f"The payload is {size} bytes of JSON; the limit is {limit}."
                )

    def check_routes(self) -> None:
        pending = self.pending()
        reachable = recipients_reachable(
            sender=self.sender, recipient_ids={self.messages[p].to for p in pending}
        )
        for position in pending:
            if self.messages[position].to not in reachable:
                self.failed[position] = SendNotAllowed()

    def queue(self) -> None:
        """In one transaction: the keys claimed, the places in the queues taken, the rows
        inserted, and the long polls woken when it commits."""
        pending = self.pending()
        if not pending:
            return
        self.ids = {position: uuid.uuid4() for position in pending}
        with transaction.atomic(), prepared_cursor() as cursor:
            self._claim_keys(cursor)
            # After the keys: a replay of a message already queued is a duplicate, even when full.
            self._take_places()
            refused = [
                key
                for position, error in self.failed.items()
                if isinstance(error, QueueFull)
                and (key := self.messages[position].idempotency_key) is not None
            ]
            if refused:
                cursor.execute(queries.KEYS_RELEASE, {"sender": self.sender.pk, "keys": refused})
            queued = self.pending()
            if not queued:
                return
            rows = ",".join(
                f'{{"id":"{self.ids[position]}","to":{self.messages[position].to},'
                f'"type":{_json(self.messages[position].type)},'
                f'"payload":{self.payloads[position]},'
                f'"headers":{_json(self.messages[position].headers)}}}'
                for position in queued
            )
            cursor.execute(queries.SEND, {"sender": self.sender.pk, "messages": f"[{rows}]"})
            recipients = sorted({self.messages[position].to for position in queued})
            cursor.execute(queries.NOTIFY, {"recipients": recipients})
        for position in queued:
            self.sent[position] = Sent(message_id=self.ids[position], duplicate=False)
        metrics.sent.inc(len(queued))

    def _claim_keys(self, cursor: Any) -> None:
        """Claim the pending messages' keys for them; a message whose key was claimed before is
        a duplicate of that message, or IdempotencyKeyReused."""
        positions = {
            key: position
            for position in self.pending()
            if (key := self.messages[position].idempotency_key) is not None
        }
        if not positions:
            return
        cursor.execute(
            queries.KEYS_CLAIM,
            {
                "sender": self.sender.pk,
                "keys": list(positions),
                "ids": [self.ids[position] for position in positions.values()],
                "hashes": [self.hashes[position] for position in positions.values()],
            },
        )
        claimed = {row[0] for row in cursor.fetchall()}
        known = [key for key in positions if key not in claimed]
        if not known:
            return
        for key, message_id, body_hash in IdempotencyKey.objects.filter(
            sender=self.sender, key__in=known
        ).values_list("key", "message_id", "body_hash"):
            position = positions[key]
            if body_hash == self.hashes[position]:
                self.sent[position] = Sent(message_id=message_id, duplicate=True)
            else:
                self.failed[position] = IdempotencyKeyReused()

    def _take_places(self) -> None:
        pending = self.pending()
        places = queue_admit(Counter(self.messages[position].to for position in pending))
        for position in pending:
            recipient = self.messages[position].to
            if places[recipient]:
                places[recipient] -= 1
            else:
                self.failed[position] = QueueFull()

    def outcomes(self) -> list[Sent | ApplicationError]:
        for position, first in self.repeats.items():
            if first in self.sent:
                self.sent[position] = Sent(message_id=self.sent[first].message_id, duplicate=True)
            else:
                self.failed[position] = self.failed[first]
        return [
            self.sent[position] if position in self.sent else self.failed[position]
            for position in range(len(self.messages))
        ]


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
