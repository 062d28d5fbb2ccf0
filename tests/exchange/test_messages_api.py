"""The exchange API: send, receive, ACK, nack, lease, stats, between adapters that may talk."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.db import connection

from accounts.models import User
from exchange.models import DeadLetter, DeliveryLog, Message, Route
from exchange.services.dead_letters import dead_letters_redrive
from tests.conftest import ApiClient
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


def send(client: ApiClient, to: User | int, payload: Any = None, **extra: Any) -> Any:
    body = {
        "to": to if isinstance(to, int) else to.pk,
        "type": "order.created",
        "payload": payload or {"n": 1},
    }
    return client.call("post", "/api/exchange/messages", body, **extra)


def receive(client: ApiClient, query: str = "", **extra: Any) -> Any:
    response = client.call("get", f"/api/exchange/messages{query}", **extra)
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def ack(client: ApiClient, *ids: str) -> dict[str, str]:
    response = client.call("post", "/api/exchange/messages/ack", {"messageIds": list(ids)})
    assert response.status_code == 200, response.content
    return {item["messageId"]: item["status"] for item in response.json()["results"]}


def expire_leases() -> None:
    """The database's clock decides leases: move every lease into the past instead of waiting."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE exchange_message SET visible_at = now() - interval '1 second'")


def test_a_message_goes_from_sender_to_recipient_and_leaves_the_queue_when_acked(
    consumer, sender, adapter
):
    sent = send(
        sender,
        adapter,
        {"order": 42, "lines": ["a", "b"], "note": "привет"},
        HTTP_IDEMPOTENCY_KEY="o-42",
    )
    [message] = receive(consumer)
    results = ack(consumer, message["messageId"])

    assert sent.status_code == 201
    assert message["messageId"] == sent.json()["messageId"]
    assert message["payload"] == {"order": 42, "lines": ["a", "b"], "note": "привет"}
    assert (message["type"], message["headers"], message["sender"]) == (
        "order.created",
        {},
        sender.sign_in and User.objects.get(username="crm").pk,
    )
    assert (message["deliveryCount"], message["redelivered"]) == (1, False)
    assert message["enqueuedAt"].endswith("Z")
    assert message["leaseExpiresAt"].endswith("Z")
    assert results == {message["messageId"]: "acked"}
    assert Message.objects.count() == 0
    assert DeliveryLog.objects.filter(message_id=message["messageId"]).count() == 1
    assert receive(consumer) == []


def test_a_delivery_is_written_out_compactly_like_every_other_answer(consumer, sender, adapter):
    send(sender, adapter, {"n": 1})
    send(sender, adapter, {"n": 2})
    expire_leases_of = receive(consumer, "?max=1")  # the first, delivered once already
    expire_leases()

    response = consumer.call("get", "/api/exchange/messages?max=2")

    body = response.content.decode()
    first, second = response.json()["messages"]
    assert first["messageId"] == expire_leases_of[0]["messageId"]
    assert (first["redelivered"], second["redelivered"]) == (True, False)
    assert first["sender"] == User.objects.get(username="crm").pk
    envelope = json.dumps(
        {**second, "headers": "H", "payload": "P"}, separators=(",", ":"), ensure_ascii=False
    )
    rendered = envelope.replace('"H"', "{}").replace('"P"', '{"n": 2}')
    assert body.endswith(rendered + "]}")
    assert " : " not in body


def test_received_headers_and_payload_are_the_json_that_was_sent(consumer, sender, adapter):
    payload = [1, 2.5, None, True, {"deep": {"er": ["x"]}}, "\u00e9\u4e2d"]
    sender.call(
        "post",
        "/api/exchange/messages",
        {
            "to": adapter.pk,
            "type": 'quote"type',
            "payload": payload,
            "headers": {"trace": "abc", "x": ""},
        },
    )

    [message] = receive(consumer)

    assert (message["payload"], message["headers"], message["type"]) == (
        payload,
        {"trace": "abc", "x": ""},
        'quote"type',
    )


