"""receive_options and ack_ids answer exactly as ReceiveInput and AckInput: same data, same errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.http import QueryDict
from rest_framework.exceptions import ValidationError

from exchange.api.serializers import AckInput, ReceiveInput, ack_ids, receive_options

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
    {},
    [UUIDS[0]],
    "text",
    None,
]


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except ValidationError as error:
        return ("400", error.detail)


def through_serializer(serializer: Any) -> Any:
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@pytest.mark.parametrize("query", QUERIES)
def test_receive_options_match_the_serializer(query: str) -> None:
    params = QueryDict(query)

    expected = outcome(lambda: dict(through_serializer(ReceiveInput(data=params))))

    assert outcome(lambda: receive_options(params)) == expected


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_ack_ids_match_the_serializer(body: Any) -> None:
    expected = outcome(
        lambda: [str(i) for i in through_serializer(AckInput(data=body))["messageIds"]]
    )

    assert outcome(lambda: ack_ids(body)) == expected


def test_the_usual_inputs_build_no_serializer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(**kwargs: Any) -> None:
        raise AssertionError("the usual input went through the serializer")

    monkeypatch.setattr("exchange.api.serializers.ReceiveInput", refuse)
    monkeypatch.setattr("exchange.api.serializers.AckInput", refuse)

    assert receive_options(QueryDict("max=10&leaseSeconds=60")) == {
        "max": 10,
        "waitSeconds": 0,
        "leaseSeconds": 60,
    }
    assert ack_ids({"messageIds": UUIDS}) == UUIDS
