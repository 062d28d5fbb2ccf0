"""(m)'s turns: one publisher and N subscribers, on the API's topics or on RabbitMQ's fanout
(``topic_rabbitmq``), each side's processes forked for the turn and the bytes its servers wrote
counted around it (``topic_written``). ``topic_figures`` puts the turns together into rows.

The API's side: the publisher posts BATCH publications per ``POST .../topics/{id}/messages/batch``
(http.client, one keep-alive connection, as (g)'s producers); each subscriber is an adapter with
a session of its own (``waiting.waiters_create``) on a keep-alive connection of its own
(``waiting.Connection``, asyncio: several subscribers to a process), waiting in a long poll for
its first copies, then acknowledging each batch with an ACK that receives the next 100 in the same
request, waiting for them as the long poll does: the loop of the adapters' client (its
``consume()`` polling), one request per batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.queues import SimpleQueue
from typing import Any

import psycopg

from bench.throughput.api import call, caller_of
from bench.throughput.autovacuum import autovacuum_stand_in
from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.servers import Client, Server, manage
from bench.throughput.topic_written import WalRecords, io_since, wal_kept, wal_records, written_now
from bench.throughput.waiting import Connection, Waiter, waiters_create

BATCH = 100  # publications per publish call or per confirm wait; copies per receive and ACK
PAYLOAD_BYTES = 1024
STALL_SECONDS = 30.0  # a subscriber gives up once nothing has come for this long
CONNECT_SECONDS = 2.0  # from the fork to the first publish: the subscribers connect and wait
TAIL_SECONDS = 1.0  # after the last ACK, before the bytes written are read: writes behind
WAIT_SECONDS = 5
LONG_POLL = f"/api/exchange/messages?max={BATCH}&waitSeconds={WAIT_SECONDS}"
ACK = "/api/exchange/messages/ack"
TOPICS_CODE = """
import json
from accounts.models import User
from exchange.services.topics import subscription_put, topic_create
owner = User.objects.get(username="bench-owner")
made = {{}}
for name, adapters in {topics!r}.items():
    topic = topic_create(owner=owner, name=name)
    for adapter in adapters:
        subscription_put(user=owner, topic=topic, adapter_id=adapter, types=None)
    made[name] = topic.pk