def test_an_idempotency_key_replay_returns_the_first_message_even_after_delivery(
    consumer, sender, adapter
):
    first = send(sender, adapter, {"n": 1}, HTTP_IDEMPOTENCY_KEY="key-1")
    [message] = receive(consumer)
    ack(consumer, message["messageId"])

    replay = send(sender, adapter, {"n": 1}, HTTP_IDEMPOTENCY_KEY="key-1")

    assert replay.status_code == 200
    assert replay.json() == {"messageId": first.json()["messageId"], "duplicate": True}
    assert Message.objects.count() == 0


def test_an_idempotency_key_reused_for_another_message_is_409(sender, adapter):
    send(sender, adapter, {"n": 1}, HTTP_IDEMPOTENCY_KEY="key-1")

    response = send(sender, adapter, {"n": 2}, HTTP_IDEMPOTENCY_KEY="key-1")

    assert (response.status_code, response.json()["code"]) == (409, "IDEMPOTENCY_KEY_REUSED")


def test_without_an_idempotency_key_every_send_is_a_new_message(sender, adapter):
    send(sender, adapter)
    send(sender, adapter)

    assert Message.objects.count() == 2


def test_adapters_of_another_owner_need_a_route_granted_by_the_recipients_owner(consumer, adapter):
    stranger_owner = UserFactory.create(username="stranger", email="stranger@example.com")
    stranger = AdapterFactory.create(username="foreign", owner=stranger_owner)
    client = ApiClient(device_id="f-1")
    client.sign_in("foreign")

    refused = send(client, adapter)
    Route.objects.create(recipient=adapter, sender=stranger, granted_by=adapter.owner)
    allowed = send(client, adapter)
    back = send(consumer, stranger)  # a route is one-way

    assert (refused.status_code, refused.json()["code"]) == (403, "SEND_NOT_ALLOWED")
    assert allowed.status_code == 201
    assert (back.status_code, back.json()["code"]) == (403, "SEND_NOT_ALLOWED")


@pytest.mark.parametrize("to", [999_999, "owner"])
def test_unknown_recipients_and_cabinet_users_get_the_same_403(sender, owner, to):
    response = send(sender, owner if to == "owner" else to)

    assert (response.status_code, response.json()["code"]) == (403, "SEND_NOT_ALLOWED")


def test_a_payload_above_the_limit_is_413(sender, adapter, settings):
    settings.EXCHANGE_MAX_PAYLOAD_BYTES = 1024

    response = send(sender, adapter, {"blob": "x" * 1100})

    assert (response.status_code, response.json()["code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": 1, "type": "t"}, "payload"),
        ({"to": 1, "type": "t", "payload": None}, "payload"),
        ({"to": 1, "payload": {}}, "type"),
        ({"to": "one", "type": "t", "payload": {}}, "to"),
        ({"to": 1, "type": "t" * 129, "payload": {}}, "type"),
        (
            {"to": 1, "type": "t", "payload": {}, "headers": {"k": 1, "n": {"nested": 1}}},
            "headers.n",
        ),
        (
            {"to": 1, "type": "t", "payload": {}, "headers": {f"h{i}": "v" for i in range(33)}},
            "headers",
        ),
    ],
)
def test_invalid_sends_name_the_field(sender, body, field):
    response = sender.call("post", "/api/exchange/messages", body)

    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert field in response.json()["errors"]


def test_unknown_fields_in_a_send_are_refused(sender, adapter):
    response = sender.call(
        "post",
        "/api/exchange/messages",
        {"to": adapter.pk, "type": "t", "payload": {}, "recipient": 1},
    )

    assert (response.status_code, response.json()["code"]) == (400, "UNKNOWN_FIELD")


def test_a_malformed_idempotency_key_is_400(sender, adapter):
    response = send(sender, adapter, HTTP_IDEMPOTENCY_KEY="has space")

    assert response.json()["errors"] == {
        "Idempotency-Key": ["1 to 255 printable ASCII characters."]
    }


