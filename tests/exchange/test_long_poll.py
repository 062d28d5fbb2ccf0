"""Long polling on the platform's own server, and concurrent consumers with real threads on real
PostgreSQL connections (docs/exchange.md, "Receiving and leases": long polls)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import DataError, connection, connections

from accounts.models import User
from exchange.models import DeliveryLog, Message
from exchange.services.messages import messages_ack, messages_ack_receive, messages_receive
from exchange.services.sending import message_send
from tests.conftest import ApiClient, LongPolls
from tests.factories import AdapterFactory, UserFactory
from tests.live import LiveClient, LiveServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("long_polls")]


@pytest.fixture
def pair() -> tuple[User, User]:
    owner = UserFactory.create(username="lp-owner", email="lp@example.com")
    return AdapterFactory.create(username="lp-consumer", owner=owner), AdapterFactory.create(
        username="lp-sender", owner=owner
    )


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = call()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def send_to(sender: User, recipient: User, n: int = 1) -> uuid.UUID:
    return message_send(
        sender=sender, to=recipient.pk, type="t", payload={"n": n}, headers={}, idempotency_key=None
    ).message_id


@pytest.fixture
def consumer_client(live_server: LiveServer, pair) -> Iterator[LiveClient]:
    client = LiveClient(live_server, device_id="lp-1")
    assert client.sign_in("lp-consumer").status_code == 200
    yield client
    client.close()


def test_a_waiting_receive_wakes_on_the_notification(
    pair, consumer_client: LiveClient, long_polls: LongPolls
):
    consumer, sender = pair
    thread, result = in_thread(
        lambda: consumer_client.call("get", "/api/exchange/messages?waitSeconds=20")
    )
    long_polls.waiting(1)

    message_id = send_to(sender, consumer)
    thread.join(timeout=25)

    response = result["value"]
    assert response.status_code == 200
    assert [m["messageId"] for m in response.json()["messages"]] == [str(message_id)]
    # The wait that ended did not run out: a notification ended it.
    assert list(long_polls.woken.values())[-1] is True


def test_an_empty_wait_answers_an_empty_list_when_wait_seconds_are_up(
    consumer_client: LiveClient, long_polls: LongPolls
):
    response = consumer_client.call("get", "/api/exchange/messages?waitSeconds=1")

    assert (response.status_code, response.json()) == (200, {"messages": []})
    # The last wait ran out (an earlier one may have ended when the listener started).
    assert list(long_polls.woken.values())[-1] is False


def test_a_receive_that_finds_messages_does_not_wait(
    pair, consumer_client: LiveClient, long_polls: LongPolls
):
    consumer, sender = pair
    send_to(sender, consumer)

    response = consumer_client.call("get", "/api/exchange/messages?waitSeconds=20")

    assert len(response.json()["messages"]) == 1
    assert long_polls.woken == {}


def test_under_a_server_that_cannot_wait_a_long_poll_answers_at_once(pair):
    """Django's test client (no event loop): the answer a wait that ran out would give."""
    client = ApiClient(device_id="lp-1")
    client.sign_in("lp-consumer")

    response = client.call("get", "/api/exchange/messages?waitSeconds=20")

    assert (response.status_code, response.json()) == (200, {"messages": []})


def test_an_ack_that_receives_commits_with_its_claim_or_not_at_all(pair):
    """The ACK and the claim go to PostgreSQL in one round trip, as one transaction: a claim
    that fails leaves the ACK undone, and the connection serves the next call."""
    consumer, sender = pair
    message_id = send_to(sender, consumer)
    waiting = send_to(sender, consumer, 2)  # what the claim would take: it reads its LIMIT
    [held] = messages_receive(adapter=consumer, device_key="d:1", max_messages=1, lease_seconds=30)
    then_receive = {"adapter": consumer, "device_key": "d:1", "lease_seconds": 30}

    with pytest.raises(DataError):  # LIMIT -1: the claim fails, after the ACK has run
        messages_ack_receive(message_ids=[held.message_id], max_messages=-1, **then_receive)
    undone = (
        Message.objects.filter(message_id=message_id).exists(),
        DeliveryLog.objects.filter(message_id=message_id).exists(),
    )
    acked, following = messages_ack_receive(
        message_ids=[held.message_id], max_messages=10, **then_receive
    )

    assert undone == (True, False)
    assert acked == [(str(message_id), "acked")]
    assert [delivery.message_id for delivery in following] == [str(waiting)]
    assert list(Message.objects.values_list("message_id", flat=True)) == [waiting]


