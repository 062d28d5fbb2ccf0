"""An adapter's traffic over time (docs/exchange.md, "Traffic over time"): counted by the
statements that move messages, with no statement more; every way into and out of a queue
counted, so the depth drawn at each step is the depth it had; the API's ranges; the minutes' move
to their hours; parallel counting."""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from exchange.models import DeadLetter, Message, TrafficHour, TrafficMinute
from exchange.services.dead_letters import dead_letters_redrive
from exchange.services.messages import messages_ack, messages_receive
from exchange.services.queues import queue_purge, queues_trim
from exchange.services.sending import Outgoing, message_send, messages_send
from exchange.services.traffic import Point, traffic_compact, traffic_points
from exchange.services.webhooks import webhook_put
from exchange.tasks import traffic_compact_task
from exchange.webhooks.delivery import Deliverer
from tests.conftest import ApiClient
from tests.exchange.test_messages_api import ack, expire_leases, receive, send
from tests.exchange.topics import adapter_client, publish, subscribe, topic_create
from tests.factories import AdapterFactory, UserFactory
from tests.receivers import receiver

pytestmark = pytest.mark.django_db

MOVES = ("sent", "received", "acked", "dead_lettered", "refused", "queued", "dropped")


def counted(adapter: User) -> dict[str, int]:
    """Everything counted for the adapter, minutes and hours together."""
    totals = dict.fromkeys(MOVES, 0)
    for model in (TrafficMinute, TrafficHour):
        for row in model.objects.filter(adapter=adapter).values(*MOVES):
            for move in MOVES:
                totals[move] += row[move]
    return totals


def depth_counted(adapter: User) -> int:
    moves = counted(adapter)
    return moves["queued"] - moves["acked"] - moves["dead_lettered"] - moves["dropped"]


def queued_now(adapter: User) -> int:
    return Message.objects.filter(recipient=adapter).count()


def points_of(adapter: User, range_name: str) -> list[Point]:
    return traffic_points(adapter_ids=[adapter.pk], range_name=range_name)[adapter.pk].points


def traffic(cabinet: ApiClient, adapter: User, query: str = "") -> Any:
    return cabinet.call("get", f"/api/users/adapters/{adapter.pk}/traffic{query}")


def test_the_minute_now_shows_what_moved_through_the_api(cabinet, sender, consumer, adapter):
    for n in range(3):
        assert send(sender, adapter, {"n": n}).status_code == 201
    held = receive(consumer, "?max=10")
    ack(consumer, *(message["messageId"] for message in held[:2]))

    answer = traffic(cabinet, adapter).json()
    crm = traffic(cabinet, User.objects.get(username="crm")).json()

    assert (answer["range"], answer["step"], len(answer["points"])) == ("1h", 60, 60)
    assert list(answer["points"][-1]) == [
        "at",
        "sent",
        "received",
        "acked",
        "deadLettered",
        "refused",
        "depth",
    ]

    def total(points: list[dict[str, Any]], figure: str) -> int:
        return sum(point[figure] for point in points)

    assert [total(answer["points"], f) for f in ("sent", "received", "acked")] == [0, 3, 2]
    assert total(crm["points"], "sent") == 3
    assert answer["points"][-1]["depth"] == 1
    assert crm["points"][-1]["depth"] == 0
    # Every figure an integer, as the schema says (not 0.0: sums in SQL are numeric).
    figures = [v for point in answer["points"] for k, v in point.items() if k != "at"]
    assert {type(v) for v in figures} == {int}


@pytest.mark.parametrize(
    ("range_name", "steps", "step"), [("1h", 60, 60), ("24h", 1440, 60), ("7d", 168, 3600)]
)
def test_each_range_has_every_step_each_a_multiple_of_it(cabinet, adapter, range_name, steps, step):
    answer = traffic(cabinet, adapter, f"?range={range_name}").json()

    assert (answer["range"], answer["step"]) == (range_name, step)
    starts = [datetime.fromisoformat(point["at"]) for point in answer["points"]]
    assert len(starts) == steps
    assert all(int(at.timestamp()) % step == 0 for at in starts)
    assert all(
        later - earlier == timedelta(seconds=step) for earlier, later in itertools.pairwise(starts)
    )
    assert timezone.now() - starts[-1] < timedelta(seconds=step + 5)


@pytest.mark.parametrize("query", ["?range=2h", "?range=", "?range=1H", "?since=1h"])
def test_another_range_is_refused(cabinet, adapter, query):
    answer = traffic(cabinet, adapter, query)

    assert answer.status_code == 400
    assert answer.json()["code"] in {"VALIDATION_FAILED", "UNKNOWN_FIELD"}
    if "range" in query:
        assert answer.json()["code"] == "VALIDATION_FAILED"


def test_another_owners_adapter_is_not_found_like_one_that_does_not_exist(cabinet, adapter):
    stranger = AdapterFactory.create(owner=UserFactory.create())

    answers = [traffic(cabinet, other) for other in (stranger, User(pk=10**9))]

    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].json()["code"] == answers[1].json()["code"]