def test_receive_is_approximately_fifo_and_honours_max(consumer, sender, adapter):
    ids = [send(sender, adapter, {"n": n}).json()["messageId"] for n in range(5)]

    first = receive(consumer, "?max=3")
    everything = receive(consumer, "?max=100")

    assert [m["messageId"] for m in first] == ids[:3]
    # The three unacknowledged ones come back to this instance, in their places in the queue.
    assert [m["messageId"] for m in everything] == ids
    assert [m["redelivered"] for m in everything] == [True, True, True, False, False]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?max=0", "max"),
        ("?max=101", "max"),
        ("?waitSeconds=21", "waitSeconds"),
        ("?leaseSeconds=0", "leaseSeconds"),
        ("?max=lots", "max"),
        ("?leaseSeconds=", "leaseSeconds"),
        ("?max=&waitSeconds=1", "max"),
        ("?waitSeconds=", "waitSeconds"),
    ],
)
def test_receive_parameters_are_validated(consumer, query, field):
    response = consumer.call("get", f"/api/exchange/messages{query}")

    assert (response.status_code, list(response.json()["errors"])) == (400, [field])


def test_an_unknown_receive_parameter_is_refused(consumer):
    assert consumer.call("get", "/api/exchange/messages?limit=5").json()["code"] == "UNKNOWN_FIELD"


def test_an_unacknowledged_message_comes_back_on_the_next_receive_of_the_same_instance(
    consumer, sender, adapter
):
    send(sender, adapter)
    [first] = receive(consumer)

    [again] = receive(consumer)

    assert again["messageId"] == first["messageId"]
    assert (again["deliveryCount"], again["redelivered"]) == (2, True)
    assert again["receiptHandle"] != first["receiptHandle"]


def test_another_instance_waits_for_the_lease_to_run_out(consumer, sender, adapter):
    send(sender, adapter)
    [held] = receive(consumer)
    other = ApiClient(device_id="consumer-2")
    other.sign_in("erp")

    assert receive(other) == []
    expire_leases()
    [taken_over] = receive(other)
    assert taken_over["messageId"] == held["messageId"]
    assert taken_over["redelivered"] is True
    assert ack(consumer, held["messageId"]) == {
        held["messageId"]: "acked"
    }  # ACK outlives the lease


def test_redelivered_messages_keep_their_place_in_the_queue(consumer, sender, adapter):
    first = send(sender, adapter, {"n": 1}).json()["messageId"]
    [held] = receive(consumer)
    second = send(sender, adapter, {"n": 2}).json()["messageId"]

    batch = receive(consumer, "?max=10")

    assert held["messageId"] == first
    assert [m["messageId"] for m in batch] == [first, second]


def test_after_max_deliveries_a_message_moves_to_the_dead_letters(
    consumer, sender, adapter, settings
):
    settings.EXCHANGE_MAX_DELIVERIES = 3
    message_id = send(sender, adapter).json()["messageId"]
    counts = [receive(consumer)[0]["deliveryCount"] for _ in range(3)]

    fourth = receive(consumer)

    assert counts == [1, 2, 3]
    assert fourth == []
    assert Message.objects.count() == 0
    dead = DeadLetter.objects.get()
    assert (str(dead.message_id), dead.receive_count, dead.reason, dead.last_device) == (
        message_id,
        3,
        "MAX_DELIVERIES",
        "d:consumer-1",
    )
    assert ack(consumer, message_id) == {message_id: "deadLettered"}
    assert consumer.call("get", "/api/exchange/stats").json()["deadLettered"] == 1


