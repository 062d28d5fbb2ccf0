"""Batch send: POST /api/exchange/messages/batch, up to 100 messages, each sent, a duplicate or
failed on its own, under the single send's rules (docs/adapters.md, "Sending in batches")."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from exchange.models import IdempotencyKey, Message
from exchange.services.sending import Outgoing, Sent, messages_send
from platform_site.errors import ApplicationError
from tests.conftest import ApiClient, LongPolls
from tests.exchange.test_messages_api import ack, receive, send
from tests.factories import AdapterFactory, UserFactory
from tests.live import LiveClient, LiveServer

pytestmark = pytest.mark.django_db

BATCH = "/api/exchange/messages/batch"


def message(to: User | int, n: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "to": to if isinstance(to, int) else to.pk,
        "type": "order.created",
        "payload": {"n": n},
        **extra,
    }


def send_batch(client: ApiClient, *messages: Any, **extra: Any) -> list[dict[str, Any]]:
    response = client.call("post", BATCH, {"messages": list(messages)}, **extra)
    assert response.status_code == 200, response.content
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def statuses(results: list[dict[str, Any]]) -> list[str]:
    return [
        result["error"]["code"] if result["status"] == "failed" else result["status"]
        for result in results
    ]


def test_a_batch_is_sent_in_order_and_received_in_that_order(sender, consumer, adapter, owner):
    other = AdapterFactory.create(owner=owner)
    batch = [message(adapter if n % 3 else other, n) for n in range(1, 31)]

    results = send_batch(sender, *batch)

    assert statuses(results) == ["sent"] * 30
    ids = [result["messageId"] for result in results]
    assert len(set(ids)) == 30
    mine = [ids[n - 1] for n in range(1, 31) if n % 3]
    received = receive(consumer, "?max=100")
    assert [m["messageId"] for m in received] == mine
    assert [m["payload"]["n"] for m in received] == [n for n in range(1, 31) if n % 3]
    assert received[0]["type"] == "order.created"
    assert received[0]["sender"] == User.objects.get(username="crm").pk
    assert Message.objects.filter(recipient=other).count() == 10


def test_one_failed_message_does_not_fail_the_others(sender, adapter, settings):
    settings.EXCHANGE_MAX_PAYLOAD_BYTES = 1024
    stranger = AdapterFactory.create(owner=UserFactory.create())

    results = send_batch(
        sender,
        message(adapter, 1),
        message(stranger, 2),
        {**message(adapter, 3), "payload": "x" * 2000},
        {"to": adapter.pk, "type": "", "payload": {}},
        {**message(adapter, 5), "colour": "red"},
        {**message(adapter, 6), "payload": None},
        {**message(adapter, 7), "to": "seven"},
        message(adapter, 8),
    )

    assert statuses(results) == [
        "sent",
        "SEND_NOT_ALLOWED",
        "PAYLOAD_TOO_LARGE",
        "VALIDATION_FAILED",
        "UNKNOWN_FIELD",
        "VALIDATION_FAILED",
        "VALIDATION_FAILED",
        "sent",
    ]
    assert [result["error"]["status"] for result in results[1:7]] == [403, 413, 400, 400, 400, 400]
    assert results[2]["error"]["detail"] == "The payload is 2002 bytes of JSON; the limit is 1024."
    assert results[3]["error"]["errors"] == {"type": ["This field may not be blank."]}
    assert results[4]["error"]["errors"] == {"colour": ["This field is not accepted."]}
    assert results[5]["error"]["errors"] == {"payload": ["This field may not be null."]}
    assert results[6]["error"]["errors"] == {"to": ["A valid integer is required."]}
    assert set(results[1]["error"]) == {"status", "code", "detail"}
    sent = {results[0]["messageId"], results[7]["messageId"]}
    assert {str(m) for m in Message.objects.values_list("message_id", flat=True)} == sent


def test_a_key_given_twice_in_a_batch_makes_the_second_a_duplicate_of_the_first(sender, adapter):
    results = send_batch(
        sender,
        message(adapter, 1, idempotencyKey="k-1"),
        message(adapter, 2),
        message(adapter, 1, idempotencyKey="k-1"),
        message(adapter, 3, idempotencyKey="k-1"),
    )

    assert statuses(results) == ["sent", "sent", "duplicate", "IDEMPOTENCY_KEY_REUSED"]
    assert results[2]["messageId"] == results[0]["messageId"]
    assert results[3]["error"]["status"] == 409
    assert Message.objects.count() == 2


def test_batch_keys_and_the_single_sends_header_share_one_namespace(sender, adapter):
    single = send(sender, adapter, {"n": 1}, HTTP_IDEMPOTENCY_KEY="shared")
    assert single.status_code == 201

    results = send_batch(
        sender,
        message(adapter, 1, idempotencyKey="shared"),
        message(adapter, 2, idempotencyKey="shared-2"),
        message(adapter, 1, idempotencyKey="shared"),
    )
    replay = send(sender, adapter, {"n": 2}, HTTP_IDEMPOTENCY_KEY="shared-2")

    assert statuses(results) == ["duplicate", "sent", "duplicate"]
    assert results[0]["messageId"] == single.json()["messageId"]
    # The third names the key's first message in the batch, which was itself a duplicate.
    assert results[2]["messageId"] == single.json()["messageId"]
    assert (replay.status_code, replay.json()) == (
        200,
        {"messageId": results[1]["messageId"], "duplicate": True},
    )
    again = send_batch(sender, message(adapter, 3, idempotencyKey="shared"))
    assert statuses(again) == ["IDEMPOTENCY_KEY_REUSED"]
    assert Message.objects.count() == 2


def test_a_key_stays_a_duplicate_after_its_message_was_acknowledged(sender, consumer, adapter):
    [first] = send_batch(sender, message(adapter, idempotencyKey="once"))
    [delivered] = receive(consumer)
    assert ack(consumer, delivered["messageId"]) == {first["messageId"]: "acked"}

    [again] = send_batch(sender, message(adapter, idempotencyKey="once"))

    assert again == {"status": "duplicate", "messageId": first["messageId"]}
    assert receive(consumer) == []


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"messages": []}, {"messages": ["This list may not be empty."]}),
        ({"messages": "all"}, {"messages": ['Expected a list of items but got type "str".']}),
        (
            {"messages": [{"to": 1, "type": "t", "payload": 1}] * 101},
            {"messages": ["Ensure this field has no more than 100 elements."]},
        ),
        ({"messages": {"to": 1}}, {"messages": ['Expected a list of items but got type "dict".']}),
        ({"messages": None}, {"messages": ["This field may not be null."]}),
        ({}, {"messages": ["This field is required."]}),
    ],
)
def test_a_body_that_is_not_a_batch_of_1_to_100_is_one_400(sender, body, errors):
    response = sender.call("post", BATCH, body)

    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_FAILED"
    assert response.json()["errors"] == errors
    assert Message.objects.count() == 0


def test_a_field_beside_messages_is_refused(sender, adapter):
    response = sender.call("post", BATCH, {"messages": [message(adapter)], "atomic": True})

    assert (response.status_code, response.json()["code"]) == (400, "UNKNOWN_FIELD")
    assert Message.objects.count() == 0


def test_an_invalid_idempotency_key_fails_its_item(sender, adapter):
    results = send_batch(
        sender,
        message(adapter, idempotencyKey="with space"),
        message(adapter, idempotencyKey="k" * 256),
        message(adapter, idempotencyKey=""),
        message(adapter, idempotencyKey=7),
    )

    assert statuses(results) == ["VALIDATION_FAILED"] * 4
    assert results[0]["error"]["errors"] == {
        "idempotencyKey": ["1 to 255 printable ASCII characters."]
    }
    assert Message.objects.count() == 0


def test_the_queue_bound_refuses_per_message_and_frees_their_keys(sender, adapter, owner, settings):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 3
    other = AdapterFactory.create(owner=owner)
    batch = [message(adapter, n, idempotencyKey=f"k-{n}") for n in range(5)]

    results = send_batch(sender, *batch, message(other, 9))

    assert statuses(results) == ["sent"] * 3 + ["QUEUE_FULL"] * 2 + ["sent"]
    assert results[3]["error"] == {
        "status": 429,
        "code": "QUEUE_FULL",
        "detail": "The recipient's queue is full; retry once it has taken messages off it.",
        "retryAfterSeconds": 5,
    }
    # A refused message's key was not kept: with room again, the same key sends it anew.
    assert not IdempotencyKey.objects.filter(key__in=["k-3", "k-4"]).exists()
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 10
    assert statuses(send_batch(sender, batch[3], batch[0])) == ["sent", "duplicate"]


def test_each_message_counts_once_against_the_rate_limit(sender, adapter, settings):
    settings.EXCHANGE_RATE_LIMIT = "5/m"

    with time_machine.travel(datetime.now(UTC), tick=False):  # no window ends between the calls
        response = sender.call("post", BATCH, {"messages": [message(adapter, n) for n in range(7)]})
        after = sender.call("get", "/api/exchange/whoami")

    assert response.status_code == 200
    results = response.json()["results"]
    assert statuses(results) == ["sent"] * 5 + ["RATE_LIMITED"] * 2
    assert results[5]["error"]["retryAfterSeconds"] > 0
    assert (response["X-Rate-Limit-Limit"], response["X-Rate-Limit-Remaining"]) == ("5", "0")
    assert Message.objects.count() == 5
    assert after.status_code == 429


def test_without_redis_each_message_counts_once_as_well(sessions_in_postgres, adapter, settings):
    settings.EXCHANGE_RATE_LIMIT = "4/m"
    AdapterFactory.create(username="crm", owner=adapter.owner)
    client = ApiClient(device_id="crm-1")
    assert client.sign_in("crm").status_code == 200

    with time_machine.travel(datetime.now(UTC), tick=False):
        first = send_batch(client, message(adapter, 1), message(adapter, 2))
        second = client.call(
            "post",
            BATCH,
            {"messages": [message(adapter, 3), message(adapter, 4), message(adapter, 5)]},
        )

    assert statuses(first) == ["sent", "sent"]
    assert statuses(second.json()["results"]) == ["sent", "sent", "RATE_LIMITED"]
    assert second["X-Rate-Limit-Remaining"] == "0"


def test_the_batch_has_a_body_limit_of_its_own(sender, adapter, settings):
    settings.HTTP_MAX_BODY_BYTES = 2048
    settings.EXCHANGE_BATCH_MAX_BODY_BYTES = 8192
    settings.EXCHANGE_MAX_PAYLOAD_BYTES = 2048
    batch = [{**message(adapter, n), "payload": "x" * 1000} for n in range(5)]

    assert statuses(send_batch(sender, *batch)) == ["sent"] * 5
    too_big = sender.call("post", BATCH, {"messages": batch * 2})
    single = send(sender, adapter, "x" * 3000)

    assert (too_big.status_code, too_big.json()["code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert (single.status_code, single.json()["code"]) == (413, "PAYLOAD_TOO_LARGE")


def statements(client: ApiClient, *messages: Any) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        results = send_batch(client, *messages)
    assert all(
        result["status"] != "failed" or result["error"]["status"] != 500 for result in results
    )
    return [query["sql"] for query in captured.captured_queries]


def test_a_batch_costs_the_same_statements_whatever_its_size(sessions_in_postgres, owner, settings):
    """Every step with its worst case: keys known and new, refusals that free keys, queues not
    counted lately, and many recipients."""
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 2
    sender_adapter = AdapterFactory.create(username="crm", owner=owner)
    client = ApiClient(device_id="crm-1")
    assert client.sign_in("crm").status_code == 200
    recipients = AdapterFactory.create_batch(25, owner=owner)
    for key in ("known-0", "known-1"):
        IdempotencyKey.objects.create(
            sender=sender_adapter, key=key, message_id=uuid.uuid4(), body_hash="0" * 64
        )

    def batch(size: int, spread: int) -> list[dict[str, Any]]:
        return [
            message(
                recipients[n % spread], n, idempotencyKey=f"{size}-{n}" if n > 1 else f"known-{n}"
            )
            for n in range(size)
        ]

    small = statements(client, *batch(6, 1))
    large = statements(client, *batch(100, 25))

    # The session, the routes, the depths of queues not counted lately, the keys of messages a
    # full queue refused, the send (keys claimed, rows inserted, long polls notified), the keys
    # it found claimed before; the messages their places were given back to, sent again; the
    # refusals, counted in the sender's traffic.
    assert len(large) == len(small) <= 9, "\n".join(large)
    assert not any(sql.startswith(("BEGIN", "SAVEPOINT")) for sql in large)
    # Two keys known in each; two places in each queue (the first queue's taken by the first).
    assert Message.objects.count() == 2 + 48


def test_one_batch_wakes_the_long_polls_of_every_recipient(
    live_server: LiveServer, long_polls: LongPolls
):
    owner = UserFactory.create()
    first, second = AdapterFactory.create_batch(2, owner=owner)
    producer = AdapterFactory.create(owner=owner)
    answers: dict[int, Any] = {}

    def poll(adapter: User) -> None:
        client = LiveClient(live_server, device_id=f"lp-{adapter.pk}")
        assert client.sign_in(adapter.username).status_code == 200
        answers[adapter.pk] = client.call("get", "/api/exchange/messages?waitSeconds=20")
        client.close()

    threads = [threading.Thread(target=poll, args=(adapter,)) for adapter in (first, second)]
    for thread in threads:
        thread.start()
    long_polls.waiting(2)

    outcomes = messages_send(
        sender=producer,
        messages=[
            Outgoing(to=first.pk, type="t", payload=1, headers={}),
            Outgoing(to=second.pk, type="t", payload=2, headers={}),
        ],
    )
    for thread in threads:
        thread.join(timeout=25)

    # Every wait ended by a notification (or the listener's start): none ran its 20 s out,
    # after which the poll would have found the message all the same.
    assert len(long_polls.woken) >= 2
    assert all(long_polls.woken.values()), long_polls.woken
    assert all(isinstance(outcome, Sent) for outcome in outcomes)
    assert [m["payload"] for m in answers[first.pk].json()["messages"]] == [1]
    assert [m["payload"] for m in answers[second.pk].json()["messages"]] == [2]


def test_parallel_batches_with_the_same_keys_send_each_message_once(transactional_db):
    owner = UserFactory.create()
    producer, recipient = AdapterFactory.create_batch(2, owner=owner)
    keys = [f"order-{n}" for n in range(40)]
    results: dict[int, list[Sent | ApplicationError]] = {}
    start = threading.Barrier(4)

    def send_all(number: int, order: list[str]) -> None:
        start.wait()
        try:
            outcomes = messages_send(
                sender=producer,
                messages=[
                    Outgoing(
                        to=recipient.pk, type="t", payload=key, headers={}, idempotency_key=key
                    )
                    for key in order
                ],
            )
            results[number] = outcomes
        finally:
            connections.close_all()

    # Two in the keys' order, two in reverse: claimed in one order, they cannot deadlock.
    orders = [keys, keys[::-1], keys, keys[::-1]]
    threads = [
        threading.Thread(target=send_all, args=(number, order))
        for number, order in enumerate(orders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(results) == [0, 1, 2, 3]
    sent = [
        (key, outcome)
        for number, order in enumerate(orders)
        for key, outcome in zip(order, results[number], strict=True)
        if isinstance(outcome, Sent)
    ]
    assert len(sent) == 4 * 40  # every one a message or a duplicate of one
    assert all(len({o.message_id for k, o in sent if k == key}) == 1 for key in keys)
    assert sum(not outcome.duplicate for _, outcome in sent) == 40
    assert Message.objects.count() == 40


def test_a_batch_of_3_mib_within_the_batch_body_limit_is_sent(sender, adapter, settings):
    """The defaults: a batch's body may pass HTTP_MAX_BODY_BYTES (1 MiB) up to
    EXCHANGE_BATCH_MAX_BODY_BYTES (4 MiB), whatever Django's own upload limit says."""
    assert settings.EXCHANGE_BATCH_MAX_BODY_BYTES == 4 * 1024 * 1024
    assert settings.HTTP_MAX_BODY_BYTES == 1024 * 1024
    payload = "x" * (32 * 1024)
    batch = [{**message(adapter, n), "payload": payload} for n in range(100)]

    body = json.dumps({"messages": batch})
    assert 3 * 1024 * 1024 < len(body) < 4 * 1024 * 1024

    response = sender.call_text("post", BATCH, body)

    assert response.status_code == 200, response.content
    assert statuses(response.json()["results"]) == ["sent"] * 100
    assert Message.objects.filter(recipient=adapter).count() == 100


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+309", "[1e999]", '{"a": 2e308}'])
def test_a_number_beyond_a_double_fails_its_item_alone(sender, adapter, number):
    body = (
        '{"messages": ['
        f'{{"to": {adapter.pk}, "type": "t", "payload": 1}},'
        f'{{"to": {adapter.pk}, "type": "t", "payload": {number}}},'
        f'{{"to": {adapter.pk}, "type": "t", "payload": 3, "idempotencyKey": "k"}},'
        f'{{"to": {adapter.pk}, "type": "t", "payload": {number}, "idempotencyKey": "k2"}},'
        f'{{"to": {number}, "type": "t", "payload": 5}}'
        "]}"
    )

    response = sender.call_text("post", BATCH, body)

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    failed = "VALIDATION_FAILED"
    assert statuses(results) == ["sent", failed, "sent", failed, failed]
    assert list(results[1]["error"]["errors"]) == ["payload"]
    assert list(results[3]["error"]["errors"]) == ["payload"]
    assert results[4]["error"]["errors"] == {"to": ["A valid integer is required."]}
    assert Message.objects.count() == 2
    assert not IdempotencyKey.objects.filter(key="k2").exists()


@pytest.mark.parametrize(
    ("item", "position"),
    [("not a message", 1), (7, 0), ([], 1), (None, 1)],
)
def test_a_batch_whose_messages_are_not_all_objects_is_one_400(sender, adapter, item, position):
    batch = [message(adapter, 1), message(adapter, 2)]
    batch[position] = item

    response = sender.call("post", BATCH, {"messages": batch})

    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == [f"messages[{position}]"]
    assert Message.objects.count() == 0