def test_receive_ack_and_send_count_within_their_own_statement(owner, adapter):
    crm = AdapterFactory.create(username="crm", owner=owner)

    def statements(call: Callable[[], Any]) -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            call()
        # A queue's depth is counted in the database only when it was not counted lately
        # (exchange/services/queues.py): not part of every send.
        return [
            q["sql"] for q in captured.captured_queries if "SELECT count(*) FROM (" not in q["sql"]
        ]

    def batch(size: int) -> list[Outgoing]:
        return [
            Outgoing(to=adapter.pk, type="t", payload={"n": n}, headers={}) for n in range(size)
        ]

    def send(size: int) -> None:
        messages_send(sender=crm, messages=batch(size))

    sends = [statements(functools.partial(send, size)) for size in (1, 100)]
    held: list[str] = []

    def take(count: int) -> None:
        held[:] = [
            d.message_id
            for d in messages_receive(
                adapter=adapter, device_key="d:1", max_messages=count, lease_seconds=30
            )
        ]

    receives = [statements(functools.partial(take, count)) for count in (1, 100)]
    acks = statements(lambda: messages_ack(adapter=adapter, device_key="d:1", message_ids=held))

    # The same statements for one message as for a hundred, and none more than before the
    # counting: the routes and the send; one claim; one ACK. Each counts in itself.
    assert [len(sql) for sql in sends] == [2, 2]
    assert [len(sql) for sql in receives] == [1, 1]
    assert len(acks) == 1
    for sql in (sends[0][-1], receives[0][0], acks[0]):
        assert "INSERT INTO exchange_trafficminute" in sql
    assert counted(crm)["sent"] == 101
    assert counted(adapter) == {
        "sent": 0,
        "received": 1 + 100,  # the first comes back first to the device that holds it
        "acked": 100,
        "dead_lettered": 0,
        "refused": 0,
        "queued": 101,
        "dropped": 0,
    }


def test_every_way_into_and_out_of_a_queue_is_counted(
    settings, owner, cabinet, sender, consumer, adapter
):
    """The depth the counts give is the queue's after each kind of move."""
    settings.EXCHANGE_MAX_DELIVERIES = 1
    crm = User.objects.get(username="crm")

    def check() -> None:
        assert depth_counted(adapter) == queued_now(adapter)

    for n in range(4):
        send(sender, adapter, {"n": n})
    sender.call(
        "post",
        "/api/exchange/messages/batch",
        {"messages": [{"to": adapter.pk, "type": "t", "payload": n} for n in range(3)]},
    )
    check()
    topic_id = topic_create(cabinet)
    assert subscribe(cabinet, topic_id, adapter).status_code == 201
    assert publish(adapter_client(crm), topic_id).status_code == 201
    check()
    held = receive(consumer, "?max=3")
    ack(consumer, held[0]["messageId"])
    check()
    expire_leases()
    receive(consumer, "?max=3")  # delivered once already: to the dead letters
    check()
    dead = list(DeadLetter.objects.filter(recipient=adapter).values_list("message_id", flat=True))
    assert len(dead) == 2
    assert dead_letters_redrive(owner=owner, message_ids=dead[:1]) == dead[:1]
    check()
    expire_leases()
    Message.objects.filter(recipient=adapter).update(
        enqueued_at=timezone.now() - timedelta(days=365)
    )
    newest = Message.objects.filter(recipient=adapter).order_by("-seq").values("pk")[:2]
    Message.objects.filter(pk__in=newest).update(enqueued_at=timezone.now())
    assert queues_trim().expired == 4
    check()
    assert queue_purge(adapter=adapter, actor=owner) == 2
    check()

    assert queued_now(adapter) == 0
    moves = counted(adapter)
    assert (moves["received"], moves["acked"], moves["dead_lettered"], moves["dropped"]) == (
        4,
        1,
        2 + 4,
        2,
    )
    assert counted(crm)["sent"] == 7 + 1  # the publication once


def test_sends_a_full_queue_refused_are_the_senders(settings, sender, adapter):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 1

    codes = [send(sender, adapter, {"n": n}).status_code for n in range(3)]

    assert codes == [201, 429, 429]
    assert counted(User.objects.get(username="crm"))["refused"] == 2
    assert counted(adapter)["refused"] == 0


def minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def test_the_depth_at_each_step_is_now_less_what_moved_after_it(adapter):
    for n in range(2):  # queued without being counted: the depth now is what there is
        Message.objects.create(recipient=adapter, type="t", payload={"n": n})
    now = minute(timezone.now())
    rows = {
        now - timedelta(minutes=5): {"queued": 10},
        now - timedelta(minutes=3): {"acked": 4, "dead_lettered": 1},
        now - timedelta(minutes=1): {"dropped": 3},
    }
    for at, moves in rows.items():
        TrafficMinute.objects.create(adapter=adapter, at=at, shard=0, **moves)

    points = points_of(adapter, "1h")

    def moved_after(at: datetime) -> int:
        return sum(
            moves.get("queued", 0)
            - moves.get("acked", 0)
            - moves.get("dead_lettered", 0)
            - moves.get("dropped", 0)
            for when, moves in rows.items()
            if when > at
        )

    assert [p.depth for p in points] == [max(0, 2 - moved_after(p.at)) for p in points]
    by_minute = {p.at: p.depth for p in points}
    assert by_minute[now - timedelta(minutes=5)] == 10
    assert by_minute[now - timedelta(minutes=6)] == 0
    assert points[-1].depth == 2


