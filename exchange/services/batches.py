"""What a send and a publish share (exchange/services/sending.py, publishing.py): a call's
messages by position, each payload measured, idempotency keys matched within the call and looked
up from earlier calls, and the outcome of each message."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar, cast

from django.conf import settings

from accounts.models import User
from exchange.errors import IdempotencyKeyReused
from exchange.models import IdempotencyKey
from platform_site.errors import ApplicationError, PayloadTooLarge, ValidationFailed

NOT_JSON = "Must be a JSON value PostgreSQL can store: numbers within a double's range (±1.8e308)."


def compact_json(value: Any) -> str:
    """``value`` as compact JSON; ValueError or TypeError for what JSON cannot hold (an infinite
    float, an object that is no JSON value: platform_site.parsers.NonFiniteNumber)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Item(Protocol):
    """A message to send or publish, as far as the shared bookkeeping reads it."""

    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> Any: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def idempotency_key(self) -> str | None: ...


Done = TypeVar("Done")  # what a message that was sent or published came to


class Batch(Generic[Done]):
    """One call: its messages by position, and what has become of each (``failed`` or
    ``done``, or a ``repeat`` of an earlier message with the same key)."""

    def __init__(self, sender: User, items: Sequence[Item]) -> None:
        self.sender = sender
        self.items = items
        self.failed: dict[int, ApplicationError] = {}
        self.done: dict[int, Done] = {}
        self.repeats: dict[int, int] = {}  # a key's later message -> its first message
        self.hashes: dict[int, str] = {}  # the body hash of each message with a key
        self.payloads: dict[int, str] = {}  # each payload measured, as compact JSON

    def target(self, position: int) -> dict[str, int]:
        """Where the message at ``position`` goes ({"to": adapterId} or {"topic": topicId}):
        part of what its idempotency key remembers."""
        raise NotImplementedError

    def repeated(self, done: Done) -> Done:
        """What a replay of a message that came to ``done`` comes to."""
        raise NotImplementedError

    def pending(self) -> list[int]:
        """The positions of the messages that are neither failed nor done nor a repeat yet."""
        return [
            position
            for position in range(len(self.items))
            if position not in self.failed
            and position not in self.done
            and position not in self.repeats
        ]

    def key(self, position: int) -> str | None:
        return self.items[position].idempotency_key

    def measure(self) -> None:
        """Each payload as the JSON it is stored as, refused when it is none (a number beyond a
        double's range) or larger than EXCHANGE_MAX_PAYLOAD_BYTES."""
        limit = settings.EXCHANGE_MAX_PAYLOAD_BYTES
        for position, item in enumerate(self.items):
            try:
                self.payloads[position] = compact_json(item.payload)
            except (TypeError, ValueError):
                self.failed[position] = ValidationFailed({"payload": [NOT_JSON]})
                continue
            size = len(self.payloads[position].encode())
            if size > limit:
                self.failed[position] = PayloadTooLarge(
                    f"The payload is {size} bytes of JSON; the limit is {limit}."
                )

    def match_keys(self) -> None:
        """A key's later messages: repeats of its first when the same, else IdempotencyKeyReused."""
        first_of: dict[str, int] = {}
        for position, item in enumerate(self.items):
            if item.idempotency_key is None or position in self.failed:
                continue
            self.hashes[position] = self._body_hash(position)
            first = first_of.setdefault(item.idempotency_key, position)
            if first == position:
                continue
            if self.hashes[first] == self.hashes[position]:
                self.repeats[position] = first
            else:
                self.failed[position] = IdempotencyKeyReused()

    def _body_hash(self, position: int) -> str:
        """What an idempotency key remembers of its message: the same for the same message,
        however its JSON was spaced or its keys ordered."""
        item = self.items[position]
        canonical = json.dumps(
            {
                **self.target(position),
                "type": item.type,
                "payload": item.payload,
                "headers": item.headers,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def row(self, position: int, id: uuid.UUID) -> str:
        """The message at ``position`` as a JSON object of a statement's array (queries.SEND,
        topic_queries.PUBLISH), without its closing brace: its id, type, payload and headers,
        and its key with its hash when it has one."""
        item = self.items[position]
        row = (
            f'{{"id":"{id}","type":{compact_json(item.type)},'
            f'"payload":{self.payloads[position]},"headers":{compact_json(item.headers)}'
        )
        if item.idempotency_key is not None:
            row += f',"key":{compact_json(item.idempotency_key)},"hash":"{self.hashes[position]}"'
        return row

    def claimed_before(self, positions: list[int]) -> dict[int, uuid.UUID]:
        """Of the messages at ``positions``, whose keys were claimed by earlier calls: those
        with the same body, mapped to the id their key produced; the others fail with
        IdempotencyKeyReused. A key not found (forgotten meanwhile) leaves its message as it was."""
        keys = {cast(str, self.key(position)): position for position in positions}
        if not keys:
            return {}
        same: dict[int, uuid.UUID] = {}
        for key, produced, body_hash in IdempotencyKey.objects.filter(
            sender=self.sender, key__in=list(keys)
        ).values_list("key", "message_id", "body_hash"):
            position = keys[key]
            self.failed.pop(position, None)
            if body_hash == self.hashes[position]:
                same[position] = produced
            else:
                self.failed[position] = IdempotencyKeyReused()
        return same

    def outcomes(self) -> list[Done | ApplicationError]:
        for position, first in self.repeats.items():
            if first in self.done:
                self.done[position] = self.repeated(self.done[first])
            else:
                self.failed[position] = self.failed[first]
        return [
            self.done[position] if position in self.done else self.failed[position]
            for position in range(len(self.items))
        ]