print("BENCH " + json.dumps(made))
"""


def topic_payload(sent_at: float, number: int) -> bytes:
    """PAYLOAD_BYTES of JSON, the same on both sides: when its publish began, its number, and a
    body that pads it to size."""
    head = f'{{"sentAt":{sent_at!r},"n":{number},"body":"'
    return (head + "x" * (PAYLOAD_BYTES - len(head) - 2) + '"}').encode()


@dataclass
class Part:
    """What one process of a turn did: its publisher, or its subscribers."""

    expected: int = 0  # publications to publish, or copies to acknowledge
    count: int = 0  # publications confirmed, or copies acknowledged
    first: float = 0.0  # the first publish's start (monotonic; a publisher's)
    last: float = 0.0  # the last confirm, or the last ACK
    requests: int = 0  # publish calls (confirm waits), or receives and ACKs (acks)
    refused: int = 0  # the API's: copies not queued (a full queue)
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)  # publish -> ACK, a subscriber's
    cpu: float = 0.0  # seconds, user and system, from the start
    error: str = ""  # an exception: the run stops with it


Work = Callable[[float], Part]  # a process's work, given the monotonic time the turn starts


# --- Setting up -----------------------------------------------------------------------------------


def subscribers_create(
    bench_url: str, counts: Sequence[int]
) -> tuple[list[Waiter], dict[int, int]]:
    """max(counts) adapters of the bench's owner, each with a session of its own, and a topic of
    that owner per count, subscribed by as many of them (of every type): its id by count. The
    bench's sender, the owner's adapter, may publish to them without a grant."""
    waiters = waiters_create(bench_url, max(counts), device="topic")
    topics = {f"bench-m{n}": [w.adapter_id for w in waiters[:n]] for n in counts}
    out = manage(bench_url, "shell", "-c", TOPICS_CODE.format(topics=topics))
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    made = json.loads(line[6:])
    return waiters, {n: int(made[f"bench-m{n}"]) for n in counts}


# --- The API's side -------------------------------------------------------------------------------


def api_publisher(
    server: Server, sender: Client, topic: int, publications: int, start: float
) -> Part:
    part = Part(expected=publications)
    caller = caller_of(server, sender)
    connection = caller.connect()
    headers = caller.headers(body=True)
    path = f"/api/exchange/topics/{topic}/messages/batch"
    time.sleep(max(0.0, start - time.monotonic()))
    cpu_from = time.process_time()
    part.first = time.monotonic()
    for first in range(0, publications, BATCH):
        now = time.monotonic()
        size = min(BATCH, publications - first)
        items = [
            b'{"type":"bench","payload":%s}' % topic_payload(now, number)
            for number in range(first, first + size)
        ]
        body = b'{"messages":[' + b",".join(items) + b"]}"
        status, answer = call(connection, "POST", path, headers, body)
        part.requests += 1
        part.last = time.monotonic()
        results = json.loads(answer)["results"] if status == 200 else []
        sent = [result for result in results if result["status"] == "sent"]
        part.count += len(sent)
        part.refused += sum(result["refused"] for result in sent)
        if len(sent) < size:
            part.errors[f"publish {status}"] += size - len(sent)
    part.cpu = time.process_time() - cpu_from
    connection.close()
    return part


def api_subscribers(server: Server, waiters: list[Waiter], expected: int, start: float) -> Part:
    """``waiters`` subscribing at once on one event loop, each until it has acknowledged
    ``expected`` copies or nothing has come for STALL_SECONDS."""
    part = Part(expected=expected * len(waiters))
    cpu_from = time.process_time()

    async def subscribe(waiter: Waiter) -> None:
        connection = Connection(*server.address, waiter.headers())
        acked, progress_at = 0, time.monotonic()
        pending: list[dict[str, Any]] = []
        try:
            while acked < expected and time.monotonic() - progress_at < STALL_SECONDS:
                if not pending:
                    status, content = await connection.request("GET", LONG_POLL)
                else:
                    body: dict[str, Any] = {"messageIds": [m["messageId"] for m in pending]}
                    if acked + len(pending) < expected:  # the last ACK waits for nothing
                        body["receive"] = {"max": BATCH, "waitSeconds": WAIT_SECONDS}
                    status, content = await connection.request("POST", ACK, body)
                acked_at = time.monotonic()
                part.requests += 1
                answer = json.loads(content) if status == 200 else {}
                if status != 200:  # the same call again, a moment later
                    part.errors[f"{'ACK' if pending else 'receive'} {status}"] += 1
                    await asyncio.sleep(0.1)
                    continue
                if pending:
                    done = sum(r["status"] == "acked" for r in answer["results"])
                    acked += done
                    part.count += done
                    part.last = progress_at = acked_at
                    part.latencies_ms.extend(
                        1000.0 * (acked_at - m["payload"]["sentAt"]) for m in pending
                    )
                pending = answer.get("messages", [])
        finally:
            connection.close()

    async def all_of_them() -> None:
        await asyncio.gather(*(subscribe(waiter) for waiter in waiters))

    asyncio.run(all_of_them())
    part.cpu = time.process_time() - cpu_from
    return part


# --- A turn ---------------------------------------------------------------------------------------


@dataclass
class Turn:
    side: str  # "api" or "rabbitmq"
    subscribers: int
    publications: int  # confirmed
    copies: int  # acknowledged
    expected: int  # copies the subscribers were to acknowledge
    seconds: float  # from the first publish to the last ACK
    publish_seconds: float  # from the first publish to the last confirm
    requests: int  # the subscribers' receives and ACKs (RabbitMQ: acks)
    refused: int
    errors: Counter[str]
    latencies_ms: list[float]
    cpu: CpuShare
    meter_seconds: float  # the CPU shares' window
    client_cpu: float  # seconds, publisher and subscribers
    wal: int  # bytes, the whole server's
    records: WalRecords | None  # the WAL's records by relation (pg_walinspect), where readable
    records_note: str  # why they were not
    pg_written: int | None  # write_bytes of PostgreSQL's processes counted
    beam_written: int | None  # write_bytes of beam.smp, None where unreadable
    vacuums: int = 0  # VACUUMs of the hot table by the autovacuum stand-in during the turn
    before: float = 0.0  # the machine's CPU just before the turn, % of a core

    @property
    def written(self) -> int | None:
        """Bytes written for the turn: the WAL on the API's side, beam.smp's on RabbitMQ's."""
        return self.wal if self.side == "api" else self.beam_written


