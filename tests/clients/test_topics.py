"""The client publishing to topics against the live platform (gunicorn over a PostgreSQL of this
module's own): publish and publish_batch answer each publication's recipients and refusals, a
replay with its key is a duplicate that publishes nothing again, a key reused or a topic the
adapter may not publish to raises its error (or answers it per message in a batch); each
subscriber receives a copy of its own, with the topic and the publication, through receive,
stream() and consume(); a subscription made after a publish does not get it, and a full
subscriber queue refuses its copy, not the publish."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from exchange_client import (
    Conflict,
    ExchangeClient,
    ExchangeError,
    Message,
    PayloadTooLarge,
    PermissionDenied,
    Publication,
    Published,
)

from tests.clients.conftest import subscribe, topic_create
from tests.clients.test_cli import MESSAGE_MEMBERS
from tests.clients.test_library import (
    RECEIVE,
    CountingTransport,
    alive,
    client_for,
    consuming,
    waiting,
)
from tests.clients.test_stream import STREAM, Reading
from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase, wait_until
from tests.stack.processes import running_gunicorn

pytestmark = pytest.mark.stack

LONG_LEASE = 3600  # no lease runs out during a test: whatever comes back was given back


def received_by(base_url: str, adapter: Adapter) -> list[Message]:
    """Everything waiting for the adapter, received and acknowledged in queue order."""
    handled: list[Message] = []
    with client_for(base_url, adapter, f"{adapter.login}-1") as client:
        client.consume(handled.append, batch=100, wait=0, until_empty=True, handle_signals=False)
    return handled


def published_only(outcomes: list[Published | ExchangeError]) -> list[Published]:
    assert all(isinstance(outcome, Published) for outcome in outcomes), outcomes
    return [outcome for outcome in outcomes if isinstance(outcome, Published)]


def copy_of(message: Message) -> tuple[object, ...]:
    """What a copy carries of its publication."""
    return (
        message.sender,
        message.topic_id,
        message.publication_id,
        message.type,
        message.headers,
        message.payload,
    )


def test_publish_queues_a_copy_of_its_own_for_each_subscriber_and_a_replay_publishes_nothing(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    publisher = owner.create_adapter("topic-publisher")
    first = owner.create_adapter("topic-subscriber-1")
    second = owner.create_adapter("topic-subscriber-2")
    topic_id = topic_create(owner, "prices")
    subscribe(owner, topic_id, first)
    subscribe(owner, topic_id, second)
    price = {"sku": "A-1", "price": 10}

    with client_for(gunicorn.base_url, publisher, "topic-publisher-1") as client:
        published = client.publish(
            topic_id, "price.changed", price, headers={"trace-id": "abc"}, idempotency_key="p-1"
        )
        again = client.publish(
            topic_id, "price.changed", price, headers={"trace-id": "abc"}, idempotency_key="p-1"
        )
        direct = client.send(first.adapter_id, "note", {"n": 1})

    assert published == Published(published.publication_id, 2, 0, duplicate=False)
    uuid.UUID(published.publication_id)
    assert again == replace(published, duplicate=True)
    copy = (
        publisher.adapter_id,
        topic_id,
        published.publication_id,
        "price.changed",
        {"trace-id": "abc"},
        price,
    )
    with (
        client_for(gunicorn.base_url, first, "topic-subscriber-1-1") as one,
        client_for(gunicorn.base_url, second, "topic-subscriber-2-1") as other,
    ):
        [first_copy, note] = one.receive(max_messages=10, lease_seconds=LONG_LEASE)
        [second_copy] = other.receive(max_messages=10, lease_seconds=LONG_LEASE)
        # A copy is a message of its subscriber's queue: released, it comes back, then is acked.
        assert other.release([second_copy]) == {second_copy.message_id: "released"}
        [back] = other.receive(max_messages=10)
        assert one.ack([first_copy, note]) == dict.fromkeys(
            [first_copy.message_id, note.message_id], "acked"
        )
        assert other.ack([back]) == {back.message_id: "acked"}

    assert first_copy.message_id != second_copy.message_id
    assert copy_of(first_copy) == copy_of(second_copy) == copy_of(back) == copy
    assert (back.message_id, back.redelivered, back.delivery_count) == (
        second_copy.message_id,
        True,
        2,
    )
    assert all(list(m.raw) == MESSAGE_MEMBERS for m in (first_copy, second_copy, note))
    # A message sent directly has neither.
    assert (note.message_id, note.topic_id, note.publication_id) == (direct.message_id, None, None)
    assert waiting(stack_database, first) == waiting(stack_database, second) == (0, 0)


def test_a_key_reused_for_another_publication_or_across_sends_and_publishes_is_a_conflict(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    publisher = owner.create_adapter("topic-key-publisher")
    subscriber = owner.create_adapter("topic-key-subscriber")
    topic_id = topic_create(owner, "keys")
    subscribe(owner, topic_id, subscriber)

    with client_for(gunicorn.base_url, publisher, "topic-key-publisher-1") as client:
        client.publish(topic_id, "price.changed", {"price": 10}, idempotency_key="daily")
        client.send(subscriber.adapter_id, "price.changed", {"price": 10}, idempotency_key="sent")
        with pytest.raises(Conflict) as changed:
            client.publish(topic_id, "price.changed", {"price": 11}, idempotency_key="daily")
        # Sends and publishes share one namespace of keys, either way round.
        with pytest.raises(Conflict) as sent_after:
            client.send(
                subscriber.adapter_id, "price.changed", {"price": 10}, idempotency_key="daily"
            )
        with pytest.raises(Conflict) as published_after:
            client.publish(topic_id, "price.changed", {"price": 10}, idempotency_key="sent")
        outcomes = client.publish_batch(
            topic_id, [Publication("price.changed", {"price": 12}, idempotency_key="daily")]
        )

    for refused in (changed, sent_after, published_after):
        assert (refused.value.status, refused.value.code) == (409, "IDEMPOTENCY_KEY_REUSED")
    [in_batch] = outcomes
    assert isinstance(in_batch, Conflict)
    assert in_batch.code == "IDEMPOTENCY_KEY_REUSED"
    assert waiting(stack_database, subscriber) == (2, 0)


def test_publishing_where_the_adapter_may_not_raises_permission_denied(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    publisher = owner.create_adapter("topic-stranger")
    nothing_here = 999_999  # a topic of nobody's: refused as one of another owner's would be

    with client_for(gunicorn.base_url, publisher, "topic-stranger-1") as client:
        with pytest.raises(PermissionDenied) as refused:
            client.publish(nothing_here, "price.changed", {"price": 10})
        outcomes = client.publish_batch(
            nothing_here, [Publication("price.changed", {"n": n}) for n in range(3)]
        )

    assert (refused.value.status, refused.value.code) == (403, "PUBLISH_NOT_ALLOWED")
    assert all(isinstance(outcome, PermissionDenied) for outcome in outcomes), outcomes
    assert [o.code for o in outcomes if isinstance(o, ExchangeError)] == ["PUBLISH_NOT_ALLOWED"] * 3


def test_publish_batch_answers_each_publication_in_order_and_a_retry_publishes_nothing_twice(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    publisher = owner.create_adapter("topic-batch-publisher")
    subscriber = owner.create_adapter("topic-batch-subscriber")
    topic_id = topic_create(owner, "batches")
    subscribe(owner, topic_id, subscriber)
    batch = [
        Publication("stock.changed", {"n": n}, idempotency_key=f"stock-{n}") for n in range(230)
    ]
    batch[150] = Publication("stock.changed", "x" * 300_000)  # over 256 KiB
    batch[200] = Publication("stock.changed", {"n": -3}, idempotency_key="stock-3")  # taken

    with client_for(gunicorn.base_url, publisher, "topic-batch-publisher-1") as client:
        first = client.publish_batch(topic_id, batch)
        again = client.publish_batch(topic_id, batch[:150] + batch[151:200] + batch[201:])

    assert isinstance(first[150], PayloadTooLarge)
    assert isinstance(first[200], Conflict)
    assert first[200].code == "IDEMPOTENCY_KEY_REUSED"
    published = published_only([o for n, o in enumerate(first) if n not in (150, 200)])
    assert {(p.recipients, p.refused, p.duplicate) for p in published} == {(1, 0, False)}
    # The same keys again: each a duplicate of its first publication, nothing queued anew.
    assert published_only(again) == [replace(p, duplicate=True) for p in published]
    handled = received_by(gunicorn.base_url, subscriber)
    assert [m.payload["n"] for m in handled] == [n for n in range(230) if n not in (150, 200)]
    assert [m.publication_id for m in handled] == [p.publication_id for p in published]
    assert {m.topic_id for m in handled} == {topic_id}


def test_a_subscription_made_after_a_publish_does_not_get_it(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    publisher = owner.create_adapter("topic-late-publisher")
    early = owner.create_adapter("topic-early")
    late = owner.create_adapter("topic-late")
    topic_id = topic_create(owner, "late")
    subscribe(owner, topic_id, early)

    with client_for(gunicorn.base_url, publisher, "topic-late-publisher-1") as client:
        before = client.publish(topic_id, "price.changed", {"n": 1})
        subscribe(owner, topic_id, late)
        after = client.publish(topic_id, "price.changed", {"n": 2})

    assert (before.recipients, after.recipients) == (1, 2)
    assert [m.payload for m in received_by(gunicorn.base_url, early)] == [{"n": 1}, {"n": 2}]
    assert [m.payload for m in received_by(gunicorn.base_url, late)] == [{"n": 2}]


def test_a_full_subscriber_queue_refuses_its_copy_and_not_the_publish(
    stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    publisher = owner.create_adapter("topic-bounded-publisher")
    roomy = owner.create_adapter("topic-roomy")
    full = owner.create_adapter("topic-full")
    topic_id = topic_create(owner, "bounded")
    subscribe(owner, topic_id, roomy)
    subscribe(owner, topic_id, full)
    bounded = {"EXCHANGE_MAX_QUEUE_DEPTH": "2"}

    with (
        running_gunicorn(stack_database, tmp_path / "bounded", bounded) as server,
        client_for(server.base_url, publisher, "topic-bounded-publisher-1") as client,
    ):
        direct = [client.send(full.adapter_id, "note", {"n": n}).message_id for n in (1, 2)]
        published = client.publish(topic_id, "price.changed", {"price": 10})
        in_batch = client.publish_batch(topic_id, [Publication("price.changed", {"price": 11})])
        to_roomy = received_by(server.base_url, roomy)
        to_full = received_by(server.base_url, full)

    assert (published.recipients, published.refused) == (1, 1)
    assert [(p.recipients, p.refused) for p in published_only(in_batch)] == [(1, 1)]
    assert [m.payload for m in to_roomy] == [{"price": 10}, {"price": 11}]
    assert [(m.message_id, m.topic_id) for m in to_full] == [(m, None) for m in direct]


@pytest.fixture
def subscription(owner: Owner) -> tuple[Adapter, Adapter, int]:
    """A publisher, and a subscriber to a topic of their own."""
    name = uuid.uuid4().hex[:12]
    publisher = owner.create_adapter(f"topic-pub-{name}")
    subscriber = owner.create_adapter(f"topic-sub-{name}")
    topic_id = topic_create(owner, name)
    subscribe(owner, topic_id, subscriber)
    return publisher, subscriber, topic_id


def test_stream_yields_a_copy_with_its_topic_and_publication_as_it_is_published(
    gunicorn: Gunicorn, stack_database: StackDatabase, subscription: tuple[Adapter, Adapter, int]
) -> None:
    publisher, subscriber, topic_id = subscription

    with (
        client_for(gunicorn.base_url, subscriber, "topic-streamer-1") as client,
        client.stream(lease=LONG_LEASE) as stream,
        client_for(gunicorn.base_url, publisher, "topic-stream-publisher-1") as publishing,
    ):
        reading = Reading(stream)
        published = publishing.publish(topic_id, "price.changed", {"price": 10})
        reading.wait_for(1, "the copy")
        [copy] = reading.messages
        assert client.ack([copy]) == {copy.message_id: "acked"}

    assert copy_of(copy) == (
        publisher.adapter_id,
        topic_id,
        published.publication_id,
        "price.changed",
        {},
        {"price": 10},
    )
    assert list(copy.raw) == MESSAGE_MEMBERS
    assert waiting(stack_database, subscriber) == (0, 0)


def test_consume_on_the_stream_hands_the_copies_to_the_handler(
    gunicorn: Gunicorn, stack_database: StackDatabase, subscription: tuple[Adapter, Adapter, int]
) -> None:
    publisher, subscriber, topic_id = subscription
    transport = CountingTransport()
    handled: list[Message] = []
    consumer = ExchangeClient(
        gunicorn.base_url,
        subscriber.login,
        subscriber.password,
        device_id="topic-consumer-1",
        transport=transport,
    )

    with (
        consumer,
        client_for(gunicorn.base_url, publisher, "topic-consume-publisher-1") as publishing,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        run = consuming(pool, consumer, handled.append)
        try:
            outcomes = publishing.publish_batch(
                topic_id, [Publication("price.changed", {"n": n}) for n in range(5)]
            )
            wait_until(lambda: alive(run) and len(handled) == 5, timeout=30, what="5 copies")
        finally:
            consumer.stop()
        summary = run.result(timeout=30)

    assert summary.handled == 5
    assert [(m.topic_id, m.publication_id) for m in handled] == [
        (topic_id, p.publication_id) for p in published_only(outcomes)
    ]
    assert [m.payload for m in handled] == [{"n": n} for n in range(5)]
    # On the stream: no receive was made.
    assert (transport.requests[STREAM], transport.requests[RECEIVE]) == (1, 0)
    assert waiting(stack_database, subscriber) == (0, 0)
