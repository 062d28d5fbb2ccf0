"""Bounded queues: a depth limit per recipient (429 QUEUE_FULL), expiry of messages nobody
received, dead letters dropped when old, and the owner's purge in the API and the cabinet."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_redis import get_redis_connection
from prometheus_client import REGISTRY

from accounts.models import AuditEvent, User
from exchange.models import DeadLetter, Message
from exchange.services import queues
from exchange.services.queues import DEPTH_SECONDS, _depth_key, _reserve_all, queues_trim
from tests.conftest import ApiClient
from tests.exchange.test_messages_api import ack, receive, send
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


def counted(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def queued(adapter: User, count: int, *, days_old: int = 0) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO exchange_message (message_id, recipient_id, type, payload, headers, "
            "receive_count, enqueued_at) SELECT gen_random_uuid(), %s, 'stock', "
            "jsonb_build_object('n', n), '{}', 0, now() - make_interval(days => %s) "
            "FROM generate_series(1, %s) AS n RETURNING message_id",
            [adapter.pk, days_old, count],
        )
        return [str(row[0]) for row in cursor.fetchall()]


def test_a_send_beyond_the_depth_limit_is_429_queue_full_with_retry_after(
    settings, sender, adapter
):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 3
    before = counted("platform_exchange_sends_refused_total", {"reason": "queue_full"})

    answers = [send(sender, adapter, {"n": n}) for n in range(4)]

    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    refused = answers[3]
    assert refused["Content-Type"] == "application/problem+json"
    assert (refused.json()["code"], refused.json()["retryAfterSeconds"]) == ("QUEUE_FULL", 5)
    assert refused["Retry-After"] == "5"
    assert Message.objects.filter(recipient=adapter).count() == 3
    after = counted("platform_exchange_sends_refused_total", {"reason": "queue_full"})
    assert after == before + 1


def test_the_limit_counts_messages_already_queued_and_every_recipient_apart(
    settings, sender, adapter, owner
):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 5
    queued(adapter, 5)
    other = AdapterFactory.create(owner=owner)

    assert send(sender, adapter).json()["code"] == "QUEUE_FULL"
    assert send(sender, other).status_code == 201


def test_a_replay_of_a_queued_message_is_a_duplicate_even_when_the_queue_is_full(
    settings, sender, adapter
):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 1
    first = send(sender, adapter, HTTP_IDEMPOTENCY_KEY="k-1")

    replay = send(sender, adapter, HTTP_IDEMPOTENCY_KEY="k-1")
    other = send(sender, adapter, {"n": 2}, HTTP_IDEMPOTENCY_KEY="k-2")

    assert (replay.status_code, replay.json()["duplicate"]) == (200, True)
    assert replay.json()["messageId"] == first.json()["messageId"]
    assert other.json()["code"] == "QUEUE_FULL"


def test_a_refused_send_claims_no_idempotency_key(settings, sender, adapter):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 1
    send(sender, adapter)
    assert send(sender, adapter, {"n": 2}, HTTP_IDEMPOTENCY_KEY="later").status_code == 429
    Message.objects.all().delete()
    cache.clear()  # the next counting, as DEPTH_SECONDS later

    again = send(sender, adapter, {"n": 2}, HTTP_IDEMPOTENCY_KEY="later")

    assert again.status_code == 201  # a new message, not a duplicate of the refused one


def test_sends_between_two_countings_count_themselves_instead_of_the_database(
    settings, sender, adapter
):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 3
    send(sender, adapter)  # counted (0), then one more

    with CaptureQueriesContext(connection) as queries_run:
        answers = [send(sender, adapter, {"n": n}) for n in range(3)]

    assert [a.status_code for a in answers] == [201, 201, 429]
    assert not [q for q in queries_run.captured_queries if "AS queued" in q["sql"]]


def test_the_owner_purges_an_adapters_queue_in_the_api_and_it_is_audited(
    cabinet, consumer, owner, adapter
):
    queued(adapter, 3)
    [held] = receive(consumer)  # a leased message is purged too
    DeadLetter.objects.create(
        message_id="5d0c0de0-0000-4000-8000-000000000001",
        recipient=adapter,
        type="t",
        payload={},
        enqueued_at=timezone.now(),
        receive_count=10,
        reason="MAX_DELIVERIES",
    )
    before = counted("platform_exchange_messages_purged_total")

    response = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/purge")

    assert (response.status_code, response.json()) == (200, {"purged": 3})
    assert not Message.objects.filter(recipient=adapter).exists()
    assert DeadLetter.objects.filter(recipient=adapter).count() == 1  # dead letters stay
    assert ack(consumer, held["messageId"]) == {held["messageId"]: "notFound"}
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUEUE_PURGED)
    assert (event.user, event.actor, event.details) == (adapter, owner, {"purged": 3})
    assert counted("platform_exchange_messages_purged_total") == before + 3


def test_a_purge_runs_in_batches(cabinet, adapter, monkeypatch):
    monkeypatch.setattr(queues, "BATCH", 2)
    queued(adapter, 5)

    response = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/purge")

    assert response.json() == {"purged": 5}


def test_a_full_queue_takes_sends_again_once_purged(settings, cabinet, sender, adapter):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 2
    queued(adapter, 2)
    assert send(sender, adapter).status_code == 429

    cabinet.call("post", f"/api/users/adapters/{adapter.pk}/purge")

    assert send(sender, adapter).status_code == 201


@pytest.mark.parametrize("who", ["stranger", "adapter"])
def test_nobody_but_the_owner_purges(who, consumer, adapter):
    queued(adapter, 1)
    if who == "stranger":
        UserFactory.create(username="mallory", email="mallory@example.com")
        client = ApiClient(device_id="m-1")
        signed = client.call(
            "post",
            "/api/auth/login/email",
            {"email": "mallory@example.com", "password": DEFAULT_PASSWORD},
        )
        client.tokens = signed.json()
        expected = 404
    else:
        client, expected = consumer, 403

    response = client.call("post", f"/api/users/adapters/{adapter.pk}/purge")

    assert response.status_code == expected
    assert Message.objects.filter(recipient=adapter).count() == 1


def cabinet_browser(owner: User) -> Client:
    browser = Client()
    response = browser.post("/login", {"login": owner.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302, response.content
    return browser


def test_the_cabinet_asks_before_it_purges_then_purges(owner, adapter):
    owner.phone = "+4915123456789"
    owner.save()
    queued(adapter, 2)
    browser = cabinet_browser(owner)

    bus = browser.get("/bus").content.decode()
    asked = browser.get(f"/bus/adapters/{adapter.pk}/purge")
    untouched = Message.objects.filter(recipient=adapter).count()
    done = browser.post(f"/bus/adapters/{adapter.pk}/purge", follow=True)

    assert f'href="/bus/adapters/{adapter.pk}/purge"' in bus
    assert asked.status_code == 200
    text = re.sub(r"\s+", " ", asked.content.decode())
    assert "2 messages waiting for this adapter will be deleted" in text
    assert untouched == 2  # asking deleted nothing
    assert "2 messages waiting for erp are deleted." in done.content.decode()
    assert not Message.objects.filter(recipient=adapter).exists()


def test_bus_shows_the_limit_a_full_queue_and_why_letters_are_dead(settings, owner, adapter):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 2
    owner.phone = "+4915123456789"
    owner.save()
    queued(adapter, 2)
    queued(adapter, 1, days_old=30)
    queues_trim()

    page = re.sub(r"\s+", " ", cabinet_browser(owner).get("/bus").content.decode())

    assert 'data-figure="limit">2 / 2</dd>' in page
    assert 'data-badge="full"' in page
    assert 'data-reason="EXPIRED">expired unreceived</td>' in page


def test_trimming_moves_messages_nobody_received_in_time_to_the_dead_letters(
    settings, consumer, adapter
):
    settings.EXCHANGE_MESSAGE_RETENTION_DAYS = 14
    old = queued(adapter, 3, days_old=15)
    fresh = queued(adapter, 1)
    Message.objects.filter(message_id=old[0]).update(
        visible_at=timezone.now() + timedelta(minutes=5),
        lease_token="6f2d6d2b-0000-4000-8000-000000000001",
        leased_by="d:someone",
    )  # leased right now: it stays until its lease ends
    before = counted("platform_exchange_messages_expired_total")

    trimmed = queues_trim()

    assert trimmed.expired == 2
    left = {str(m) for m in Message.objects.values_list("message_id", flat=True)}
    assert left == {old[0], fresh[0]}
    dead = DeadLetter.objects.filter(reason="EXPIRED")
    assert {str(d.message_id) for d in dead} == set(old[1:])
    assert counted("platform_exchange_messages_expired_total") == before + 2


def test_trimming_drops_dead_letters_older_than_their_days_in_batches(
    settings, adapter, monkeypatch
):
    settings.EXCHANGE_DEAD_LETTER_DAYS = 30
    monkeypatch.setattr(queues, "BATCH", 2)
    now = timezone.now()
    for n, days in enumerate([31, 40, 45, 10]):
        DeadLetter.objects.create(
            message_id=f"5d0c0de0-0000-4000-8000-00000000000{n}",
            recipient=adapter,
            type="t",
            payload={},
            enqueued_at=now,
            receive_count=10,
            reason="MAX_DELIVERIES",
            dead_at=now - timedelta(days=days),
        )

    trimmed = queues_trim()

    assert trimmed.dropped == 3
    assert [str(d) for d in DeadLetter.objects.values_list("message_id", flat=True)] == [
        "5d0c0de0-0000-4000-8000-000000000003"
    ]


def test_trimming_runs_from_celery_beat(settings):
    entry: dict[str, Any] = settings.CELERY_BEAT_SCHEDULE["queues-trim"]

    assert entry["task"] == "exchange.queues_trim"


@pytest.mark.django_db(transaction=True)
def test_parallel_sends_never_take_more_places_than_the_limit(settings, owner, adapter):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 5
    AdapterFactory.create(username="crm", owner=owner)
    senders = [ApiClient(device_id=f"crm-{n}") for n in range(10)]
    for client in senders:
        assert client.sign_in("crm").status_code == 200
    queued(adapter, 1)  # counted once, before the race
    assert send(senders[0], adapter).status_code == 201
    barrier = threading.Barrier(len(senders))

    def race(client: ApiClient) -> int:
        barrier.wait()
        try:
            return int(send(client, adapter).status_code)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(senders)) as pool:
        statuses = list(pool.map(race, senders))

    assert sorted(statuses) == [201] * 3 + [429] * 7
    assert Message.objects.filter(recipient=adapter).count() == 5


def test_the_depths_reserved_in_one_round_trip_are_the_caches_counts(settings):
    # A publication reserves its subscribers' places in one Lua script on the keys and integers
    # the cache writes (queues._reserve_all): django-redis's make_key and its raw integers.
    assert settings.REDIS_URL, "the exchange's tests run with Redis"
    counted, uncounted = 10**9 + 1, 10**9 + 2
    cache.add(_depth_key(counted), 5, 60)

    reserved = _reserve_all({counted: 2, uncounted: 3})
    first_counting = _reserve_all({uncounted: 3}, {uncounted: 10})
    second_counting = _reserve_all({uncounted: 1}, {uncounted: 99})  # set already: taken as is

    assert reserved == {counted: 7, uncounted: None}
    assert cache.get(_depth_key(counted)) == 7
    assert first_counting == {uncounted: 13}
    assert second_counting == {uncounted: 14}
    cache.decr(_depth_key(uncounted), 4)
    assert cache.get(_depth_key(uncounted)) == 10
    ttl = get_redis_connection("default").ttl(cache.make_key(_depth_key(uncounted)))
    assert 0 < ttl <= DEPTH_SECONDS
