"""receive_options, ack_input, send_input and batch_items answer exactly as ReceiveInput, AckInput,
SendInput and SendBatchInput: same data, same errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.http import QueryDict
from rest_framework.exceptions import ValidationError

from exchange.api.inputs import (
    ack_input,
    batch_items,
    batch_items_checked,
    receive_options,
    send_input,
)
from exchange.api.serializers import AckInput, ReceiveInput, SendInput
from exchange.services.sending import Outgoing
from platform_site.errors import ApplicationError

QUERIES = [
    "",
    "max=1",
    "max=100&waitSeconds=20&leaseSeconds=43200",
    "max=0",
    "max=101",
    "max=007",
    "max=5.0",
    "max=%205",
    "max=-1",
    "max=",
    "max=%EF%BC%95",  # a fullwidth digit five
    "max=1&max=2",
    "waitSeconds=21",
    "leaseSeconds=0",
    "leaseSeconds=43201",
    "max=" + "9" * 12,
    "max=" + "1" * 5000,
    "max=abc",
    "unknown=1",
    "max=1&unknown=1",
]
UUIDS = [str(uuid.uuid4()) for _ in range(3)]
BODIES: list[Any] = [
    {"messageIds": UUIDS[:1]},
    {"messageIds": UUIDS},
    {"messageIds": [UUIDS[0].replace("-", "")]},
    {"messageIds": ["{" + UUIDS[0] + "}"]},
    {"messageIds": [UUIDS[0].upper()]},
    {"messageIds": [UUIDS[0], "not-a-uuid", 7]},
    {"messageIds": [UUIDS[0] + "," + UUIDS[1]]},  # two ids in one item
    {"messageIds": [UUIDS[0] + "," + UUIDS[1], ""]},
    {"messageIds": [UUIDS[0], UUIDS[1] + "\n"]},
    {"messageIds": [UUIDS[0], None]},
    {"messageIds": UUIDS * 33 + UUIDS[:1]},  # 100
    {"messageIds": []},
    {"messageIds": UUIDS * 34},  # 102
    {"messageIds": UUIDS[0]},
    {"messageIds": None},
    {"messageIds": UUIDS[:1], "extra": 1},
    # An ACK that also receives (AckInput's receive: ReceiveOptions, in JSON).
    {"messageIds": UUIDS, "receive": {}},
    {"messageIds": UUIDS, "receive": {"max": 100}},
    {"messageIds": UUIDS, "receive": {"max": 100, "waitSeconds": 20, "leaseSeconds": 43200}},
    {"messageIds": UUIDS, "receive": {"max": 0}},
    {"messageIds": UUIDS, "receive": {"max": 101}},
    {"messageIds": UUIDS, "receive": {"max": "5"}},
    {"messageIds": UUIDS, "receive": {"max": 5.0}},
    {"messageIds": UUIDS, "receive": {"max": True}},
    {"messageIds": UUIDS, "receive": {"max": None}},
    {"messageIds": UUIDS, "receive": {"waitSeconds": 21}},
    {"messageIds": UUIDS, "receive": {"leaseSeconds": 0}},
    {"messageIds": UUIDS, "receive": {"max": 2**70}},
    {"messageIds": UUIDS, "receive": {"colour": "red"}},
    {"messageIds": UUIDS, "receive": {"max": 1, "colour": "red"}},
    {"messageIds": UUIDS, "receive": None},
    {"messageIds": UUIDS, "receive": 10},
    {"messageIds": UUIDS, "receive": [10]},
    {"messageIds": UUIDS, "receive": "max=10"},
    {"messageIds": [], "receive": {"max": 10}},
    {"messageIds": ["x"], "receive": {"max": 0}},
    {"receive": {"max": 10}},
    {},
    [UUIDS[0]],
    "text",
    None,
]

GOOD = {"to": 7, "type": "order.created", "payload": {"n": 1}}
MESSAGES: list[Any] = [
    GOOD,
    {**GOOD, "headers": {"trace-id": "abc", "empty": ""}},
    {**GOOD, "headers": {}},
    {**GOOD, "payload": 0},
    {**GOOD, "payload": ""},
    {**GOOD, "payload": [None]},
    {**GOOD, "payload": None},
    {**GOOD, "type": " "},
    {**GOOD, "type": ""},
    {**GOOD, "type": "t" * 128},
    {**GOOD, "type": "t" * 129},
    {**GOOD, "type": "a\x00b"},
    {**GOOD, "type": "\ud800"},
    {**GOOD, "type": 5},
    {**GOOD, "to": 0},
    {**GOOD, "to": True},
    {**GOOD, "to": 1.0},
    {**GOOD, "to": "7"},
    {**GOOD, "to": 2**63 - 1},
    {**GOOD, "to": 2**63},
    {**GOOD, "headers": None},
    {**GOOD, "headers": []},
    {**GOOD, "headers": {"": "x"}},
    {**GOOD, "headers": {"h" * 64: "x"}},
    {**GOOD, "headers": {"h" * 65: "x"}},
    {**GOOD, "headers": {"h": "v" * 1024}},
    {**GOOD, "headers": {"h": "v" * 1025}},
    {**GOOD, "headers": {"h": 1}},
    {**GOOD, "headers": {"h": None}},
    {**GOOD, "headers": {"h": "\x00"}},
    {**GOOD, "headers": {f"h{n}": "v" for n in range(32)}},
    {**GOOD, "headers": {f"h{n}": "v" for n in range(33)}},
    {**GOOD, "idempotencyKey": "order-1"},
    {**GOOD, "idempotencyKey": "k" * 255},
    {**GOOD, "idempotencyKey": "k" * 256},
    {**GOOD, "idempotencyKey": ""},
    {**GOOD, "idempotencyKey": "with space"},
    {**GOOD, "idempotencyKey": "line\n"},
    {**GOOD, "idempotencyKey": "é"},
    {**GOOD, "idempotencyKey": 7},
    {**GOOD, "idempotencyKey": None},
    {**GOOD, "colour": "red"},
    {"to": 7, "type": "t"},
    {"type": "t", "payload": 1},
    {},
    [GOOD],
    "text",
    None,
]


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except ValidationError as error:
        return ("400", error.detail)


def sent_or_failed(items: list[Any]) -> list[Any]:
    return [
        (item.status, item.code, item.detail, item.extra)
        if isinstance(item, ApplicationError)
        else item
        for item in items
    ]


def through_serializer(serializer: Any) -> Any:
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@pytest.mark.parametrize("query", QUERIES)
def test_receive_options_match_the_serializer(query: str) -> None:
    params = QueryDict(query)

    expected = outcome(lambda: dict(through_serializer(ReceiveInput(data=params))))

    assert outcome(lambda: receive_options(params)) == expected


def acked_and_received(validated: dict[str, Any]) -> Any:
    receive = validated.get("receive")
    return [str(i) for i in validated["messageIds"]], None if receive is None else dict(receive)


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_ack_input_matches_the_serializer(body: Any) -> None:
    expected = outcome(lambda: acked_and_received(through_serializer(AckInput(data=body))))

    assert outcome(lambda: ack_input(body)) == expected


def test_the_usual_inputs_build_no_serializer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> None:
        raise AssertionError("the usual input went through the serializer")

    monkeypatch.setattr("exchange.api.serializers.ReceiveInput", refuse)
    monkeypatch.setattr("exchange.api.serializers.AckInput", refuse)
    monkeypatch.setattr("exchange.api.serializers.SendInput", refuse)
    monkeypatch.setattr("exchange.api.serializers.SendBatchInput", refuse)
    monkeypatch.setattr("exchange.api.serializers.SendBatchItemInput", refuse)

    assert receive_options(QueryDict("max=10&leaseSeconds=60")) == {
        "max": 10,
        "waitSeconds": 0,
        "leaseSeconds": 60,
    }
    assert ack_input({"messageIds": UUIDS}) == (UUIDS, None)
    assert ack_input({"messageIds": UUIDS, "receive": {"max": 100}}) == (
        UUIDS,
        {"max": 100, "waitSeconds": 0, "leaseSeconds": 30},
    )
    assert send_input({**GOOD, "headers": {"h": "v"}}) == {**GOOD, "headers": {"h": "v"}}
    keyed = {**GOOD, "idempotencyKey": "k-1"}
    [sent] = batch_items({"messages": [keyed]})
    assert sent == Outgoing(
        to=7, type="order.created", payload={"n": 1}, headers={}, idempotency_key="k-1"
    )


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_send_input_matches_the_serializer(message: Any) -> None:
    single = message if not isinstance(message, dict) else dict(message)
    if isinstance(single, dict):
        single.pop("idempotencyKey", None)  # a single send's key is its header

    expected = outcome(lambda: SendInput.validated(single))

    assert outcome(lambda: send_input(single)) == expected


BATCHES: list[Any] = [
    *({"messages": [GOOD, message]} for message in MESSAGES),
    {"messages": [GOOD] * 100},
    {"messages": [GOOD] * 101},
    {"messages": []},
    {"messages": GOOD},
    {"messages": None},
    {"messages": [GOOD], "atomic": True},
    {},
    [GOOD],
]


@pytest.mark.parametrize("body", BATCHES, ids=range(len(BATCHES)))
def test_batch_items_match_the_serializer(body: Any) -> None:
    expected = outcome(lambda: sent_or_failed(batch_items_checked(body)))

    assert outcome(lambda: sent_or_failed(batch_items(body))) == expected