def test_an_ack_that_receives_commits_the_ack_before_it_waits_and_wakes_on_a_send(
    pair, consumer_client: LiveClient, long_polls: LongPolls
):
    """The ACK runs once, in the first pass: the answer after the wait says acked, not
    alreadyAcked."""
    consumer, sender = pair
    acked_id = send_to(sender, consumer)
    [held] = consumer_client.call("get", "/api/exchange/messages").json()["messages"]
    body = {"messageIds": [held["messageId"]], "receive": {"max": 10, "waitSeconds": 20}}
    thread, result = in_thread(
        lambda: consumer_client.call("post", "/api/exchange/messages/ack", body)
    )
    long_polls.waiting(1)

    # While the request waits, its ACK is already committed: seen from another connection.
    acked_meanwhile = DeliveryLog.objects.filter(message_id=acked_id).exists()
    still_queued = Message.objects.filter(message_id=acked_id).exists()
    message_id = send_to(sender, consumer)
    thread.join(timeout=25)

    response = result["value"]
    assert (acked_meanwhile, still_queued) == (True, False)
    assert response.status_code == 200
    assert response.json()["results"] == [{"messageId": str(acked_id), "status": "acked"}]
    assert [m["messageId"] for m in response.json()["messages"]] == [str(message_id)]
    assert list(long_polls.woken.values())[-1] is True


def test_nothing_is_held_in_a_transaction_while_a_receive_waits(
    pair, consumer_client: LiveClient, long_polls: LongPolls
):
    consumer, sender = pair
    thread, _ = in_thread(
        lambda: consumer_client.call("get", "/api/exchange/messages?waitSeconds=5")
    )
    long_polls.waiting(1)
    # The wait has started the listener, which listens: its connection is idle too.

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, left(query, 40) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"  # not autovacuum's
        )
        others = cursor.fetchall()
    send_to(sender, consumer)
    thread.join(timeout=10)

    assert not [row for row in others if row[0] == "idle in transaction"], others
    # The only other connections are the listener and idle pooled ones; none is running a claim.
    assert not [row for row in others if row[0] == "active"], others


def test_waiting_receives_beyond_the_process_bound_get_503_server_busy(
    pair, settings, live_server: LiveServer, long_polls: LongPolls
):
    consumer, sender = pair
    settings.EXCHANGE_LONG_POLL_MAX_WAITING = 1
    first, second = (
        LiveClient(live_server, device_id="lp-1"),
        LiveClient(live_server, device_id="lp-2"),
    )
    first.sign_in("lp-consumer")
    second.sign_in("lp-consumer")
    thread, result = in_thread(lambda: first.call("get", "/api/exchange/messages?waitSeconds=20"))
    long_polls.waiting(1)

    refused = second.call("get", "/api/exchange/messages?waitSeconds=20")
    instant = second.call("get", "/api/exchange/messages")  # not waiting: never refused
    send_to(sender, consumer)
    thread.join(timeout=25)

    assert (refused.status_code, refused.json()["code"], refused.headers["Retry-After"]) == (
        503,
        "SERVER_BUSY",
        "1",
    )
    assert instant.status_code == 200
    assert result["value"].status_code == 200
    assert live_server.app.waiting.count == 0


def test_a_stopping_server_answers_its_waiting_long_polls_at_once(
    pair, django_db_setup: None, long_polls: LongPolls
):
    server = LiveServer()
    client = LiveClient(server, device_id="lp-1")
    try:
        client.sign_in("lp-consumer")
        thread, result = in_thread(
            lambda: client.call("get", "/api/exchange/messages?waitSeconds=20")
        )
        long_polls.waiting(1)

        server.stop()
        thread.join(timeout=25)

        assert (result["value"].status_code, result["value"].json()) == (200, {"messages": []})
        # Its wait neither ran out nor was notified: the stop ended it.
        assert long_polls.woken == {}
    finally:
        client.close()
        server.stop()


def test_parallel_consumers_never_hold_the_same_message_and_lose_none(pair):
    consumer, sender = pair
    sent = {str(send_to(sender, consumer, n)) for n in range(400)}

    def consume(instance: int) -> list[str]:
        taken: list[str] = []
        try:
            while True:
                batch = messages_receive(
                    adapter=consumer,
                    device_key=f"d:c{instance}",
                    max_messages=7,
                    lease_seconds=300,
                )
                if not batch:
                    return taken
                taken.extend(delivery.message_id for delivery in batch)
                messages_ack(
                    adapter=consumer,
                    device_key=f"d:c{instance}",
                    message_ids=[d.message_id for d in batch],
                )
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        per_consumer = list(pool.map(consume, range(8)))

    received = [message_id for taken in per_consumer for message_id in taken]
    assert len(received) == len(set(received)) == 400
    assert set(received) == sent
    assert Message.objects.filter(recipient=consumer).count() == 0
    # The log is not flushed between transactional tests (an unmanaged, partitioned table).
    logged = DeliveryLog.objects.filter(recipient=consumer).values_list("message_id", flat=True)
    assert {str(message_id) for message_id in logged} == sent


def test_parallel_sends_with_one_idempotency_key_make_one_message(pair):
    consumer, sender = pair

    def send(_: int) -> uuid.UUID:
        try:
            return message_send(
                sender=sender,
                to=consumer.pk,
                type="t",
                payload={"n": 1},
                headers={},
                idempotency_key="same",
            ).message_id
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=10) as pool:
        ids = set(pool.map(send, range(10)))

    assert len(ids) == 1
    assert Message.objects.count() == 1
