"""What the exchange API hands out: received messages and the outcome of a send or a publish."""

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

    A topic's copy has the topic's ``topic_id`` and its publication's ``publication_id`` (the
    same in every subscriber's copy; each copy has a ``message_id`` of its own); both are None
    for a message sent directly, and from a platform without topics.
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
    # Last, with defaults: a Message built by hand, by position, before topics still builds.
    topic_id: int | None = None
    publication_id: str | None = None

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
            topic_id=raw.get("topicId"),
            publication_id=raw.get("publicationId"),
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
        return {"to": self.to, **_item_json(self, default_key)}


@dataclass(frozen=True)
class Sent:
    """The outcome of a send: the message's id, and whether an earlier send with the same
    idempotency key had queued it already (then nothing new was queued)."""

    message_id: str
    duplicate: bool


@dataclass(frozen=True)
class Publication:
    """A message for ``ExchangeClient.publish_batch``: what ``publish`` takes, as one value."""

    type: str
    payload: Any
    headers: Mapping[str, str] | None = None
    idempotency_key: str | None = None

    def to_json(self, default_key: str) -> dict[str, Any]:
        return _item_json(self, default_key)


@dataclass(frozen=True)
class Published:
    """The outcome of a publish: the publication's id, the subscribers that got a copy
    (``recipients``) and those whose queue was full and got none (``refused``), and whether an
    earlier publish with the same idempotency key had made it already (then nothing new was
    queued, and the figures are the first publish's)."""

    publication_id: str
    recipients: int
    refused: int
    duplicate: bool

    @classmethod
    def from_json(cls, answer: dict[str, Any], *, duplicate: bool) -> Published:
        """A publish's answer, or a batch publish's result."""
        return cls(
            publication_id=answer["publicationId"],
            recipients=answer["recipients"],
            refused=answer["refused"],
            duplicate=duplicate,
        )


def _item_json(item: Outgoing | Publication, default_key: str) -> dict[str, Any]:
    """A batch's message: its type, payload, key and headers (if any)."""
    body: dict[str, Any] = {
        "type": item.type,
        "payload": item.payload,
        "idempotencyKey": item.idempotency_key or default_key,
    }
    if item.headers:
        body["headers"] = dict(item.headers)
    return body
