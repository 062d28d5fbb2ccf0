"""Request and response shapes of the exchange API (the usual inputs of its hottest requests
are read directly: exchange.api.inputs)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any, cast

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from exchange import delivery_queries
from exchange.services.batches import NOT_JSON
from platform_site.serializers import Input

MAX_BATCH = 100
MAX_LEASE_SECONDS = 43200
# The longest long poll: nginx's and the deployments' timeouts are set above it (deploy/).
MAX_WAIT_SECONDS = 20
MAX_HEADERS = 32
MAX_OUTSTANDING = 1000


def _lease_seconds() -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_LEASE_SECONDS, default=30)


class ReceiveOptions(Input):
    """How to receive: the receive's query string, or an ACK's ``receive`` member (JSON)."""

    max = serializers.IntegerField(min_value=1, max_value=MAX_BATCH, default=1)
    waitSeconds = serializers.IntegerField(min_value=0, max_value=MAX_WAIT_SECONDS, default=0)
    leaseSeconds = _lease_seconds()


class QueryInput(Input):
    """A query string's parameters: text read as numbers, and an empty value refused. DRF reads an
    empty query value of a field that has a default as absent: ?leaseSeconds= would lease for
    30 s where the client meant to say something else."""

    strict_json_types = False

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, QueryDict):
            empty = sorted(name for name, values in data.lists() if "" in values)
            if empty:
                invalid = serializers.IntegerField.default_error_messages["invalid"]
                raise serializers.ValidationError({name: [invalid] for name in empty})
        return super().to_internal_value(data)


class ReceiveInput(QueryInput, ReceiveOptions):
    pass


class StreamInput(QueryInput):
    """The push stream's query string (GET /api/exchange/messages/stream)."""

    maxOutstanding = serializers.IntegerField(
        min_value=1,
        max_value=MAX_OUTSTANDING,
        default=100,
        help_text="Messages delivered on this stream and not yet settled (ACKed, NACKed, "
        "dead-lettered, or their lease run out) at most: each settled one frees a credit.",
    )
    leaseSeconds = _lease_seconds()


@extend_schema_field(
    {
        "anyOf": [
            {"type": "object", "additionalProperties": True},
            {"type": "array", "items": {}},
            {"type": "string"},
            {"type": "number"},
            {"type": "boolean"},
        ],
        "description": "Any JSON value but null, up to EXCHANGE_MAX_PAYLOAD_BYTES.",
    }
)
class PayloadField(serializers.JSONField):
    """A message's payload: any JSON value but null (the view refuses null)."""

    default_error_messages = {"invalid": NOT_JSON}


# What receipt_parse reads: base64url of 32 bytes, without padding.
RECEIPT_HANDLE_PATTERN = r"^[A-Za-z0-9_-]{43}$"


@extend_schema_field(
    {"type": "string", "pattern": RECEIPT_HANDLE_PATTERN, "minLength": 43, "maxLength": 43}
)
class ReceiptHandleField(serializers.CharField):
    pass


class SendInput(Input):
    to = serializers.IntegerField(min_value=1, help_text="The recipient's adapterId.")
    type = serializers.CharField(max_length=128)
    payload = PayloadField()
    headers = serializers.DictField(
        child=serializers.CharField(max_length=1024, allow_blank=True), required=False, default=dict
    )

    def validate_headers(self, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_HEADERS:
            raise serializers.ValidationError(f"At most {MAX_HEADERS} headers.")
        if any(not key or len(key) > 64 for key in headers):
            raise serializers.ValidationError("Header names are 1 to 64 characters.")
        return headers


# The idempotency key's one rule: a single send's Idempotency-Key header, a batch message's
# idempotencyKey (the same namespace), their fast paths (exchange.api.inputs) and the schema.
IDEMPOTENCY_KEY_RULE = "1 to 255 printable ASCII characters."
IDEMPOTENCY_KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[\x21-\x7e]+$",
}
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def idempotency_key_valid(value: object) -> bool:
    """Whether ``value`` is an idempotency key: IDEMPOTENCY_KEY_RULE."""
    return isinstance(value, str) and _IDEMPOTENCY_KEY.fullmatch(value) is not None


@extend_schema_field(IDEMPOTENCY_KEY_SCHEMA)
class IdempotencyKeyField(serializers.CharField):
    """An idempotency key (IDEMPOTENCY_KEY_RULE), as the single send's Idempotency-Key header."""

    default_error_messages = {"invalid": IDEMPOTENCY_KEY_RULE}

    def to_internal_value(self, data: Any) -> str:
        if not idempotency_key_valid(data):
            self.fail("invalid")
        return cast(str, data)


class SendBatchItemInput(SendInput):
    idempotencyKey = IdempotencyKeyField(
        required=False,
        help_text="As a single send's Idempotency-Key header, in the same namespace.",
    )


class SendBatchInput(Input):
    messages = serializers.ListField(
        child=SendBatchItemInput(), allow_empty=False, min_length=1, max_length=MAX_BATCH
    )


class PublishInput(SendInput):
    """A publication: a message without its recipient (each subscriber gets a copy)."""

    to = None  # type: ignore[assignment]


class PublishBatchItemInput(SendBatchItemInput):
    to = None  # type: ignore[assignment]


class PublishBatchInput(Input):
    messages = serializers.ListField(
        child=PublishBatchItemInput(), allow_empty=False, min_length=1, max_length=MAX_BATCH
    )


