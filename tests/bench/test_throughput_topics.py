"""The exchange benchmark's (m), topics beside a RabbitMQ fanout: the payload both sides carry,
how a phase is sized, how turns add up into rows against RabbitMQ's, how bytes written are counted,
and RabbitMQ's side of a turn at a tiny size against the machine's RabbitMQ."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
from django.db import connection

from bench.throughput.autovacuum import autovacuum_stand_in
from bench.throughput.machine import CpuShare
from bench.throughput.rabbitmq import DEFAULT_URL, broker_of
from bench.throughput.topic_figures import (
    copies_rate,
    cpu_of,
    phase_rows,
    publications_of,
    publications_rate,
    written_per_publication,
)
from bench.throughput.topic_rabbitmq import (
    fanout_declared,
    fanout_purge,
    rabbitmq_publisher,
    rabbitmq_subscribers,
)
from bench.throughput.topic_runs import PAYLOAD_BYTES, Turn, topic_payload
from bench.throughput.topic_written import io_since
from tests.factories import AdapterFactory, UserFactory
from tests.stack.conftest import wait_until


def turn(side: str, *, copies: int, seconds: float, written: int | None, cpu: float) -> Turn:
    return Turn(
        side=side,
        subscribers=100,
        publications=copies // 100,
        copies=copies,
        expected=copies,
        seconds=seconds,
        publish_seconds=seconds / 4,
        requests=copies // 100,
        refused=0,
        errors=Counter(),
        latencies_ms=[10.0, 20.0, 30.0],
        cpu=CpuShare(server=cpu, rabbitmq=cpu),
        meter_seconds=seconds,
        client_cpu=0.0,
        wal=written or 0,
        records=None,
        records_note="",
        pg_written=written,
        beam_written=written,
    )


def test_the_payload_is_1024_bytes_of_json_stamped_with_its_publish_time() -> None:
    payload = topic_payload(12345.678901, 42)

    assert len(payload) == PAYLOAD_BYTES
    assert json.loads(payload)["sentAt"] == 12345.678901
    assert json.loads(payload)["n"] == 42


def test_a_phase_publishes_whole_batches_scaled_with_the_plans_duration() -> None:
    assert publications_of(12.0, 10) == 3_000
    assert publications_of(12.0, 100) == 500
    assert publications_of(5.0, 100) == 200
    assert publications_of(0.5, 100) == 100


def test_turns_add_up_and_the_100_subscriber_row_is_held_to_rabbitmqs_copies() -> None:
    ours = [
        turn("api", copies=20_000, seconds=4.0, written=2_000_000, cpu=150.0),
        turn("api", copies=30_000, seconds=6.0, written=3_000_000, cpu=170.0),
    ]
    theirs = [turn("rabbitmq", copies=50_000, seconds=5.0, written=4_000_000, cpu=60.0)]

    rows = phase_rows(100, ours, theirs)

    assert copies_rate(ours) == 5_000.0
    assert publications_rate(ours) == 500 / 2.5
    assert written_per_publication(ours) == 10_000.0
    assert cpu_of(ours).server == pytest.approx(162.0)
    assert [(row.key, row.figure, row.ratio, row.verdict) for row in rows] == [
        ("(m)100mq", "400", "baseline", ""),
        ("(m)100", "200", "0.50 x (m)100mq", ""),
        ("(m)100mq", "10,000", "baseline", ""),
        ("(m)100", "5,000", "0.50 x (m)100mq", "FAIL"),
        ("(m)100mq", "8,000", "baseline", ""),
        ("(m)100", "10,000", "1.25 x (m)100mq", ""),
        ("(m)100", "10,000", "1.25 x (m)100mq", ""),
    ]


def test_the_10_subscriber_rows_have_no_target_and_unread_bytes_say_so() -> None:
    ours = [turn("api", copies=10_000, seconds=1.0, written=1_000_000, cpu=100.0)]
    theirs = [turn("rabbitmq", copies=10_000, seconds=2.0, written=None, cpu=50.0)]

    rows = phase_rows(10, ours, theirs)

    assert all(row.target == "" for row in rows)
    assert (rows[4].figure, rows[4].ratio) == ("unread", "/proc/<beam.smp>/io unreadable")
    assert rows[5].ratio == ""


def test_bytes_written_count_new_processes_whole_and_nothing_read_is_unknown() -> None:
    assert io_since({1: 100, 2: 50}, {1: 400, 3: 70}) == 370
    assert io_since({1: 100}, {}) is None


@pytest.mark.stack
def test_rabbitmqs_side_delivers_each_publication_to_every_queue_once() -> None:
    broker = broker_of(DEFAULT_URL, f"bench-test-{uuid.uuid4().hex[:8]}")

    with fanout_declared(broker, 3) as fanout:
        start = time.monotonic()
        published = rabbitmq_publisher(broker, fanout, 5, start)
        delivered = rabbitmq_subscribers(broker, fanout.queues, 5, start)
        left = fanout_purge(broker, fanout)

    assert (published.count, published.requests, published.errors) == (5, 1, Counter())
    assert (delivered.count, delivered.expected, left) == (15, 15, 0)
    assert len(delivered.latencies_ms) == 15
    assert delivered.last >= published.last


def test_the_autovacuum_stand_in_vacuums_the_hot_table_past_its_threshold(transactional_db):
    url = database_url()
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        [(autovacuum,)] = cursor.fetchall()
        cursor.execute(
            "INSERT INTO exchange_message (message_id, recipient_id, type, payload, headers, "
            "receive_count) SELECT gen_random_uuid(), %s, 't', '1', '{}', 0 "
            "FROM generate_series(1, 1500)",
            [AdapterFactory.create(owner=UserFactory.create()).pk],
        )
        cursor.execute("DELETE FROM exchange_message")  # 1,500 dead rows, past 0002's 1,000

    with autovacuum_stand_in(url) as vacuums:
        if autovacuum == "off":
            wait_until(lambda: vacuums[0] > 0, timeout=20, what="the stand-in's VACUUM")

    if autovacuum == "on":  # the server's own does the work: the stand-in does nothing
        assert vacuums == [0]
    else:
        assert vacuums[0] >= 1


def database_url() -> str:
    settings = connection.settings_dict
    return (
        f"postgresql://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    )