def test_the_owner_redrives_a_dead_letter_with_a_fresh_budget_and_the_same_id(
    consumer, sender, adapter, owner, settings
):
    settings.EXCHANGE_MAX_DELIVERIES = 1
    message_id = send(sender, adapter).json()["messageId"]
    receive(consumer)
    receive(consumer)

    revived = dead_letters_redrive(owner=owner, message_ids=[uuid.UUID(message_id)])
    [again] = receive(consumer)

    assert [str(r) for r in revived] == [message_id]
    assert (again["messageId"], again["deliveryCount"]) == (message_id, 1)
    assert DeadLetter.objects.count() == 0


def test_nobody_else_redrives_an_owners_dead_letters(consumer, sender, adapter, settings):
    settings.EXCHANGE_MAX_DELIVERIES = 1
    message_id = send(sender, adapter).json()["messageId"]
    receive(consumer)
    receive(consumer)

    stranger = UserFactory.create(username="s", email="s@example.com")
    assert dead_letters_redrive(owner=stranger, message_ids=[uuid.UUID(message_id)]) == []
    assert DeadLetter.objects.count() == 1


def test_ack_is_idempotent_with_a_status_per_message(consumer, sender, adapter):
    one, two = (send(sender, adapter).json()["messageId"] for _ in range(2))
    receive(consumer, "?max=2")
    unknown = str(uuid.uuid4())

    first = ack(consumer, one, one, unknown)
    second = ack(consumer, one, two)

    assert first == {one: "acked", unknown: "notFound"}
    assert second == {one: "alreadyAcked", two: "acked"}


def test_ack_of_one_message_is_200_then_200_already_acked_then_404_for_others(
    consumer, sender, adapter
):
    message_id = send(sender, adapter).json()["messageId"]
    receive(consumer)

    first = consumer.call("post", f"/api/exchange/messages/{message_id}/ack")
    again = consumer.call("post", f"/api/exchange/messages/{message_id}/ack")
    unknown = consumer.call("post", f"/api/exchange/messages/{uuid.uuid4()}/ack")

    assert (first.status_code, first.json()) == (200, {"messageId": message_id, "status": "acked"})
    assert (again.status_code, again.json()["status"]) == (200, "alreadyAcked")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "MESSAGE_NOT_FOUND")


def test_an_adapter_never_sees_or_acks_another_adapters_messages(consumer, sender, adapter, owner):
    AdapterFactory.create(username="other", owner=owner)
    other = ApiClient(device_id="o-1")
    other.sign_in("other")
    mine = send(sender, adapter).json()["messageId"]
    theirs = send(sender, User.objects.get(username="other")).json()["messageId"]

    assert [m["messageId"] for m in receive(consumer, "?max=10")] == [mine]
    assert ack(consumer, theirs) == {theirs: "notFound"}
    assert consumer.call("post", f"/api/exchange/messages/{theirs}/ack").status_code == 404
    assert [m["messageId"] for m in receive(other)] == [theirs]


def test_ack_validates_its_ids(consumer):
    response = consumer.call("post", "/api/exchange/messages/ack", {"messageIds": ["not-a-uuid"]})

    assert response.json()["errors"] == {"messageIds[0]": ["Must be a valid UUID."]}
    empty = consumer.call("post", "/api/exchange/messages/ack", {"messageIds": []})
    assert empty.json()["errors"] == {"messageIds": ["Ensure this field has at least 1 element."]}


def ack_then_receive(client: ApiClient, ids: list[str], **options: Any) -> Any:
    body = {"messageIds": ids, "receive": options}
    return client.call("post", "/api/exchange/messages/ack", body)


def test_an_ack_that_receives_acks_first_then_answers_the_next_messages(consumer, sender, adapter):
    sent = [send(sender, adapter, {"n": n}).json()["messageId"] for n in range(5)]
    first = receive(consumer, "?max=2")

    response = ack_then_receive(consumer, [m["messageId"] for m in first], max=2)
    following = response.json()["messages"]

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json()["results"] == [
        {"messageId": sent[0], "status": "acked"},
        {"messageId": sent[1], "status": "acked"},
    ]
    assert [m["messageId"] for m in following] == sent[2:4]
    assert [m["payload"] for m in following] == [{"n": 2}, {"n": 3}]
    # The same deliveries a receive answers: every field, rendered the same way.
    assert following[0].keys() == first[0].keys()
    assert (following[0]["deliveryCount"], following[0]["redelivered"]) == (1, False)
    assert DeliveryLog.objects.filter(message_id__in=sent[:2]).count() == 2
    assert Message.objects.count() == 3


