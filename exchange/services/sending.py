"""Sending messages: each on its own, in one statement for a batch (exchange/queries.py: SEND),
with idempotency keys, routes and bounded queues (docs/exchange.md, "Sending").

Every send is scoped to the calling adapter as sender: an adapter it may not reach is refused
exactly like one that does not exist.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings

from accounts.models import User
from exchange import metrics, queries
from exchange.errors import IdempotencyKeyReused, QueueFull, SendInterrupted, SendNotAllowed
from exchange.models import IdempotencyKey
from exchange.selectors import recipients_reachable
from exchange.services.queues import queue_admit, queue_release
from platform_site.database import prepared_cursor
from platform_site.errors import ApplicationError, PayloadTooLarge, ValidationFailed


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


def _json(value: Any) -> str:
    """``value`` as compact JSON; ValueError or TypeError for what JSON cannot hold (an infinite
    float, an object that is no JSON value: platform_site.parsers.NonFiniteNumber)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


NOT_JSON = "Must be a JSON value PostgreSQL can store: numbers within a double's range (±1.8e308)."


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
    refused it (ValidationFailed for a payload that is no JSON, PayloadTooLarge, SendNotAllowed,
    IdempotencyKeyReused, QueueFull), and one
    message's failure does not fail the others.

    An idempotency key replayed with the same message gives the first message's id
    (``duplicate``), also after it was delivered, and with a different message
    IdempotencyKeyReused. Within one call, a key's later messages have the outcome of its first.
    Whatever the number of messages, a call costs at most five statements, none in a transaction
    of its own making (tests/exchange/test_batch_send.py counts them).
    """
    sending = _Sending(sender, messages)
    sending.measure()
    sending.match_keys()
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
            if message.idempotency_key is None or position in self.failed:
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
        """Each payload as the JSON it is stored as, refused when it is none (a number beyond a
        double's range) or larger than EXCHANGE_MAX_PAYLOAD_BYTES."""
        limit = settings.EXCHANGE_MAX_PAYLOAD_BYTES
        for position, message in enumerate(self.messages):
            try:
                self.payloads[position] = _json(message.payload)
            except (TypeError, ValueError):
                self.failed[position] = ValidationFailed({"payload": [NOT_JSON]})
                continue
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
        """Take the pending messages' places in their queues, then in one statement claim their
        keys, insert the rows of those whose key it claimed (or that have none) and wake the long
        polls: an autocommit statement, atomic by itself, with no transaction around it.

        A message whose key was claimed before is a duplicate of that message (even when its
        queue is full) or IdempotencyKeyReused, and gives its place back. A key that vanished
        between the claim and its lookup (forgotten after 24 hours at that moment) leaves its
        message pending: it is sent again, as new.
        """
        for attempt in range(3):
            pending = self.pending()
            if not pending:
                return
            places = queue_admit(Counter(self.messages[position].to for position in pending))
            admitted = []
            for position in pending:
                recipient = self.messages[position].to
                if places[recipient]:
                    places[recipient] -= 1
                    admitted.append(position)
                else:
                    self.failed[position] = QueueFull()
            self._replays([p for p in pending if p not in admitted and self._key(p) is not None])
            freed = self._insert(admitted) if admitted else set()
            if attempt < 2:
                # Replays gave their places back: what a full queue refused may fit in them.
                for position, error in list(self.failed.items()):
                    if isinstance(error, QueueFull) and self.messages[position].to in freed:
                        del self.failed[position]
        for position in self.pending():
            self.failed[position] = SendInterrupted()

    def _key(self, position: int) -> str | None:
        return self.messages[position].idempotency_key

    def _insert(self, positions: list[int]) -> set[int]:
        """Queue the messages at ``positions``; the recipients whose places some gave back
        (replays of a key claimed before)."""
        ids = {position: uuid.uuid4() for position in positions}
        rows = ",".join(self._row(position, ids[position]) for position in positions)
        with prepared_cursor() as cursor:
            cursor.execute(queries.SEND, {"sender": self.sender.pk, "messages": f"[{rows}]"})
            claimed = {row[0] for row in cursor.fetchall()}
        queued = [p for p in positions if self._key(p) is None or self._key(p) in claimed]
        for position in queued:
            self.sent[position] = Sent(message_id=ids[position], duplicate=False)
        metrics.sent.inc(len(queued))
        replays = [p for p in positions if p not in self.sent]
        if not replays:
            return set()
        freed = Counter(self.messages[position].to for position in replays)
        queue_release(freed)
        self._replays(replays)
        return set(freed)

    def _row(self, position: int, message_id: uuid.UUID) -> str:
        """The message at ``position`` as an element of queries.SEND's JSON array."""
        message = self.messages[position]
        row = (
            f'{{"id":"{message_id}","to":{message.to},"type":{_json(message.type)},'
            f'"payload":{self.payloads[position]},"headers":{_json(message.headers)}'
        )
        if message.idempotency_key is not None:
            row += f',"key":{_json(message.idempotency_key)},"hash":"{self.hashes[position]}"'
        return row + "}"

    def _replays(self, positions: list[int]) -> None:
        """Messages whose key was claimed before: a duplicate of the key's message, or
        IdempotencyKeyReused. A key not found leaves its message as it was."""
        keys = {cast(str, self._key(position)): position for position in positions}
        if not keys:
            return
        for key, message_id, body_hash in IdempotencyKey.objects.filter(
            sender=self.sender, key__in=list(keys)
        ).values_list("key", "message_id", "body_hash"):
            position = keys[key]
            self.failed.pop(position, None)
            if body_hash == self.hashes[position]:
                self.sent[position] = Sent(message_id=message_id, duplicate=True)
            else:
                self.failed[position] = IdempotencyKeyReused()

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
