"""The figures (g) and (h): the exchange API beside RabbitMQ, in one run, in turns.

(g) sending only: producers, one message per call and batches of 100 (the target: a batch send
    carries at least 10 times the messages a second of single sends);
(h) end to end: as many consumers as producers at once, receiving and acknowledging one message
    per call while the producers send one per call, and 100 per call while they send 100 (the
    target: at least half of RabbitMQ's ACKed messages a second at batch 100).

Both sides do the same work with clients of the same kind, Python processes (``api``,
``rabbitmq``), each on one queue: a consumer adapter's, received from by as many instances
(X-Device-IDs) as RabbitMQ's queue has consumers. The four figures of a phase take turns in
rotation (``load.in_rotation``), each turn on an emptied queue, after the quiet wait.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from bench.throughput import api, rabbitmq
from bench.throughput.figures import Bench
from bench.throughput.flow import BACKLOG_CALLS, Flow, Worker, flow_turn, flows_combined
from bench.throughput.latency import percentile
from bench.throughput.load import Plan, in_rotation
from bench.throughput.report import Row, fmt, log, verdict
from bench.throughput.servers import queue_clear, queue_fill, sign_in

BATCH = 100
BATCH_TARGET = 10.0  # (g): batch send against single send
END_TO_END_TARGET = 0.5  # (h): the API's ACKed msgs/s at batch 100 against RabbitMQ's


@dataclass(frozen=True)
class Sides:
    """The queue of each side and who works on it."""

    broker: rabbitmq.Broker
    sender: api.Caller
    recipient: int  # the consumer adapter whose queue the API's side uses
    consumers: list[api.Caller]  # instances of that adapter, each with its own X-Device-ID


def compare(bench: Bench, phases: set[str]) -> None:
    """The figures of ``phases`` among g and h, in order, into ``bench.rows``."""
    if "g" in phases:
        send_only(bench)
    if "h" in phases:
        end_to_end(bench)


def sides_of(bench: Bench, *, consumers: int) -> Sides:
    assert bench.rabbitmq is not None
    adapter = bench.consumers[0]
    instances = [
        sign_in(bench.server.base_url, adapter.principal, f"bench-flow-{n}")
        for n in range(consumers)
    ]
    return Sides(
        broker=bench.rabbitmq,
        sender=api.caller_of(bench.server, bench.sender),
        recipient=adapter.principal.adapter_id,
        consumers=[api.caller_of(bench.server, instance) for instance in instances],
    )


def backlog_of(batch: int, workers: int) -> int:
    return BACKLOG_CALLS * batch * workers


def api_run(bench: Bench, sides: Sides, batch: int) -> Callable[[Plan], Flow]:
    def run(turn: Plan) -> Flow:
        # The one checkpoint is the phase's, before its first turn (servers.database_settle).
        queue_clear(bench.database_url, [sides.recipient], checkpoint=False)
        workers: list[Worker] = [
            partial(api.producer, sides.sender, sides.recipient, batch)
            for _ in range(turn.producers)
        ]
        workers += [partial(api.consumer, consumer, batch) for consumer in sides.consumers]
        return flow_turn(
            bench.server,
            workers,
            turn.warmup,
            turn.duration,
            spread=True,
            backlog=backlog_of(batch, len(workers)) if sides.consumers else None,
        )

    return run


def rabbitmq_run(bench: Bench, sides: Sides, batch: int) -> Callable[[Plan], Flow]:
    def run(turn: Plan) -> Flow:
        rabbitmq.queue_reset(sides.broker)
        workers: list[Worker] = [
            partial(rabbitmq.producer, sides.broker, batch) for _ in range(turn.producers)
        ]
        workers += [partial(rabbitmq.consumer, sides.broker, batch) for _ in sides.consumers]
        return flow_turn(
            bench.server,
            workers,
            turn.warmup,
            turn.duration,
            spread=False,
            backlog=backlog_of(batch, len(workers)) if sides.consumers else None,
        )

    return run


def measured(bench: Bench, key: str, sides: Sides) -> list[Flow]:
    """The API's and RabbitMQ's figures at batch 1 and at BATCH, in rotation, each from an
    emptied queue: the API's single, RabbitMQ's single, the API's batch, RabbitMQ's batch."""
    others = [n for n in bench.consumer_ids if n != sides.recipient]
    queue_clear(bench.database_url, bench.consumer_ids)  # (f)'s million among them
    # The other consumers' queues hold messages, as a shared table does, so that the table's
    # statistics stay those of a table in use when each turn empties the queue of (g) and (h):
    # analyzed empty, it had the planner scan the whole table for every claim, a cost growing
    # with the turn (docs/performance.md, "The exchange API beside RabbitMQ").
    seconds = queue_fill(
        bench.database_url, others, bench.sender.principal.adapter_id, bench.plan.batch1_fill
    )
    log(f"{key}: the other queues at {bench.plan.batch1_fill:,} messages each ({seconds:.1f} s)")
    bench.settle(key)
    runs = [
        api_run(bench, sides, 1),
        rabbitmq_run(bench, sides, 1),
        api_run(bench, sides, BATCH),
        rabbitmq_run(bench, sides, BATCH),
    ]
    return [flows_combined(turns) for turns in in_rotation(runs, bench.plan, bench.plan.rounds)]


def send_only(bench: Bench) -> None:
    """(g): producers only."""
    producers = bench.plan.producers
    log(f"(g) sending only, {producers} producers: the API and RabbitMQ, 1 and {BATCH} per call")
    sides = sides_of(bench, consumers=0)
    single, single_mq, batch, batch_mq = measured(bench, "(g)", sides)
    for key, flow, rabbit in (
        ("(g)1mq", single_mq, True),
        ("(g)1", single, False),
        ("(g)100mq", batch_mq, True),
        ("(g)100", batch, False),
    ):
        bench.notes += cpu_notes(bench, key, flow, flow.sent, rabbit=rabbit, phase="(g)")
    single_rate, batch_rate = single.per_second(single.sent), batch.per_second(batch.sent)
    single_mq_rate, batch_mq_rate = (
        single_mq.per_second(single_mq.sent),
        batch_mq.per_second(batch_mq.sent),
    )
    gain = batch_rate / single_rate
    bench.rows += [
        Row(
            "(g)1mq",
            f"RabbitMQ send only, a confirm per message ({producers} producers)",
            fmt(single_mq_rate),
            "msgs/s",
            "baseline",
        ),
        Row(
            "(g)1",
            f"HTTP send only, one message per POST ({producers} producers)",
            fmt(single_rate),
            "msgs/s",
            f"{single_rate / single_mq_rate:.2f} x (g)1mq",
        ),
        Row(
            "(g)100mq",
            f"RabbitMQ send only, the confirms of {BATCH} awaited at once",
            fmt(batch_mq_rate),
            "msgs/s",
            "baseline",
        ),
        Row(
            "(g)100",
            f"HTTP send only, batch send of {BATCH} per POST",
            fmt(batch_rate),
            "msgs/s",
            f"{batch_rate / batch_mq_rate:.2f} x (g)100mq",
        ),
        Row(
            "(g)100/1",
            "HTTP batch send against one message per POST",
            fmt(gain, 1),
            "x",
            "(g)100 / (g)1",
            f">= {BATCH_TARGET:g} x",
            verdict(gain >= BATCH_TARGET),
        ),
    ]


def end_to_end(bench: Bench) -> None:
    """(h): producers and consumers at once."""
    producers = bench.plan.producers
    log(
        f"(h) end to end, {producers} producers and {producers} consumers: the API and "
        f"RabbitMQ, 1 and {BATCH} per call"
    )
    sides = sides_of(bench, consumers=producers)
    single, single_mq, batch, batch_mq = measured(bench, "(h)", sides)
    for size, ours, theirs in ((1, single, single_mq), (BATCH, batch, batch_mq)):
        key = f"(h){size}"
        bench.notes += cpu_notes(bench, key + "mq", theirs, theirs.acked, rabbit=True, phase="(h)")
        bench.notes += cpu_notes(bench, key, ours, ours.acked, rabbit=False, phase="(h)")
        bench.rows += end_to_end_rows(key, size, ours, theirs)


def end_to_end_rows(key: str, size: int, ours: Flow, theirs: Flow) -> list[Row]:
    figures: list[tuple[str, str, Callable[[Flow], float], int]] = [
        ("sent", "msgs/s", lambda flow: flow.per_second(flow.sent), 0),
        ("received", "msgs/s", lambda flow: flow.per_second(flow.received), 0),
        ("ACKed", "msgs/s", lambda flow: flow.per_second(flow.acked), 0),
        ("send -> receive p50", "ms", lambda flow: percentile(flow.latencies_ms, 0.5), 1),
        ("send -> receive p99", "ms", lambda flow: percentile(flow.latencies_ms, 0.99), 1),
    ]
    mq = [
        Row(key + "mq", f"RabbitMQ end to end, batch {size}: {name}", fmt(of(theirs), digits), unit)
        for name, unit, of, digits in figures
    ]
    http: list[Row] = []
    for name, unit, of, digits in figures:
        ratio = of(ours) / of(theirs)
        target = result = ""
        if size == BATCH and name == "ACKed":
            target = f">= {END_TO_END_TARGET:.2f} x {key}mq"
            result = verdict(ratio >= END_TO_END_TARGET)
        http.append(
            Row(
                key,
                f"HTTP end to end, batch {size}: {name}",
                fmt(of(ours), digits),
                unit,
                f"{ratio:.2f} x {key}mq",
                target,
                result,
            )
        )
    return mq + http


def cpu_notes(
    bench: Bench, key: str, flow: Flow, messages: int, *, rabbit: bool, phase: str
) -> list[str]:
    """The CPU of the clients and of the side's servers, in % of a core and per message
    (``messages``: sent in (g), ACKed in (h)); then what the workers did."""
    cpu = flow.cpu

    def per_message(share: float) -> str:
        return f"{1e6 * share / 100 * flow.seconds / max(1, messages):,.0f} µs/msg"

    if rabbit:
        server, parts = cpu.rabbitmq, f"beam.smp {cpu.rabbitmq:.0f}%"
        idle = cpu.server + cpu.postgres + cpu.postgres_background + cpu.redis
        aside = f"the API's servers meanwhile {idle:.0f}%"
    else:
        server = cpu.server + cpu.postgres + cpu.postgres_background + cpu.redis
        parts = (
            f"gunicorn {cpu.server:.0f}% + postgres {cpu.postgres:.0f}% + its background "
            f"{cpu.postgres_background:.0f}% + redis {cpu.redis:.0f}%"
        )
        aside = f"RabbitMQ meanwhile {cpu.rabbitmq:.0f}%"
    lines = [
        f"{key:<8} client {cpu.client:4.0f}% = {per_message(cpu.client)}  "
        f"server {server:4.0f}% = {per_message(server)} ({parts}); {aside}; "
        f"machine {cpu.machine:.0f}% of {100 * (os.cpu_count() or 1)}%  "
        f"[machine {bench.before.get(phase, 0):.0f}% just before]"
    ]
    done = [f"{flow.sends:,} sends", f"{flow.failed:,} failed"]
    if phase == "(h)":
        done += [
            f"{flow.held:,} held back by the backlog",
            f"{flow.received / max(1, flow.receives):.1f} messages per receive",
            f"{flow.acked / max(1, flow.acks):.1f} per ack",
            f"{flow.empty:,} empty receives",
        ]
    if flow.splits:
        done.append("connections per worker " + " ".join(flow.splits))
    lines.append(" " * 11 + "; ".join(done))
    return lines