def test_an_ack_that_receives_gets_back_what_the_instance_holds_and_did_not_ack(
    consumer, sender, adapter
):
    sent = [send(sender, adapter).json()["messageId"] for _ in range(4)]
    receive(consumer, "?max=3")

    response = ack_then_receive(consumer, [sent[0]], max=3)

    # The ACK ran before the claim: the acked message is not among the held ones given back.
    following = response.json()["messages"]
    assert [m["messageId"] for m in following] == sent[1:4]
    assert [m["redelivered"] for m in following] == [True, True, False]


def test_an_ack_that_receives_takes_the_receives_defaults_and_an_empty_queue(
    consumer, sender, adapter
):
    one, two = (send(sender, adapter).json()["messageId"] for _ in range(2))
    [first] = receive(consumer)

    response = ack_then_receive(consumer, [first["messageId"]])  # receive: {}
    last = ack_then_receive(consumer, [two])

    assert [m["messageId"] for m in response.json()["messages"]] == [two]
    assert response.json()["messages"][0]["leaseExpiresAt"].endswith("Z")
    assert last.json() == {"results": [{"messageId": two, "status": "acked"}], "messages": []}
    assert one == first["messageId"]


@pytest.mark.parametrize(
    ("receive_member", "errors"),
    [
        ({"max": 101}, {"receive.max": ["Ensure this value is less than or equal to 100."]}),
        ({"max": "5"}, {"receive.max": ["A valid integer is required."]}),
        (
            {"waitSeconds": 21},
            {"receive.waitSeconds": ["Ensure this value is less than or equal to 20."]},
        ),
        ({"colour": "red"}, {"receive.colour": ["This field is not accepted."]}),
        (None, {"receive": ["This field may not be null."]}),
        ([10], {"receive.nonFieldErrors": ["Invalid data. Expected a dictionary, but got list."]}),
    ],
)
def test_an_ack_whose_receive_is_invalid_is_400_and_acks_nothing(
    consumer, sender, adapter, receive_member, errors
):
    message_id = send(sender, adapter).json()["messageId"]
    receive(consumer)

    response = consumer.call(
        "post",
        "/api/exchange/messages/ack",
        {"messageIds": [message_id], "receive": receive_member},
    )

    assert (response.status_code, response.json()["errors"]) == (400, errors)
    assert Message.objects.filter(message_id=message_id).exists()


def nack(client: ApiClient, handles: list[str], **body: Any) -> Any:
    return client.call("post", "/api/exchange/messages/nack", {"receiptHandles": handles, **body})


def test_nack_releases_a_message_to_other_instances_at_once(consumer, sender, adapter):
    send(sender, adapter)
    [held] = receive(consumer)
    other = ApiClient(device_id="consumer-2")
    other.sign_in("erp")

    response = nack(consumer, [held["receiptHandle"]])

    assert response.json() == {"results": [{"messageId": held["messageId"], "status": "released"}]}
    assert [m["messageId"] for m in receive(other)] == [held["messageId"]]


def test_nack_with_a_delay_hides_the_message_until_then(consumer, sender, adapter):
    send(sender, adapter)
    [held] = receive(consumer)

    nack(consumer, [held["receiptHandle"]], delaySeconds=60)

    assert receive(consumer) == []
    stats = consumer.call("get", "/api/exchange/stats").json()
    assert (stats["delayed"], stats["available"], stats["inFlight"]) == (1, 0, 0)