def test_minutes_move_to_their_hours_and_the_week_reads_the_same(adapter):
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    old = hour - timedelta(hours=50)
    for shard, minutes in ((0, 5), (3, 40)):
        TrafficMinute.objects.create(
            adapter=adapter, at=old + timedelta(minutes=minutes), shard=shard, sent=2, acked=1
        )
    TrafficMinute.objects.create(adapter=adapter, at=hour - timedelta(hours=2), shard=1, received=7)
    TrafficHour.objects.create(adapter=adapter, at=old, sent=1)  # an earlier move of this hour
    TrafficHour.objects.create(adapter=adapter, at=hour - timedelta(days=91), sent=9)
    before = points_of(adapter, "7d")

    compacted = traffic_compact(now=now)

    assert (compacted.minutes, compacted.hours) == (2, 1)
    assert points_of(adapter, "7d") == before
    assert TrafficHour.objects.get(adapter=adapter, at=old).sent == 1 + 2 + 2
    assert TrafficMinute.objects.filter(adapter=adapter).count() == 1
    by_hour = {p.at: p for p in before}
    assert (by_hour[old].sent, by_hour[old].acked) == (5, 2)
    assert by_hour[hour - timedelta(hours=2)].received == 7
    assert traffic_compact(now=now) == type(compacted)(minutes=0, hours=0)
    assert traffic_compact_task.delay().get() == {"minutes": 0, "hours": 0}  # Celery beat's


@pytest.mark.django_db(transaction=True)
def test_a_webhook_push_counts_as_received_and_its_2xx_as_acked(settings, owner, adapter):
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = True
    crm = AdapterFactory.create(username="crm", owner=owner)
    with receiver() as endpoint:
        webhook_put(adapter=adapter, url=endpoint.url, enabled=True)
        for n in range(2):
            message_send(
                sender=crm,
                to=adapter.pk,
                type="t",
                payload={"n": n},
                headers={},
                idempotency_key=None,
            )

        outcomes = asyncio.run(Deliverer().deliver_once())

    assert [o.outcome for o in outcomes] == ["delivered"] * 2
    assert (counted(adapter)["received"], counted(adapter)["acked"]) == (2, 2)
    assert depth_counted(adapter) == queued_now(adapter) == 0


@pytest.mark.django_db(transaction=True)
def test_parallel_sends_both_ways_lose_no_count_and_never_deadlock(owner):
    first, second = AdapterFactory.create_batch(2, owner=owner)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def sends(sender: User, recipient: User) -> None:
        try:
            start.wait()
            for n in range(25):
                messages_send(
                    sender=sender,
                    messages=[
                        Outgoing(to=recipient.pk, type="t", payload=n, headers={}),
                        Outgoing(to=sender.pk, type="t", payload=n, headers={}),
                    ],
                )
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=sends, args=pair) for pair in ((first, second), (second, first)) * 2
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    for adapter in (first, second):
        assert counted(adapter)["sent"] == 2 * 25 * 2
        assert counted(adapter)["queued"] == 2 * 25 * 2 == queued_now(adapter)


def test_points_start_at_the_steps_of_utc(adapter):
    [*_, last] = points_of(adapter, "7d")

    assert last.at.tzinfo is not None
    assert last.at.astimezone(UTC).minute == 0


def test_the_points_of_several_adapters_are_read_in_one_statement_each_its_own(owner, adapter):
    others = AdapterFactory.create_batch(2, owner=owner)
    now = minute(timezone.now())
    TrafficMinute.objects.create(adapter=others[0], at=now, shard=0, sent=4)
    Message.objects.create(recipient=others[1], type="t", payload={})

    with CaptureQueriesContext(connection) as captured:
        traffic = traffic_points(adapter_ids=[adapter.pk, *(o.pk for o in others)], range_name="1h")

    assert len(captured.captured_queries) == 1
    assert [sum(p.sent for p in traffic[a.pk].points) for a in (adapter, *others)] == [0, 4, 0]
    assert [traffic[a.pk].points[-1].depth for a in (adapter, *others)] == [0, 0, 1]
    assert all(len(traffic[a.pk].points) == 60 for a in (adapter, *others))


def test_a_minutes_rows_leave_room_on_their_pages_for_their_updates():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'exchange_trafficminute'")
        [(options,)] = cursor.fetchall()

    assert options == ["fillfactor=50"]
