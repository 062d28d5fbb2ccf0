"""The fast paths of the exchange's hottest inputs (send, batch send, receive, ACK): the usual
input read directly, anything else, valid or not, through the serializers of
exchange.api.serializers, so results and errors are theirs
(tests/exchange/test_input_fast_paths.py holds the two alike)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.http import QueryDict
from rest_framework import serializers

from exchange.api.serializers import (
    MAX_BATCH,
    MAX_HEADERS,
    AckInput,
    PublishBatchInput,
    PublishBatchItemInput,
    PublishInput,
    ReceiveInput,
    ReceiveOptions,
    SendBatchInput,
    SendBatchItemInput,
    SendInput,
    idempotency_key_valid,
)
from exchange.services.publishing import Publishing
from exchange.services.sending import Outgoing
from platform_site.errors import ApplicationError, application_error_for
from platform_site.serializers import BIGINT_MAX, Input

NOT_AN_OBJECT = "Each message is a JSON object."


# A send's usual input, read directly: building SendInput for each message of a batch of 100 cost
# more than the rest of the request. Anything else, valid or not, goes through the serializers, so
# results and errors are theirs (tests/exchange/test_input_fast_paths.py holds the two alike).
# A publish's message is a send's without "to".
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # CharField's validators refuse these


@dataclass(frozen=True)
class MessageShape:
    """A send's or a publish's message: its fields, the serializers that check it alone, as a
    batch's item and as a batch, and what the service takes."""

    fields: frozenset[str]
    single: type[Input]
    item: type[Input]
    batch: type[Input]
    make: Callable[[dict[str, Any]], Any]

    @property
    def required(self) -> frozenset[str]:
        return self.fields - {"headers"}


def _outgoing(item: dict[str, Any]) -> Outgoing:
    return Outgoing(
        to=item["to"],
        type=item["type"],
        payload=item["payload"],
        headers=item["headers"],
        idempotency_key=item.get("idempotencyKey"),
    )


def _publishing(item: dict[str, Any]) -> Publishing:
    return Publishing(
        type=item["type"],
        payload=item["payload"],
        headers=item["headers"],
        idempotency_key=item.get("idempotencyKey"),
    )


SEND = MessageShape(
    frozenset({"to", "type", "payload", "headers"}),
    SendInput,
    SendBatchItemInput,
    SendBatchInput,
    _outgoing,
)
PUBLISH = MessageShape(
    frozenset({"type", "payload", "headers"}),
    PublishInput,
    PublishBatchItemInput,
    PublishBatchInput,
    _publishing,
)


def _plain_message(item: Any, shape: MessageShape, *, keyed: bool) -> dict[str, Any] | None:
    """The validated data of a usual, valid message of ``shape`` parsed from JSON (with an
    idempotencyKey where ``keyed``: a batch's item); None for anything else."""
    fields = shape.fields | {"idempotencyKey"} if keyed else shape.fields
    if not isinstance(item, dict) or not shape.required <= item.keys() <= fields:
        return None
    kind, payload = item["type"], item["payload"]
    if payload is None:
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
    message = {"type": kind, "payload": payload, "headers": dict(headers)}
    if "to" in shape.fields:
        to = item["to"]
        if type(to) is not int or not 1 <= to <= BIGINT_MAX:
            return None
        message = {"to": to, **message}
    if "idempotencyKey" in item:
        key = item["idempotencyKey"]
        if not idempotency_key_valid(key):
            return None
        message["idempotencyKey"] = key
    return message


def send_input(data: Any, shape: MessageShape = SEND) -> dict[str, Any]:
    """The single serializer's validated data for a single send's (or publish's) body."""
    message = _plain_message(data, shape, keyed=False)
    return shape.single.validated(data) if message is None else message


def batch_items(data: Any, shape: MessageShape = SEND) -> list[Any]:
    """The batch's messages, each what ``shape`` makes of it (an Outgoing, a Publishing) or the
    400 that says what is wrong with it. A body that is not a batch at all (not an object with a
    list of 1 to MAX_BATCH messages) is one 400 for the whole request."""
    if isinstance(data, dict) and data.keys() == {"messages"}:
        items = data["messages"]
        if isinstance(items, list) and 1 <= len(items) <= MAX_BATCH:
            messages = [_plain_message(item, shape, keyed=True) for item in items]
            if None not in messages:
                return [shape.make(cast(dict[str, Any], message)) for message in messages]
    return batch_items_checked(data, shape)


def batch_items_checked(data: Any, shape: MessageShape = SEND) -> list[Any]:
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
    batch = shape.batch(data=data)
    if batch.is_valid():
        return [shape.make(item) for item in batch.validated_data["messages"]]
    # The items' own errors come by position, {index: errors}; anything else is about the body
    # or the list itself.
    item_errors = batch.errors.get("messages")
    if batch.errors.keys() != {"messages"} or not isinstance(item_errors, dict):
        raise serializers.ValidationError(batch.errors)
    items: list[Any] = []
    for position, item in enumerate(data["messages"]):
        if position in item_errors:
            error = application_error_for(serializers.ValidationError(item_errors[position]))
            items.append(cast(ApplicationError, error))
        else:
            items.append(shape.make(shape.item.validated(item)))
    return items


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