def test_a_stale_receipt_cannot_release_the_new_holders_lease(consumer, sender, adapter):
    send(sender, adapter)
    [first] = receive(consumer)
    [second] = receive(consumer)  # redelivered: a new receipt

    stale = nack(consumer, [first["receiptHandle"]]).json()["results"]
    current = nack(consumer, [second["receiptHandle"]]).json()["results"]

    assert stale == [{"messageId": first["messageId"], "status": "leaseLost"}]
    assert current == [{"messageId": first["messageId"], "status": "released"}]


def test_nack_of_an_acked_message_is_not_found_and_of_garbage_is_400(consumer, sender, adapter):
    send(sender, adapter)
    [held] = receive(consumer)
    ack(consumer, held["messageId"])

    assert nack(consumer, [held["receiptHandle"]]).json()["results"][0]["status"] == "notFound"
    handle = held["receiptHandle"]
    # Base64 decoding skips what is not of its alphabet: the handle is read strictly instead.
    garbage = nack(consumer, ["!!", "abc", handle[:20] + "!" + handle[20:], handle + "="])
    assert garbage.json()["errors"] == {
        f"receiptHandles[{index}]": ["Not a receipt handle of this server."] for index in range(4)
    }


def test_a_lease_is_extended_while_it_is_held(consumer, sender, adapter):
    send(sender, adapter)
    [held] = receive(consumer, "?leaseSeconds=5")

    with time_machine.travel(datetime.now(UTC)):
        response = consumer.call(
            "post",
            "/api/exchange/messages/lease",
            {"receiptHandles": [held["receiptHandle"]], "leaseSeconds": 600},
        )

    [result] = response.json()["results"]
    assert (result["messageId"], result["status"]) == (held["messageId"], "extended")
    assert result["leaseExpiresAt"] > held["leaseExpiresAt"]
    [redelivered] = receive(consumer)  # a later receive of the holder takes it back all the same
    stale = consumer.call(
        "post",
        "/api/exchange/messages/lease",
        {"receiptHandles": [held["receiptHandle"]], "leaseSeconds": 60},
    )
    assert stale.json()["results"] == [
        {"messageId": redelivered["messageId"], "status": "leaseLost"}
    ]


def test_stats_count_the_queue_by_state(consumer, sender, adapter):
    for _ in range(3):
        send(sender, adapter)
    receive(consumer)

    stats = consumer.call("get", "/api/exchange/stats").json()

    assert (stats["available"], stats["inFlight"], stats["delayed"], stats["deadLettered"]) == (
        2,
        1,
        0,
        0,
    )
    assert isinstance(stats["oldestAgeSeconds"], int)


def test_exchange_responses_carry_the_rate_limit_headers_and_429_past_the_limit(consumer, settings):
    settings.EXCHANGE_RATE_LIMIT = "2/m"

    with time_machine.travel(datetime.now(UTC), tick=False):  # no window ends between the calls
        responses = [consumer.call("get", "/api/exchange/whoami") for _ in range(3)]

    assert [r.status_code for r in responses] == [200, 200, 429]
    assert (responses[0]["X-Rate-Limit-Limit"], responses[0]["X-Rate-Limit-Remaining"]) == (
        "2",
        "1",
    )
    assert responses[2].json()["code"] == "RATE_LIMITED"
    assert int(responses[2]["Retry-After"]) > 0


def test_the_rate_limit_is_per_adapter(consumer, sender, settings):
    settings.EXCHANGE_RATE_LIMIT = "1/m"

    assert consumer.call("get", "/api/exchange/whoami").status_code == 200
    assert sender.call("get", "/api/exchange/whoami").status_code == 200


def test_receive_costs_two_queries_and_ack_two(
    sessions_in_postgres, consumer, sender, adapter, django_assert_num_queries
):
    for _ in range(3):
        send(sender, adapter)

    with django_assert_num_queries(2):  # the session, the claim
        messages = receive(consumer, "?max=3")
    with django_assert_num_queries(2):  # the session, the ACK
        ack(consumer, *(m["messageId"] for m in messages))


