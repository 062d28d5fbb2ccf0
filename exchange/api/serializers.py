"""Request and response shapes of the exchange API."""

from __future__ import annotations

import re
import uuid
from typing import Any, cast

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from exchange.services.sending import NOT_JSON, Outgoing
from platform_site.errors import ApplicationError, application_error_for
from platform_site.serializers import BIGINT_MAX, Input

MAX_BATCH = 100
MAX_LEASE_SECONDS = 43200
MAX_HEADERS = 32
MAX_OUTSTANDING = 1000


def _lease_seconds() -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_LEASE_SECONDS, default=30)


class ReceiveOptions(Input):
    """How to receive: the receive's query string, or an ACK's ``receive`` member (JSON)."""

    max = serializers.IntegerField(min_value=1, max_value=MAX_BATCH, default=1)
    waitSeconds = serializers.IntegerField(min_value=0, max_value=20, default=0)
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


IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


@extend_schema_field(
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[\x21-\x7e]+$"}
)
class IdempotencyKeyField(serializers.CharField):
    """1 to 255 printable ASCII characters, as the single send's Idempotency-Key header."""

    default_error_messages = {"invalid": "1 to 255 printable ASCII characters."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or not IDEMPOTENCY_KEY.fullmatch(data):
            self.fail("invalid")
        return data


class SendBatchItemInput(SendInput):
    idempotencyKey = IdempotencyKeyField(
        required=False,
        help_text="As a single send's Idempotency-Key header, in the same namespace.",
    )


class SendBatchInput(Input):
    messages = serializers.ListField(
        child=SendBatchItemInput(), allow_empty=False, min_length=1, max_length=MAX_BATCH
    )


NOT_AN_OBJECT = "Each message is a JSON object."


# A send's usual input, read directly: building SendInput for each message of a batch of 100 cost
# more than the rest of the request. Anything else, valid or not, goes through the serializers, so
# results and errors are theirs (tests/exchange/test_input_fast_paths.py holds the two alike).
_MESSAGE_FIELDS = frozenset({"to", "type", "payload", "headers"})
_REQUIRED_FIELDS = frozenset({"to", "type", "payload"})
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # CharField's validators refuse these


def _plain_message(item: Any, fields: frozenset[str]) -> dict[str, Any] | None:
    """The validated data of a usual, valid message parsed from JSON, whose fields are among
    ``fields``; None for anything else."""
    if not isinstance(item, dict) or not _REQUIRED_FIELDS <= item.keys() <= fields:
        return None
    to, kind, payload = item["to"], item["type"], item["payload"]
    if type(to) is not int or not 1 <= to <= BIGINT_MAX or payload is None:
        return None
    if not isinstance(kind, str) or not 0 < len(kind) <= 128 or _UNSTORABLE.search(kind):
        return None
    headers = item.get("headers", {})
    if not isinstance(headers, dict) or len(headers) > MAX_HEADERS:
        return None
    for name, value in headers.items():
        if not (isinstance(name, str) and 0 < len(name) <= 64):
            return None
        if not (isinstance(value, str) and len(value) <= 1024):
            return None
        if _UNSTORABLE.search(value):
            return None
    message = {"to": to, "type": kind, "payload": payload, "headers": dict(headers)}
    if "idempotencyKey" in item:
        key = item["idempotencyKey"]
        if not isinstance(key, str) or not IDEMPOTENCY_KEY.fullmatch(key):
            return None
        message["idempotencyKey"] = key
    return message


def send_input(data: Any) -> dict[str, Any]:
    """SendInput's validated data for a single send's body."""
    message = _plain_message(data, _MESSAGE_FIELDS)
    return SendInput.validated(data) if message is None else message


_BATCH_ITEM_FIELDS = _MESSAGE_FIELDS | {"idempotencyKey"}


def batch_items(data: Any) -> list[Outgoing | ApplicationError]:
    """SendBatchInput's messages, each an Outgoing or the 400 that says what is wrong with it.
    A body that is not a batch at all (not an object with a list of 1 to MAX_BATCH messages)
    is one 400 for the whole request."""
    if isinstance(data, dict) and data.keys() == {"messages"}:
        items = data["messages"]
        if isinstance(items, list) and 1 <= len(items) <= MAX_BATCH:
            messages = [_plain_message(item, _BATCH_ITEM_FIELDS) for item in items]
            if None not in messages:
                return [_outgoing(cast(dict[str, Any], message)) for message in messages]
    return batch_items_checked(data)


def batch_items_checked(data: Any) -> list[Outgoing | ApplicationError]:
    """batch_items through the serializers."""
    # The schema says each message is an object: a list with anything else in it is no batch,
    # and is refused whole, before any of its messages is sent.
    listed = data.get("messages") if isinstance(data, dict) else None
    if isinstance(listed, list):
        strays = {
            position: [NOT_AN_OBJECT]
            for position, item in enumerate(listed)
            if not isinstance(item, dict)
        }
        if strays:
            raise serializers.ValidationError({"messages": cast(Any, strays)})  # by index
    batch = SendBatchInput(data=data)
    if batch.is_valid():
        return [_outgoing(item) for item in batch.validated_data["messages"]]
    # The items' own errors come by position, {index: errors}; anything else is about the body
    # or the list itself.
    item_errors = batch.errors.get("messages")
    if batch.errors.keys() != {"messages"} or not isinstance(item_errors, dict):
        raise serializers.ValidationError(batch.errors)
    items: list[Outgoing | ApplicationError] = []
    for position, item in enumerate(data["messages"]):
        if position in item_errors:
            error = application_error_for(serializers.ValidationError(item_errors[position]))
            items.append(cast(ApplicationError, error))
        else:
            items.append(_outgoing(SendBatchItemInput.validated(item)))
    return items


def _outgoing(item: dict[str, Any]) -> Outgoing:
    return Outgoing(
        to=item["to"],
        type=item["type"],
        payload=item["payload"],
        headers=item["headers"],
        idempotency_key=item.get("idempotencyKey"),
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


class DeliveryOutput(serializers.Serializer[Any]):
    messageId = serializers.UUIDField()
    receiptHandle = serializers.CharField(help_text="Names this delivery for nack and lease.")
    deliveryCount = serializers.IntegerField()
    redelivered = serializers.BooleanField()
    enqueuedAt = serializers.DateTimeField()
    leaseExpiresAt = serializers.DateTimeField()
    sender = serializers.IntegerField(allow_null=True, help_text="The sender's adapterId.")
    type = serializers.CharField()
    headers = serializers.DictField(child=serializers.CharField())
    payload = serializers.JSONField()


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


# Receive and ACK are the exchange's hottest requests, and building a DRF serializer (its fields are
# deep-copied per instance) cost about a tenth of each. The usual input is read directly; anything
# else, valid or not, goes through the serializer, so results and errors are the serializer's.


def _receive_bounds() -> dict[str, tuple[int, int, int]]:
    """(minimum, maximum, default) of each of ReceiveOptions' fields."""
    bounds: dict[str, tuple[int, int, int]] = {}
    for name, field in cast(dict[str, serializers.IntegerField], ReceiveOptions().fields).items():
        low, high, default = field.min_value, field.max_value, field.default
        if low is None or high is None or not isinstance(default, int):
            raise TypeError(f"ReceiveOptions.{name} needs bounds and a default")
        bounds[name] = (low, high, default)
    return bounds


RECEIVE_BOUNDS = _receive_bounds()


def receive_options(query: QueryDict) -> dict[str, int]:
    """ReceiveInput's validated data for the receive's query string."""
    options = {name: default for name, (_, _, default) in RECEIVE_BOUNDS.items()}
    for name, values in query.lists():
        bounds = RECEIVE_BOUNDS.get(name)
        number = None if bounds is None else _plain_number(values, bounds)
        if number is None:
            return ReceiveInput.validated(query)
        options[name] = number
    return options


def _plain_number(values: list[str], bounds: tuple[int, int, int]) -> int | None:
    """The one plain decimal number in ``values`` if it lies within ``bounds``."""
    if len(values) != 1 or len(values[0]) > 9 or not (values[0].isascii() and values[0].isdigit()):
        return None
    number, (low, high, _) = int(values[0]), bounds
    return number if low <= number <= high else None


_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CANONICAL_IDS = re.compile(f"{_UUID}(?:,{_UUID})*")


def ack_input(data: Any) -> tuple[list[str], dict[str, int] | None]:
    """AckInput's validated data for the ACK's body: the messageIds as canonical text (what
    receive hands out), and the options of the receive that follows, if the body asks for one."""
    if isinstance(data, dict) and "messageIds" in data and data.keys() <= {"messageIds", "receive"}:
        ids = _plain_ids(data["messageIds"])
        options = _plain_options(data["receive"]) if "receive" in data else None
        if ids is not None and (options is not None or "receive" not in data):
            return ids, options
    validated = AckInput.validated(data)
    ids = [str(message_id) for message_id in validated["messageIds"]]
    receive = validated.get("receive")
    return ids, None if receive is None else dict(receive)


def _plain_ids(items: Any) -> list[str] | None:
    """``items`` if it is a list of 1 to MAX_BATCH canonical UUIDs."""
    if isinstance(items, list) and 1 <= len(items) <= MAX_BATCH:
        try:
            joined = ",".join(items)
        except TypeError:  # an item is not a string
            return None
        # As many UUIDs as items, each 36 characters: no item holds a comma of its own.
        if len(joined) == 37 * len(items) - 1 and _CANONICAL_IDS.fullmatch(joined):
            return items
    return None


def _plain_options(receive: Any) -> dict[str, int] | None:
    """ReceiveOptions' validated data if ``receive`` is an object of its fields, each a JSON
    integer within its bounds."""
    if not isinstance(receive, dict):
        return None
    options = {name: default for name, (_, _, default) in RECEIVE_BOUNDS.items()}
    for name, value in receive.items():
        bounds = RECEIVE_BOUNDS.get(name)
        if bounds is None or type(value) is not int or not bounds[0] <= value <= bounds[1]:
            return None
        options[name] = value
    return options


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
