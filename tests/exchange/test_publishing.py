"""Publishing to topics: POST /api/exchange/topics/{topicId}/messages[/batch], each subscriber's
copy received, acknowledged and dead-lettered as a direct message (docs/exchange.md, "Topics")."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from exchange.models import DeadLetter, DeliveryLog, Message, Publication, Subscription, Topic
from exchange.services.dead_letters import dead_letters_redrive
from exchange.services.publishing import Published, Publishing, topic_publish_many
from exchange.services.queues import queues_trim
from tests.exchange.test_messages_api import ack, expire_leases, receive, send
from tests.exchange.topics import (
    TOPICS,
    adapter_client,
    publish,
    subscribe,
    topic_create,
)
from tests.factories import AdapterFactory, UserFactory
from tests.live import LiveClient, LiveServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def topic_id(cabinet) -> int:
    return topic_create(cabinet)


@pytest.fixture
def subscribers(owner, cabinet, topic_id) -> list[User]:
    """Three adapters of the owner, subscribed to the topic."""
    adapters = AdapterFactory.create_batch(3, owner=owner)
    for adapter in adapters:
        assert subscribe(cabinet, topic_id, adapter).status_code == 201
    return adapters


def test_each_subscriber_receives_its_own_copy(sender, subscribers, topic_id):
    response = publish(sender, topic_id, {"price": 10})

    assert response.status_code == 201
    published = response.json()
    assert published["recipients"] == 3
    assert published["refused"] == 0
    publisher = User.objects.get(username="crm")
    copies = [receive(adapter_client(adapter), "?max=10") for adapter in subscribers]
    assert all(len(received) == 1 for received in copies)
    messages = [received[0] for received in copies]
    assert len({m["messageId"] for m in messages}) == 3
    for message in messages:
        assert message["payload"] == {"price": 10}
        assert message["type"] == "price.changed"
        assert message["sender"] == publisher.pk
        assert message["topicId"] == topic_id
        assert message["publicationId"] == published["publicationId"]


def test_a_direct_message_has_no_topic(sender, consumer, adapter):
    send(sender, adapter)

    [message] = receive(consumer)

    assert message["topicId"] is None
    assert message["publicationId"] is None


def test_the_payload_is_stored_once_and_each_copy_is_acknowledged_on_its_own(
    sender, subscribers, topic_id
):
    published = publish(sender, topic_id, {"big": "x" * 1000}).json()

    assert Publication.objects.count() == 1
    assert Message.objects.filter(payload__isnull=True).count() == 3
    first, second, _ = (adapter_client(adapter) for adapter in subscribers)
    [copy] = receive(first)
    assert ack(first, copy["messageId"]) == {copy["messageId"]: "acked"}
    # The others' copies are untouched: the second still gets its own.
    [other] = receive(second)
    assert other["payload"] == {"big": "x" * 1000}
    logged = DeliveryLog.objects.get(message_id=copy["messageId"])
    assert logged.payload is None
    assert str(logged.publication_id) == published["publicationId"]
    assert logged.topic_id == topic_id


def test_a_copy_is_redelivered_and_dead_lettered_with_its_payload(
    sender, subscribers, topic_id, settings, owner
):
    settings.EXCHANGE_MAX_DELIVERIES = 2
    publish(sender, topic_id, {"n": 7})
    client = adapter_client(subscribers[0])

    first = receive(client)
    expire_leases()
    again = receive(client)
    expire_leases()
    gone = receive(client)

    assert again[0]["messageId"] == first[0]["messageId"]
    assert again[0]["redelivered"] is True
    assert gone == []
    dead = DeadLetter.objects.get(recipient=subscribers[0])
    assert dead.payload == {"n": 7}
    assert dead.topic_id == topic_id
    assert dead_letters_redrive(owner=owner, message_ids=[dead.message_id]) == [dead.message_id]
    [redriven] = receive(client)
    assert redriven["payload"] == {"n": 7}
    assert redriven["topicId"] == topic_id
    assert redriven["publicationId"] == str(dead.publication_id)


def test_types_filter_what_a_subscriber_gets(cabinet, sender, owner, topic_id):
    everything, prices = AdapterFactory.create_batch(2, owner=owner)
    subscribe(cabinet, topic_id, everything)
    subscribe(cabinet, topic_id, prices, types=["price.changed"])

    assert publish(sender, topic_id, type="price.changed").json()["recipients"] == 2
    assert publish(sender, topic_id, type="stock.changed").json()["recipients"] == 1

    assert [m["type"] for m in receive(adapter_client(prices), "?max=10")] == ["price.changed"]
    assert len(receive(adapter_client(everything), "?max=10")) == 2


def test_a_subscription_made_after_a_publish_does_not_receive_it(cabinet, sender, owner, topic_id):
    early, late = AdapterFactory.create_batch(2, owner=owner)
    subscribe(cabinet, topic_id, early)
    publish(sender, topic_id, {"n": 1})
    subscribe(cabinet, topic_id, late)
    publish(sender, topic_id, {"n": 2})

    assert [m["payload"]["n"] for m in receive(adapter_client(early), "?max=10")] == [1, 2]
    assert [m["payload"]["n"] for m in receive(adapter_client(late), "?max=10")] == [2]


def test_only_publishers_publish_and_a_missing_topic_answers_the_same(
    cabinet, topic_id, subscribers
):
    partner = UserFactory.create()
    stranger = AdapterFactory.create(owner=partner)
    client = adapter_client(stranger)

    refused = publish(client, topic_id)
    missing = publish(client, topic_id + 1000)
    cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": stranger.pk})
    granted = publish(client, topic_id)
    cabinet.call("delete", f"{TOPICS}/{topic_id}/publishers/{stranger.pk}")
    revoked = publish(client, topic_id)

    assert refused.status_code == missing.status_code == revoked.status_code == 403
    assert refused.json()["code"] == missing.json()["code"] == "PUBLISH_NOT_ALLOWED"
    assert refused.json()["detail"] == missing.json()["detail"]
    assert granted.status_code == 201
    assert granted.json()["recipients"] == 3
    assert Message.objects.filter(sender=stranger).count() == 3


def test_a_full_queue_refuses_its_copy_not_the_publish(sender, subscribers, topic_id, settings):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 1
    send(sender, subscribers[0])  # fills the first subscriber's queue

    published = publish(sender, topic_id).json()

    assert (published["recipients"], published["refused"]) == (2, 1)
    assert Message.objects.filter(recipient=subscribers[0]).count() == 1


def test_a_publish_is_idempotent_in_the_namespace_of_sends(sender, subscribers, topic_id, adapter):
    first = publish(sender, topic_id, {"n": 1}, HTTP_IDEMPOTENCY_KEY="daily-prices")
    replay = publish(sender, topic_id, {"n": 1}, HTTP_IDEMPOTENCY_KEY="daily-prices")
    changed = publish(sender, topic_id, {"n": 2}, HTTP_IDEMPOTENCY_KEY="daily-prices")
    direct = send(sender, adapter, {"n": 1}, HTTP_IDEMPOTENCY_KEY="daily-prices")
    invalid = publish(sender, topic_id, HTTP_IDEMPOTENCY_KEY="with space")

    assert first.status_code == 201
    assert replay.status_code == 200
    assert replay.json() == {**first.json(), "duplicate": True}
    assert changed.status_code == direct.status_code == 409
    assert changed.json()["code"] == direct.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert invalid.status_code == 400
    assert Message.objects.count() == 3
    assert Publication.objects.count() == 1


def test_a_batch_answers_per_publication(sender, subscribers, topic_id, settings):
    settings.EXCHANGE_MAX_PAYLOAD_BYTES = 1024
    body = {
        "messages": [
            {"type": "a", "payload": 1, "idempotencyKey": "k1"},
            {"type": "a", "payload": "x" * 2000},
            {"type": "a", "payload": 1, "idempotencyKey": "k1"},
            {"type": "a", "to": 5, "payload": 3},
        ]
    }

    response = sender.call("post", f"/api/exchange/topics/{topic_id}/messages/batch", body)

    assert response.status_code == 200, response.content
    sent, too_large, repeat, unknown = response.json()["results"]
    assert sent["status"] == "sent"
    assert sent["recipients"] == 3
    assert sent["refused"] == 0
    assert too_large["status"] == "failed"
    assert too_large["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert repeat == {**sent, "status": "duplicate"}
    assert unknown["error"]["code"] == "UNKNOWN_FIELD"
    assert Message.objects.count() == 3


def test_a_batch_to_a_topic_one_may_not_publish_to_fails_each_message(cabinet, topic_id):
    stranger = AdapterFactory.create(owner=UserFactory.create())
    body = {"messages": [{"type": "a", "payload": 1}, {"type": "b", "payload": 2}]}

    response = adapter_client(stranger).call(
        "post", f"/api/exchange/topics/{topic_id}/messages/batch", body
    )

    assert response.status_code == 200
    assert [r["error"]["code"] for r in response.json()["results"]] == ["PUBLISH_NOT_ALLOWED"] * 2


def test_a_deleted_topics_copies_stay_queued(cabinet, sender, subscribers, topic_id):
    publish(sender, topic_id, {"n": 1})

    cabinet.call("delete", f"{TOPICS}/{topic_id}")

    [copy] = receive(adapter_client(subscribers[0]))
    assert copy["payload"] == {"n": 1}
    assert copy["topicId"] == topic_id
    assert publish(sender, topic_id).status_code == 403


def test_expired_copies_keep_their_payload_and_publications_go_once_no_copy_waits(
    sender, subscribers, topic_id, settings
):
    kept = publish(sender, topic_id, {"n": 1}).json()["publicationId"]
    delivered = publish(sender, topic_id, {"n": 2}).json()["publicationId"]
    for adapter in subscribers:
        client = adapter_client(adapter)
        ack(client, *[m["messageId"] for m in receive(client, "?max=10") if m["payload"]["n"] == 2])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE exchange_publication SET published_at = now() - interval '26 hours'")
    trimmed = queues_trim()

    assert trimmed.publications == 1
    assert list(Publication.objects.values_list("publication_id", flat=True)) == [uuid.UUID(kept)]
    # Past their retention, the waiting copies become dead letters with the payload.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE exchange_message SET enqueued_at = now() - interval '30 days'")
    expire_leases()
    trimmed = queues_trim()

    assert (trimmed.expired, trimmed.publications) == (3, 1)  # the copies first, then it
    assert [d.payload for d in DeadLetter.objects.all()] == [{"n": 1}] * 3
    assert not Publication.objects.exists()
    assert DeliveryLog.objects.filter(publication_id=delivered, payload__isnull=True).count() == 3


def test_four_publishers_and_twenty_subscribers_in_parallel_get_each_copy_once(
    live_server: LiveServer,
):
    owner = UserFactory.create()
    topic = Topic.objects.create(owner=owner, name="prices")
    publishers = AdapterFactory.create_batch(4, owner=owner)
    subscribers = AdapterFactory.create_batch(20, owner=owner)
    Subscription.objects.bulk_create(Subscription(topic=topic, adapter=a) for a in subscribers)
    clients = {}
    for adapter in publishers + subscribers:
        clients[adapter.pk] = LiveClient(live_server, device_id=f"d-{adapter.pk}")
        assert clients[adapter.pk].sign_in(adapter.username).status_code == 200
    start = threading.Barrier(len(clients))
    published: list[str] = []
    received: dict[int, Counter[str]] = {adapter.pk: Counter() for adapter in subscribers}
    errors: list[str] = []

    def publish_all(adapter: User) -> None:
        start.wait()
        try:
            for n in range(5):
                body = {"messages": [{"type": "t", "payload": [n, i]} for i in range(10)]}
                response = clients[adapter.pk].call(
                    "post", f"/api/exchange/topics/{topic.pk}/messages/batch", body
                )
                results = response.json()["results"]
                assert all(r["status"] == "sent" and r["recipients"] == 20 for r in results)
                published.extend(r["publicationId"] for r in results)
        except Exception as error:
            errors.append(repr(error))

    def consume(adapter: User) -> None:
        start.wait()
        client, idle = clients[adapter.pk], 0
        try:
            # Until every copy came, or ten long polls in a row found nothing.
            while sum(received[adapter.pk].values()) < 200 and idle < 10:
                query = "/api/exchange/messages?max=50&waitSeconds=2"
                messages = client.call("get", query).json()["messages"]
                idle = 0 if messages else idle + 1
                for message in messages:
                    received[adapter.pk][message["publicationId"]] += 1
                if messages:
                    ids = [m["messageId"] for m in messages]
                    client.call("post", "/api/exchange/messages/ack", {"messageIds": ids})
        except Exception as error:
            errors.append(repr(error))

    threads = [threading.Thread(target=publish_all, args=(a,)) for a in publishers] + [
        threading.Thread(target=consume, args=(a,)) for a in subscribers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert len(published) == len(set(published)) == 4 * 5 * 10
    for counts in received.values():
        assert set(counts) == set(published)
        assert set(counts.values()) == {1}
    assert not Message.objects.exists()  # nothing more for anyone
    assert DeliveryLog.objects.filter(topic_id=topic.pk).count() == 200 * 20
    assert Publication.objects.filter(topic_id=topic.pk).count() == 200
    for client in clients.values():
        client.close()


def test_a_publish_costs_the_same_statements_whatever_its_subscribers(cabinet, owner):
    """The subscriptions in one statement, the depths counted in one, the publication and its
    copies in one: nothing per subscriber (and, with Redis, one round trip for their places)."""
    publisher = AdapterFactory.create(owner=owner)
    few, many = topic_create(cabinet, "few"), topic_create(cabinet, "many")
    for topic, count in ((few, 2), (many, 20)):
        for adapter in AdapterFactory.create_batch(count, owner=owner):
            subscribe(cabinet, topic, adapter)
    items = [Publishing(type="t", payload=n, headers={}) for n in range(5)]

    def statements(topic: int) -> int:
        with CaptureQueriesContext(connection) as queries:
            outcomes = topic_publish_many(publisher=publisher, topic_id=topic, items=items)
        assert all(isinstance(outcome, Published) for outcome in outcomes)
        return len(queries.captured_queries)

    assert statements(few) == statements(many) <= 3
