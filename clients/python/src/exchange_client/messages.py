"""What the exchange API hands out: received messages and the outcome of a send."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from exchange_client.timestamps import parse_timestamp


@dataclass(frozen=True)
class Message:
    """A received message. ``raw`` is its JSON object exactly as the platform sent it.

    Delivery is at least once: the same ``message_id`` may come again (``redelivered``), so a
    handler must be idempotent, keyed by ``message_id``.
    """

    message_id: str
    receipt_handle: str
    delivery_count: int
    redelivered: bool
    enqueued_at: datetime
    lease_expires_at: datetime
    sender: int | None
    type: str
    headers: dict[str, str]
    payload: Any
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Message:
        return cls(
            message_id=raw["messageId"],
            receipt_handle=raw["receiptHandle"],
            delivery_count=raw["deliveryCount"],
            redelivered=raw["redelivered"],
            enqueued_at=parse_timestamp(raw["enqueuedAt"]),
            lease_expires_at=parse_timestamp(raw["leaseExpiresAt"]),
            sender=raw["sender"],
            type=raw["type"],
            headers=raw["headers"],
            payload=raw["payload"],
            raw=raw,
        )


@dataclass(frozen=True)
class Outgoing:
    """A message for ``ExchangeClient.send_batch``: what ``send`` takes, as one value."""

    to: int
    type: str
    payload: Any
    headers: Mapping[str, str] | None = None
    idempotency_key: str | None = None

    def to_json(self, default_key: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "to": self.to,
            "type": self.type,
            "payload": self.payload,
            "idempotencyKey": self.idempotency_key or default_key,
        }
        if self.headers:
            body["headers"] = dict(self.headers)
        return body


@dataclass(frozen=True)
class Sent:
    """The outcome of a send: the message's id, and whether an earlier send with the same
    idempotency key had queued it already (then nothing new was queued)."""

    message_id: str
    duplicate: bool
