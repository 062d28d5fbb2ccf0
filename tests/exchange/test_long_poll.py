"""Long polling and concurrent consumers, with real threads on real PostgreSQL connections
(docs/exchange.md, "Receiving and leases": long polls)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import DataError, connection, connections
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from exchange.models import DeliveryLog, Message
from exchange.services import messages as messages_module
from exchange.services.messages import (
    message_send,
    messages_ack,
    messages_ack_receive,
    messages_receive,
)
from exchange.wakeups import wakeups
from tests.conftest import ApiClient, LongPolls
from tests.factories import AdapterFactory, UserFactory

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
        started = time.monotonic()
        try:
            result["value"] = call()
        finally:
            result["seconds"] = time.monotonic() - started
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def waiting() -> int:
    return wakeups._waiting


def send_to(sender: User, recipient: User, n: int = 1) -> uuid.UUID:
    return message_send(
        sender=sender, to=recipient.pk, type="t", payload={"n": n}, headers={}, idempotency_key=None
    ).message_id


def without_fallback_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting receive wakes only on a notification (or at its end), never to claim again on
    its own. The receive reads the name it imported, so the patch goes there."""
    monkeypatch.setattr(messages_module, "FALLBACK_POLL_SECONDS", 30.0)


def test_a_waiting_receive_wakes_on_the_notification_not_the_fallback_poll(
    pair, monkeypatch, long_polls: LongPolls
):
    consumer, sender = pair
    without_fallback_poll(monkeypatch)
    client = ApiClient(device_id="lp-1")
    client.sign_in("lp-consumer")
    thread, result = in_thread(lambda: client.call("get", "/api/exchange/messages?waitSeconds=20"))
    long_polls.waiting(1)

    sent_at = time.monotonic()
    message_id = send_to(sender, consumer)
    thread.join(timeout=25)

    response = result["value"]
    assert response.status_code == 200
    assert [m["messageId"] for m in response.json()["messages"]] == [str(message_id)]
    # Without the fallback poll only the NOTIFY can have woken it before its 20 s were up.
    assert time.monotonic() - sent_at < 10
    assert waiting() == 0


def test_an_empty_wait_answers_an_empty_list_when_wait_seconds_are_up(pair):
    client = ApiClient(device_id="lp-1")
    client.sign_in("lp-consumer")
    thread, result = in_thread(lambda: client.call("get", "/api/exchange/messages?waitSeconds=1"))
    thread.join(timeout=10)

    assert result["value"].json() == {"messages": []}
    assert result["seconds"] >= 1.0


def test_a_receive_that_finds_messages_does_not_wait(pair):
    consumer, sender = pair
    send_to(sender, consumer)
    client = ApiClient(device_id="lp-1")
    client.sign_in("lp-consumer")
    thread, result = in_thread(lambda: client.call("get", "/api/exchange/messages?waitSeconds=20"))
    thread.join(timeout=10)

    assert len(result["value"].json()["messages"]) == 1
    assert result["seconds"] < 10


def test_an_ack_that_receives_commits_with_its_claim_or_not_at_all(pair):
    """The ACK and the claim go to PostgreSQL in one round trip, as one transaction: a claim
    that fails leaves the ACK undone, and the connection serves the next call."""
    consumer, sender = pair
    message_id = send_to(sender, consumer)
    [held] = messages_receive(
        adapter=consumer, device_key="d:1", max_messages=1, lease_seconds=30, wait_seconds=0
    )
    then_receive = {"adapter": consumer, "device_key": "d:1", "lease_seconds": 30}

    with pytest.raises(DataError):  # LIMIT -1: the claim fails, after the ACK has run
        messages_ack_receive(
            message_ids=[held.message_id], max_messages=-1, wait_seconds=0, **then_receive
        )
    undone = (
        Message.objects.filter(message_id=message_id).exists(),
        DeliveryLog.objects.filter(message_id=message_id).exists(),
    )
    acked, following = messages_ack_receive(
        message_ids=[held.message_id], max_messages=10, wait_seconds=0, **then_receive
    )

    assert undone == (True, False)
    assert (acked, following) == ([(str(message_id), "acked")], [])
    assert not Message.objects.exists()


def test_an_ack_that_receives_nothing_waits_without_claiming_twice_first(pair, monkeypatch):
    """The pipelined claim that found nothing is the long poll's first: the wait registers and
    claims once more (for a send that committed in between), and once when the wait ends. No
    message is sent here, so no notification can end the wait early."""
    consumer, _ = pair
    without_fallback_poll(monkeypatch)
    unknown = uuid.uuid4()

    with CaptureQueriesContext(connection) as statements:
        acked, following = messages_ack_receive(
            adapter=consumer,
            device_key="d:1",
            message_ids=[unknown],
            max_messages=10,
            lease_seconds=30,
            wait_seconds=0.2,
        )

    assert (acked, following) == ([(str(unknown), "notFound")], [])
    # The ACK, the first claim, the lookup of why the id was not acked, then two claims. (By
    # count: a prepared statement's text is not logged.)
    assert len(statements.captured_queries) == 5


def test_an_ack_that_receives_commits_the_ack_before_it_waits_and_wakes_on_a_send(
    pair, monkeypatch, long_polls: LongPolls
):
    consumer, sender = pair
    without_fallback_poll(monkeypatch)
    acked_id = send_to(sender, consumer)
    client = ApiClient(device_id="lp-1")
    client.sign_in("lp-consumer")
    [held] = client.call("get", "/api/exchange/messages").json()["messages"]
    body = {"messageIds": [held["messageId"]], "receive": {"max": 10, "waitSeconds": 20}}
    thread, result = in_thread(lambda: client.call("post", "/api/exchange/messages/ack", body))
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
    assert long_polls.woken == {1: [True]}  # the notification, not the wait running out


def test_nothing_is_held_in_a_transaction_while_a_receive_waits(
    pair, monkeypatch, long_polls: LongPolls
):
    consumer, sender = pair
    without_fallback_poll(monkeypatch)  # no claim of its own while the connections are looked at
    thread, _ = in_thread(
        lambda: messages_receive(
            adapter=consumer, device_key="d:lp", max_messages=1, lease_seconds=30, wait_seconds=5
        )
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


def test_waiting_receives_beyond_the_per_worker_bound_get_429(
    pair, settings, long_polls: LongPolls
):
    consumer, sender = pair
    settings.EXCHANGE_LONG_POLL_MAX_WAITING = 1
    first, second = ApiClient(device_id="lp-1"), ApiClient(device_id="lp-2")
    first.sign_in("lp-consumer")
    second.sign_in("lp-consumer")
    thread, result = in_thread(lambda: first.call("get", "/api/exchange/messages?waitSeconds=20"))
    long_polls.waiting(1)

    refused = second.call("get", "/api/exchange/messages?waitSeconds=20")
    instant = second.call("get", "/api/exchange/messages")  # not waiting: never refused
    send_to(sender, consumer)
    thread.join(timeout=25)

    assert (refused.status_code, refused.json()["code"], refused["Retry-After"]) == (
        429,
        "RATE_LIMITED",
        "1",
    )
    assert instant.status_code == 200
    assert result["value"].status_code == 200


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
                    wait_seconds=0,
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