def test_with_redis_receive_and_ack_cost_one_query_each_once_the_session_is_remembered(
    sessions_remembered, consumer, sender, adapter, django_assert_num_queries
):
    for _ in range(3):
        send(sender, adapter)
    with django_assert_num_queries(1):  # the session
        assert consumer.call("get", "/api/exchange/whoami").status_code == 200

    with django_assert_num_queries(1):  # the claim
        messages = receive(consumer, "?max=3")
    with django_assert_num_queries(1):  # the ACK
        ack(consumer, *(m["messageId"] for m in messages))


def test_an_ack_that_receives_costs_the_ack_and_the_claim_once_the_session_is_remembered(
    sessions_remembered, consumer, sender, adapter, django_assert_num_queries
):
    for _ in range(6):
        send(sender, adapter)
    messages = receive(consumer, "?max=3")

    with django_assert_num_queries(2):  # the ACK, the claim
        response = ack_then_receive(consumer, [m["messageId"] for m in messages], max=3)

    assert len(response.json()["messages"]) == 3


def test_the_session_claim_and_ack_statements_are_prepared_once_per_connection(
    sessions_in_postgres, consumer, sender, adapter
):
    for _ in range(6):  # psycopg prepares a statement on its fifth run on a connection
        send(sender, adapter)
        [message] = receive(consumer)
        ack(consumer, message["messageId"])

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("FROM accounts_session s" in statement for statement in prepared)
    assert any("WITH streaming AS" in statement for statement in prepared)  # RECEIVE
    assert any("INSERT INTO exchange_delivery_log" in statement for statement in prepared)  # ACK


def test_an_ack_refused_for_an_expired_token_loses_nothing(consumer, sender, adapter, settings):
    """Receive; the ACK fails because the token expired; refresh; the same message comes back
    redelivered on the next receive; the ACK succeeds; nothing is left."""
    message_id = send(sender, adapter).json()["messageId"]
    with time_machine.travel(datetime.now(UTC)) as clock:
        [received] = receive(consumer)
        clock.shift(settings.JWT_ACCESS_TTL_SECONDS + 1)

        failed = consumer.call("post", "/api/exchange/messages/ack", {"messageIds": [message_id]})
        assert (failed.status_code, failed.json()["code"]) == (401, "TOKEN_EXPIRED")

        assert consumer.refresh().status_code == 200
        [again] = receive(consumer)
        assert (again["messageId"], again["redelivered"], again["deliveryCount"]) == (
            received["messageId"],
            True,
            2,
        )

        assert ack(consumer, message_id) == {message_id: "acked"}
        assert receive(consumer) == []


def test_the_receipt_handle_postgresql_renders_is_the_one_the_server_parses(
    consumer, sender, adapter
):
    from exchange.services.leases import receipt_handle, receipt_parse

    send(sender, adapter)
    [held] = receive(consumer)
    message = Message.objects.get()
    assert message.lease_token is not None

    assert held["receiptHandle"] == receipt_handle(message.message_id, message.lease_token)
    receipt = receipt_parse(held["receiptHandle"])
    assert receipt is not None
    assert (receipt.message_id, receipt.lease_token) == (message.message_id, message.lease_token)


@pytest.mark.parametrize(
    ("ids", "errors"),
    [
        ("not-a-list", {"messageIds": ['Expected a list of items but got type "str".']}),
        (
            [1, None],
            {
                "messageIds[0]": ["Must be a valid UUID."],
                "messageIds[1]": ["Must be a valid UUID."],
            },
        ),
        (
            [str(uuid.uuid4())] * 101,
            {"messageIds": ["Ensure this field has no more than 100 elements."]},
        ),
    ],
)
def test_ack_ids_are_a_list_of_at_most_100_uuids(consumer, ids, errors):
    response = consumer.call("post", "/api/exchange/messages/ack", {"messageIds": ids})

    assert (response.status_code, response.json()["errors"]) == (400, errors)