@extend_schema_field(
    {
        "type": "object",
        "required": ["status", "code", "detail"],
        "properties": {
            "status": {"type": "integer"},
            "code": {"type": "string"},
            "detail": {"type": "string"},
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "With VALIDATION_FAILED and UNKNOWN_FIELD: what is wrong.",
            },
            "retryAfterSeconds": {
                "type": "integer",
                "description": "With RATE_LIMITED and QUEUE_FULL.",
            },
        },
        "description": "failed: why, with the members of the error's problem (docs/errors.md).",
    }
)
class ItemErrorField(serializers.JSONField):
    """An item's error: a problem's members but type and title (``errors`` is taken by
    Serializer, so this is a field with a schema rather than a serializer)."""


BATCH_STATUSES = ["sent", "duplicate", "failed"]


class SendBatchResultOutput(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=BATCH_STATUSES)
    messageId = serializers.UUIDField(
        required=False, help_text="sent: the new message; duplicate: the key's first message."
    )
    error = ItemErrorField(required=False)


class SendBatchOutput(serializers.Serializer[Any]):
    results = SendBatchResultOutput(many=True, help_text="One per message, in the request's order.")


class SentOutput(serializers.Serializer[Any]):
    messageId = serializers.UUIDField()
    duplicate = serializers.BooleanField(required=False, help_text="Present (true) on a replay.")


# The type of each of a received message's members; their names and order are
# delivery_queries.DELIVERY_MEMBERS', the shape's one definition (a member without a type here
# fails at import).
_DELIVERY_FIELDS: dict[str, Callable[[], serializers.Field[Any, Any, Any, Any]]] = {
    "messageId": serializers.UUIDField,
    "receiptHandle": lambda: serializers.CharField(
        help_text="Names this delivery for nack and lease."
    ),
    "deliveryCount": serializers.IntegerField,
    "redelivered": serializers.BooleanField,
    "enqueuedAt": serializers.DateTimeField,
    "leaseExpiresAt": serializers.DateTimeField,
    "sender": lambda: serializers.IntegerField(
        allow_null=True, help_text="The sender's adapterId (a topic's copy: the publisher's)."
    ),
    "topicId": lambda: serializers.IntegerField(
        allow_null=True, help_text="A topic's copy: the topic it was published to; else null."
    ),
    "publicationId": lambda: serializers.UUIDField(
        allow_null=True,
        help_text="A topic's copy: its publication, shared by every subscriber's copy; else null.",
    ),
    "type": serializers.CharField,
    "headers": lambda: serializers.DictField(child=serializers.CharField()),
    "payload": serializers.JSONField,
}
DeliveryOutput: type[serializers.Serializer[Any]] = type(
    "DeliveryOutput",
    (serializers.Serializer,),
    {name: _DELIVERY_FIELDS[name]() for name, _, _ in delivery_queries.DELIVERY_MEMBERS},
)


class ReceiveOutput(serializers.Serializer[Any]):
    messages = DeliveryOutput(many=True)


class MessageIdsField(serializers.ListField):
    """1 to MAX_BATCH UUIDs, checked in one plain loop: an ACK of 100 ids is a hot request, and
    a UUIDField per item cost more than the ACK's SQL."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.UUIDField(), min_length=1, max_length=MAX_BATCH, **kwargs
        )

    def to_internal_value(self, data: Any) -> list[uuid.UUID]:
        if isinstance(data, str) or not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        ids: list[uuid.UUID] = []
        errors: dict[int, list[str]] = {}
        for index, item in enumerate(data):
            try:
                if not isinstance(item, str):
                    raise ValueError(item)
                ids.append(uuid.UUID(item))
            except ValueError:
                errors[index] = ["Must be a valid UUID."]
        if errors:
            raise serializers.ValidationError(
                cast(Any, errors)
            )  # indexes, as ListField reports them
        return ids


class AckInput(Input):
    messageIds = MessageIdsField()
    receive = ReceiveOptions(
        required=False,
        help_text="Receive after the ACK, as GET /api/exchange/messages with these options "
        "would: the answer's messages. One request per batch for a consumer's loop.",
    )


class ResultOutput(serializers.Serializer[Any]):
    messageId = serializers.UUIDField()
    status = serializers.CharField()
    leaseExpiresAt = serializers.DateTimeField(required=False)


class ResultsOutput(serializers.Serializer[Any]):
    results = ResultOutput(many=True)


class AckOutput(ResultsOutput):
    messages = DeliveryOutput(
        many=True, required=False, help_text="Present when the request asked to receive."
    )


class ReleaseInput(Input):
    receiptHandles = serializers.ListField(
        child=ReceiptHandleField(max_length=64), min_length=1, max_length=MAX_BATCH
    )
    delaySeconds = serializers.IntegerField(min_value=0, max_value=MAX_LEASE_SECONDS, default=0)


class LeaseInput(Input):
    receiptHandles = serializers.ListField(
        child=ReceiptHandleField(max_length=64), min_length=1, max_length=MAX_BATCH
    )
    leaseSeconds = serializers.IntegerField(min_value=1, max_value=MAX_LEASE_SECONDS)


class WhoAmIOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()
    ownerId = serializers.IntegerField()
    sessionId = serializers.UUIDField()
    deviceId = serializers.CharField(
        allow_null=True, help_text="X-Device-ID, or null for a fingerprint."
    )
    accessTokenExpiresAt = serializers.DateTimeField()


class StatsOutput(serializers.Serializer[Any]):
    available = serializers.IntegerField()
    inFlight = serializers.IntegerField()
    delayed = serializers.IntegerField()
    deadLettered = serializers.IntegerField()
    oldestAgeSeconds = serializers.IntegerField(allow_null=True)