def turn_run(
    database_url: str,
    server: Server,
    side: str,
    subscribers: int,
    publisher: Work,
    groups: Sequence[Work],
) -> Turn:
    """Fork the publisher and the subscribers' processes, start them CONNECT_SECONDS later, and
    wait for all of them; the CPU of every party from the start to the last process's end, and
    the bytes written from the start to TAIL_SECONDS after it."""
    context = multiprocessing.get_context("fork")
    results: SimpleQueue[tuple[int, Part]] = context.SimpleQueue()
    start = time.monotonic() + CONNECT_SECONDS
    processes = [
        context.Process(target=_work, args=(work, start, index, results))
        for index, work in enumerate([publisher, *groups])
    ]
    # Our side's churn is vacuumed as production's autovacuum would (autovacuum.py).
    stand_in = autovacuum_stand_in(database_url) if side == "api" else contextlib.nullcontext([0])
    connected = psycopg.connect(database_url, autocommit=True)
    with connected as conn, wal_kept(conn), stand_in as vacuums:
        for process in processes:
            process.start()
        time.sleep(max(0.0, start - 0.05 - time.monotonic()))
        before = written_now(conn, server)
        meter, metered_from = CpuMeter(server, background=True), time.monotonic()
        indexed = sorted((results.get() for _ in processes), key=lambda pair: pair[0])
        parts = [part for _, part in indexed]
        client_cpu = sum(part.cpu for part in parts)
        cpu = meter.read(client_cpu=client_cpu)
        meter_seconds = time.monotonic() - metered_from
        for process in processes:
            process.join()
        if failures := [part.error for part in parts if part.error]:
            raise SystemExit("(m): a process of the turn failed: " + "; ".join(failures))
        time.sleep(TAIL_SECONDS)
        after = written_now(conn, server)
        lsns = [after.wal_lsn, before.wal_lsn]
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", lsns
        ).fetchone()
        records = wal_records(conn, before.wal_lsn, after.wal_lsn) if side == "api" else ""
    pub, subs = parts[0], parts[1:]
    return Turn(
        side=side,
        subscribers=subscribers,
        publications=pub.count,
        copies=sum(part.count for part in subs),
        expected=sum(part.expected for part in subs),
        seconds=max(part.last for part in parts) - pub.first,
        publish_seconds=pub.last - pub.first,
        requests=sum(part.requests for part in subs),
        refused=pub.refused,
        errors=sum((part.errors for part in parts), Counter()),
        latencies_ms=[value for part in subs for value in part.latencies_ms],
        cpu=cpu,
        meter_seconds=meter_seconds,
        client_cpu=client_cpu,
        wal=int(row[0]) if row else 0,
        records=records if isinstance(records, WalRecords) else None,
        records_note=records if isinstance(records, str) else "",
        pg_written=io_since(before.pg_io, after.pg_io),
        beam_written=io_since(before.beam_io, after.beam_io),
        vacuums=vacuums[0],
    )


def _work(work: Work, start: float, index: int, results: SimpleQueue[tuple[int, Part]]) -> None:
    try:
        part = work(start)
    except Exception as error:  # handed to the parent, which stops the run with it
        part = Part(error=f"{type(error).__name__}: {error}")
    results.put((index, part))
