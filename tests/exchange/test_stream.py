"""The push stream (GET /api/exchange/messages/stream) on the platform's own server: deliveries in
order and paced by credits, every way a stream ends, the receive it excludes, and its errors.
Each claim about order or credits is judged by the events that came and the rows in PostgreSQL,
never by a clock: where a test must know that the stream looked again and found nothing, it
counts the stream's looks (looked_again)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connections

from accounts.models import User
from accounts.services.accounts import account_set_active
from exchange import streams
from exchange.api.serializers import DeliveryOutput
from exchange.models import Message, Stream, Subscription, Topic
from exchange.services.publishing import Publishing, topic_publish
from exchange.services.sending import message_send
from tests.events import EventReader
from tests.factories import AdapterFactory, UserFactory
from tests.live import LiveClient, LiveServer
from tests.stack.conftest import wait_until

# Slow: each test holds streams open on the live server and waits for what they send.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

STREAM = "/api/exchange/messages/stream"


@pytest.fixture
def pair() -> tuple[User, User]:
    owner = UserFactory.create(username="st-owner", email="st@example.com")
    return AdapterFactory.create(username="st-consumer", owner=owner), AdapterFactory.create(
        username="st-sender", owner=owner
    )


@pytest.fixture(autouse=True)
def quick_heartbeat(settings: Any) -> None:
    settings.EXCHANGE_STREAM_HEARTBEAT_SECONDS = 1


@pytest.fixture
def consumer(live_server: LiveServer, pair: tuple[User, User]) -> Iterator[LiveClient]:
    client = LiveClient(live_server, device_id="st-1")
    assert client.sign_in("st-consumer").status_code == 200
    yield client
    client.close()


@pytest.fixture
def readers() -> Iterator[list[EventReader]]:
    opened: list[EventReader] = []
    yield opened
    for reader in opened:
        reader.close()
    # Every stream the test opened gave its place and its row back once its client went away.
    settled(lambda: streams.places.count == 0 and not Stream.objects.exists())


@pytest.fixture
def open_stream(live_server: LiveServer, readers: list[EventReader]) -> Callable[..., EventReader]:
    def open_(
        client: LiveClient, accept: str | None = "text/event-stream", **query: Any
    ) -> EventReader:
        headers = {"Authorization": f"Bearer {client.tokens['accessToken']}"}
        if client.device_id is not None:
            headers["X-Device-ID"] = client.device_id
        if accept is not None:
            headers["Accept"] = accept
        url = live_server.url + STREAM + (f"?{urlencode(query)}" if query else "")
        reader = EventReader(url, headers)
        readers.append(reader)
        return reader

    return open_


def send(sender: User, recipient: User, n: int) -> str:
    return str(
        message_send(
            sender=sender, to=recipient.pk, type="t", payload={"n": n}, headers={"h": "v"},
            idempotency_key=None,
        ).message_id
    )  # fmt: skip


def settled(condition: Callable[[], bool]) -> None:
    """Wait for a state the server reaches by itself (tests/stack/conftest.py's wait_until),
    reading PostgreSQL afresh each time."""

    def fresh() -> bool:
        connections.close_all()
        return condition()

    wait_until(fresh, timeout=20, what="the server's state")


def looked_again(adapter: User, provoke: Callable[[], object]) -> None:
    """``provoke()``, then wait until the adapter's stream (on the live server in this process)
    has looked for messages once more: a claim done after this call began."""
    [stream] = [stream for stream in streams.registry.streams if stream.adapter_id == adapter.pk]
    before = stream.rounds
    provoke()
    settled(lambda: stream.rounds > before)


def beats(reader: EventReader, count: int = 2) -> None:
    """Read until ``count`` keep-alives came."""
    seen = 0
    while seen < count:
        event = reader.next(skip_comments=False)
        assert event.event == "comment", event
        seen += 1


def ack(client: LiveClient, *message_ids: str) -> None:
    response = client.call("post", "/api/exchange/messages/ack", {"messageIds": list(message_ids)})
    assert response.status_code == 200, response.text


def test_messages_come_in_order_each_an_event_with_a_receives_members(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    sent = [send(sender, recipient, n) for n in range(3)]
    reader = open_stream(consumer)

    assert reader.status == 200
    assert reader.headers["content-type"].startswith("text/event-stream")
    events = [reader.next() for _ in range(3)]
    assert [event.event for event in events] == ["message"] * 3
    assert [event.id for event in events] == sent
    assert [event.data["messageId"] for event in events] == sent
    assert set(events[0].data) == set(DeliveryOutput().fields)
    assert events[0].data["payload"] == {"n": 0}
    assert events[0].data["headers"] == {"h": "v"}
    assert events[0].data["redelivered"] is False

    later = send(sender, recipient, 3)  # delivered as it arrives: no poll
    assert reader.next().id == later


def test_a_topics_copy_streams_with_its_topic_and_publication(pair, consumer, open_stream):
    recipient, publisher = pair
    topic = Topic.objects.create(owner=recipient.owner, name="prices")
    Subscription.objects.create(topic=topic, adapter=recipient)
    publication = Publishing(type="price.changed", payload={"p": 1}, headers={"h": "v"})
    published = topic_publish(publisher=publisher, topic_id=topic.pk, publication=publication)
    reader = open_stream(consumer)

    event = reader.next()

    assert event.data["topicId"] == topic.pk
    assert event.data["publicationId"] == str(published.publication_id)
    assert (event.data["sender"], event.data["payload"]) == (publisher.pk, {"p": 1})
    ack(consumer, event.data["messageId"])
    settled(lambda: not Message.objects.exists())


def test_credits_hold_the_next_message_back_until_one_is_acknowledged(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    sent = [send(sender, recipient, n) for n in range(3)]
    reader = open_stream(consumer, maxOutstanding=2)

    first, second = reader.messages(2)
    assert [first["messageId"], second["messageId"]] == sent[:2]
    # Another message makes the stream look again, with no credit left: it claims nothing.
    looked_again(recipient, lambda: send(sender, recipient, 3))
    third = Message.objects.get(message_id=sent[2])
    assert (third.receive_count, third.lease_token) == (0, None)

    ack(consumer, first["messageId"])

    assert reader.next().id == sent[2]


def test_a_nack_frees_a_credit(pair, consumer: LiveClient, open_stream):
    recipient, sender = pair
    sent = [send(sender, recipient, n) for n in range(2)]
    reader = open_stream(consumer, maxOutstanding=1)
    [first] = reader.messages(1)

    response = consumer.call(
        "post",
        "/api/exchange/messages/nack",
        {"receiptHandles": [first["receiptHandle"]], "delaySeconds": 600},
    )
    assert response.status_code == 200

    assert reader.next().id == sent[1]


def test_a_message_released_with_a_delay_comes_back_when_the_delay_is_over(
    pair, consumer: LiveClient, open_stream
):
    """Nothing notifies the end of a release's delay: the sweep's look, once a heartbeat, finds
    the message available and wakes the stream."""
    recipient, sender = pair
    sent = send(sender, recipient, 0)
    reader = open_stream(consumer)
    [first] = reader.messages(1)
    response = consumer.call(
        "post",
        "/api/exchange/messages/nack",
        {"receiptHandles": [first["receiptHandle"]], "delaySeconds": 1},
    )
    assert response.json()["results"][0]["status"] == "released"

    again = reader.next()

    assert (again.id, again.data["deliveryCount"]) == (sent, 2)


def test_a_lease_that_runs_out_frees_its_credit_and_the_message_comes_again(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    sent = send(sender, recipient, 0)
    reader = open_stream(consumer, maxOutstanding=1, leaseSeconds=1)
    [first] = reader.messages(1)

    again = reader.next()

    assert (again.id, again.data["redelivered"], again.data["deliveryCount"]) == (sent, True, 2)
    assert again.data["receiptHandle"] != first["receiptHandle"]


def test_a_second_stream_of_the_device_replaces_the_first(pair, consumer: LiveClient, open_stream):
    recipient, sender = pair
    first = open_stream(consumer)
    assert first.status == 200

    second = open_stream(consumer)

    end = first.next()
    assert (end.event, end.data["code"]) == ("end", "REPLACED")
    assert first.ended.wait(10)
    message = send(sender, recipient, 0)
    assert second.next().id == message


def test_a_receive_from_a_device_whose_stream_is_open_is_409_stream_open(
    pair, live_server: LiveServer, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    reader = open_stream(consumer)
    send(sender, recipient, 0)
    reader.messages(1)

    response = consumer.call("get", "/api/exchange/messages")

    assert response.status_code == 409
    assert response.json()["code"] == "STREAM_OPEN"
    other = LiveClient(live_server, device_id="st-2")
    other.sign_in("st-consumer")
    assert other.call("get", "/api/exchange/messages").status_code == 200
    other.close()


def test_an_ack_that_receives_on_a_streaming_device_acknowledges_and_is_409(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    reader = open_stream(consumer)
    send(sender, recipient, 0)
    [message] = reader.messages(1)

    response = consumer.call(
        "post",
        "/api/exchange/messages/ack",
        {"messageIds": [message["messageId"]], "receive": {"max": 10}},
    )

    assert response.status_code == 409
    assert response.json()["code"] == "STREAM_OPEN"
    assert not Message.objects.filter(message_id=message["messageId"]).exists()


def test_a_client_that_goes_away_frees_its_place_and_its_device(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    reader = open_stream(consumer)
    send(sender, recipient, 0)
    [message] = reader.messages(1)
    assert (streams.places.count, Stream.objects.count()) == (1, 1)

    reader.close()

    settled(lambda: streams.places.count == 0 and not Stream.objects.exists())
    # The message it held comes back to the same device at once, as after any receive.
    response = consumer.call("get", "/api/exchange/messages")
    assert response.status_code == 200
    [again] = response.json()["messages"]
    assert (again["messageId"], again["redelivered"]) == (message["messageId"], True)


def test_a_logout_ends_the_stream_with_token_revoked_and_nothing_is_delivered_after(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    reader = open_stream(consumer)
    refresh = consumer.tokens["refreshToken"]

    assert consumer.call("post", "/api/auth/logout", {"refreshToken": refresh}).status_code == 200
    send(sender, recipient, 0)

    end = reader.next()
    assert (end.event, end.data["code"]) == ("end", "TOKEN_REVOKED")
    assert Message.objects.get().receive_count == 0


def test_a_disabled_adapter_s_idle_stream_ends_with_token_revoked(
    pair, consumer: LiveClient, open_stream
):
    recipient, _ = pair
    reader = open_stream(consumer)
    beats(reader, 1)

    account_set_active(user=recipient, active=False)  # as an administrator: no request wakes it

    end = reader.next()
    assert (end.event, end.data["code"]) == ("end", "TOKEN_REVOKED")


def test_the_access_token_s_expiry_ends_the_stream_with_token_expired(
    pair, live_server: LiveServer, settings: Any, open_stream
):
    settings.JWT_ACCESS_TTL_SECONDS = 2
    client = LiveClient(live_server, device_id="st-1")
    client.sign_in("st-consumer")
    reader = open_stream(client)

    end = reader.next(timeout=30)

    assert (end.event, end.data["code"]) == ("end", "TOKEN_EXPIRED")
    assert reader.ended.wait(10)
    client.close()


def test_a_stopping_server_ends_its_streams_with_shutdown(
    pair, django_db_setup: None, readers: list[EventReader]
):
    server = LiveServer()
    try:
        client = LiveClient(server, device_id="st-1")
        client.sign_in("st-consumer")
        headers = {
            "Authorization": f"Bearer {client.tokens['accessToken']}",
            "X-Device-ID": "st-1",
            "Accept": "text/event-stream",
        }
        reader = EventReader(server.url + STREAM, headers)
        readers.append(reader)
        beats(reader, 1)

        stopping = threading.Thread(target=server.stop)
        stopping.start()

        end = reader.next()
        assert (end.event, end.data["code"]) == ("end", "SHUTDOWN")
        stopping.join(30)
        assert not stopping.is_alive()
        client.close()
    finally:
        server.stop()


@pytest.mark.parametrize("accept", ["application/json", "*/*", None, "text/html"])
def test_a_stream_must_be_asked_for_by_its_media_type(consumer: LiveClient, open_stream, accept):
    reader = open_stream(consumer, accept=accept)

    assert reader.status == 406
    assert reader.headers["content-type"] == "application/problem+json"
    assert reader.body["code"] == "NOT_ACCEPTABLE"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"maxOutstanding": 0}, "maxOutstanding"),
        ({"maxOutstanding": 1001}, "maxOutstanding"),
        ({"maxOutstanding": "many"}, "maxOutstanding"),
        ({"leaseSeconds": 0}, "leaseSeconds"),
        ({"maxOutstanding": ""}, "maxOutstanding"),
    ],
)
def test_credits_and_leases_outside_their_bounds_are_400(consumer, open_stream, query, field):
    reader = open_stream(consumer, **query)

    assert reader.status == 400
    assert reader.body["code"] == "VALIDATION_FAILED"
    assert field in reader.body["errors"]


def test_errors_before_the_first_byte_are_problems(live_server: LiveServer, pair, open_stream):
    client = LiveClient(live_server, device_id="st-1")
    client.tokens = {"accessToken": "not-a-token"}

    reader = open_stream(client)

    assert reader.status == 401
    assert reader.headers["content-type"] == "application/problem+json"
    client.close()


def test_past_the_process_s_bound_a_stream_is_503_server_busy(
    live_server: LiveServer, consumer: LiveClient, settings: Any, open_stream
):
    settings.EXCHANGE_STREAM_MAX_CONNECTIONS = 1
    open_stream(consumer)
    other = LiveClient(live_server, device_id="st-2")
    other.sign_in("st-consumer")

    refused = open_stream(other)

    assert refused.status == 503
    assert refused.body["code"] == "SERVER_BUSY"
    assert refused.headers["retry-after"] == "1"
    other.close()


def test_opening_counts_once_against_the_rate_limit_and_deliveries_do_not(
    pair, consumer: LiveClient, open_stream
):
    recipient, sender = pair
    before = int(consumer.call("get", "/api/exchange/whoami").headers["X-Rate-Limit-Remaining"])
    reader = open_stream(consumer)
    for n in range(5):
        send(sender, recipient, n)
    reader.messages(5)

    after = int(consumer.call("get", "/api/exchange/whoami").headers["X-Rate-Limit-Remaining"])

    assert before - after == 2  # the stream, and this whoami
