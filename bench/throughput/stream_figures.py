"""The push stream's figures (GET /api/exchange/messages/stream), each a row of the table:

(i) one-at-a-time handlers on queues filled before each turn: 4 consumers on streams with the
    adapters' client's consume() and its batched ACKs, against RabbitMQ's basic_consume with a
    prefetch of 100 and a basic_ack per message; ACKed messages a second and the servers' CPU
    per message on each side, in turns (``stream_handlers``; the target: at least half of
    RabbitMQ's ACKed messages a second);
(j) latency at a low rate: send -> event on streams, beside RabbitMQ's publish -> delivery and
    (d)'s long poll of the same run; and from a logout's answer to the stream's end
    (``stream_latency``; the target: a p50 under 5 ms);
(k)stream 2,000 adapters each holding a stream open, 200 messages a second spread over them
    (``streams_held``; the targets: none refused, a p99 under 100 ms).
"""

from __future__ import annotations

import asyncio
from functools import partial

from bench.throughput.comparison import cpu_notes
from bench.throughput.figures import Bench
from bench.throughput.flow import Flow, Worker, flow_turn, flows_combined
from bench.throughput.latency import percentile
from bench.throughput.load import Plan, in_rotation
from bench.throughput.rabbitmq import PREFETCH
from bench.throughput.report import Row, fmt, log, verdict
from bench.throughput.servers import Server, queue_clear, server_start, sign_in
from bench.throughput.stream_handlers import (
    api_available,
    api_fill,
    api_handler,
    rabbitmq_fill,
    rabbitmq_handler,
    rabbitmq_ready,
)
from bench.throughput.stream_latency import (
    Pushed,
    logout_run,
    rabbitmq_latency_run,
    stream_latency_run,
)
from bench.throughput.streams_held import STREAMS, WARM, held_run, open_files_raise
from bench.throughput.waiting import RATE, waiters_create

HANDLERS_TARGET = 0.5  # (i): the API's ACKed msgs/s against RabbitMQ's
LATENCY_TARGET_MS = 5.0  # (j): the stream's p50
HELD_TARGET_MS = 100.0  # (k)stream: the p99
# (i): messages in each side's queue before each turn, the same on both sides: enough for
# RabbitMQ's 4 consumers through the warm-up and the measured seconds of a turn (up to 18,000 a
# second here). The API's consumers are slower, and while a stream's claim reads the whole table
# (docs/performance.md, "The push stream"), they are slower still with a deeper queue: the same
# depth on both sides keeps that in the figure rather than choosing it.
HANDLERS_FILL = 60_000
# (i)'s workers sign in before their turn starts (an Argon2 hash each, four at once on the
# server): the turn starts this long after they are forked.
HANDLERS_CONNECT = 2.5
LOGOUTS = 12


def push(bench: Bench, phases: set[str]) -> None:
    """The figures of ``phases`` among i, j and k (its streams), in order, into ``bench.rows``."""
    if "i" in phases:
        one_at_a_time(bench)
    if "j" in phases:
        stream_latency(bench)
    if "k" in phases:
        streams_held(bench)


def log_since(server: Server, offset: int) -> list[str]:
    """What the server wrote to its log from ``offset`` on, but gunicorn's own notes: with
    LOG_LEVEL=WARNING anything there is a warning, an error or a traceback."""
    with server.log_path.open("rb") as log_file:
        log_file.seek(offset)
        text = log_file.read().decode(errors="replace")
    return [line for line in text.splitlines() if line.strip() and "[INFO]" not in line]


def log_size(server: Server) -> int:
    return server.log_path.stat().st_size


def log_note(key: str, lines: list[str]) -> list[str]:
    if not lines:
        return []
    shown = [" " * 11 + line[:300] for line in lines[:12]]
    return [f"{key:<8} the server's log: {len(lines)} lines (the first {len(shown)})", *shown]


# --- (i) ------------------------------------------------------------------------------------------


def one_at_a_time(bench: Bench) -> None:
    assert bench.rabbitmq is not None
    broker = bench.rabbitmq
    consumers = bench.plan.producers
    adapter = bench.consumers[0].principal
    sender = bench.sender.principal.adapter_id
    log(
        f"(i) one-at-a-time handlers, {consumers} consumers on prefilled queues: streams with "
        "consume() and batched ACKs, and RabbitMQ's basic_consume with an ack per message"
    )
    queue_clear(bench.database_url, bench.consumer_ids)  # and the phase's one checkpoint
    fill = HANDLERS_FILL  # both sides', doubled when either ran dry
    # What a turn's consumers hold when it ends goes back to the queue: a queue with no more
    # than that left ran dry in the turn (or nearly).
    held = consumers * PREFETCH

    def api_run(turn: Plan) -> Flow:
        seconds = api_fill(bench.database_url, adapter.adapter_id, sender, fill)
        log(f"(i) the API's queue at {fill:,} ({seconds:.1f} s)")
        workers: list[Worker] = [
            partial(api_handler, bench.server.base_url, adapter, f"bench-handler-{n}")
            for n in range(consumers)
        ]
        flow = flow_turn(
            bench.server,
            workers,
            turn.warmup,
            turn.duration,
            spread=True,
            backlog=None,
            connect=HANDLERS_CONNECT,
        )
        left = api_available(bench.database_url, adapter.adapter_id)
        log(f"(i) the API's turn: {flow.acked:,} ACKed in the window, {left:,} left")
        flow.empty = int(left <= held)
        return flow

    def rabbitmq_run(turn: Plan) -> Flow:
        seconds = rabbitmq_fill(broker, fill)
        log(f"(i) RabbitMQ's queue at {fill:,} ({seconds:.1f} s)")
        workers: list[Worker] = [partial(rabbitmq_handler, broker) for _ in range(consumers)]
        flow = flow_turn(
            bench.server,
            workers,
            turn.warmup,
            turn.duration,
            spread=False,
            backlog=None,
            connect=HANDLERS_CONNECT,
        )
        left = rabbitmq_ready(broker)
        log(f"(i) RabbitMQ's turn: {flow.acked:,} ACKed in the window, {left:,} left")
        flow.empty = int(left <= held)
        return flow

    offset = log_size(bench.server)
    for _ in range(3):
        bench.settle("(i)")
        turns = in_rotation([api_run, rabbitmq_run], bench.plan, bench.plan.rounds)
        ours, theirs = (flows_combined(each) for each in turns)
        if not ours.empty and not theirs.empty:
            break
        fill *= 2
        log(f"(i) a queue ran dry in a turn: again with {fill:,} messages")
    bench.notes += cpu_notes(bench, "(i)mq", theirs, theirs.acked, rabbit=True, phase="(i)")
    bench.notes += cpu_notes(bench, "(i)", ours, ours.acked, rabbit=False, phase="(i)")
    bench.notes.append(
        " " * 11 + f"ACKs of {ours.acked / max(1, ours.acks):.1f} messages on average; "
        f"handler errors {ours.failed}; queues of {fill:,} messages before each turn, ran dry "
        f"{ours.empty} (API) and {theirs.empty} (RabbitMQ) times"
    )
    bench.notes += log_note("(i)", log_since(bench.server, offset))
    bench.rows += handlers_rows(consumers, ours, theirs)
    bench.values["(i)"] = ours.per_second(ours.acked)  # (l) is set beside them
    bench.values["(i)cpu"] = server_cpu_per_message(ours, rabbit=False)


def server_cpu_per_message(flow: Flow, *, rabbit: bool) -> float:
    """µs of the side's servers' CPU per ACKed message: RabbitMQ's beam.smp, or gunicorn,
    PostgreSQL (its backends and background processes) and Redis."""
    cpu = flow.cpu
    share = (
        cpu.rabbitmq if rabbit else cpu.server + cpu.postgres + cpu.postgres_background + cpu.redis
    )
    return 1e6 * share / 100 * flow.seconds / max(1, flow.acked)


def handlers_rows(consumers: int, ours: Flow, theirs: Flow) -> list[Row]:
    rate, rate_mq = ours.per_second(ours.acked), theirs.per_second(theirs.acked)
    ratio = rate / rate_mq
    cpu, cpu_mq = (
        server_cpu_per_message(ours, rabbit=False),
        server_cpu_per_message(theirs, rabbit=True),
    )
    return [
        Row(
            "(i)mq",
            f"RabbitMQ, prefilled, {consumers} consumers: basic_consume (prefetch 100), "
            "a basic_ack per message: ACKed",
            fmt(rate_mq),
            "msgs/s",
            "baseline",
        ),
        Row(
            "(i)",
            f"HTTP API, prefilled, {consumers} consumers on streams (maxOutstanding 100): "
            "consume(), ACKs batched: ACKed",
            fmt(rate),
            "msgs/s",
            f"{ratio:.2f} x (i)mq",
            f">= {HANDLERS_TARGET:.2f} x (i)mq",
            verdict(ratio >= HANDLERS_TARGET),
        ),
        Row("(i)mq", "RabbitMQ's server CPU per ACKed message", fmt(cpu_mq), "µs", "baseline"),
        Row(
            "(i)",
            "the API's servers' CPU per ACKed message (gunicorn, PostgreSQL, Redis)",
            fmt(cpu),
            "µs",
            f"{cpu / cpu_mq:.2f} x (i)mq",
        ),
    ]


# --- (j) ------------------------------------------------------------------------------------------


def stream_latency(bench: Bench) -> None:
    plan = bench.plan
    log(
        f"(j) streams, send -> event, {plan.longpoll_messages} messages at {plan.longpoll_rate:g}/s"
    )
    streams = [
        sign_in(bench.server.base_url, consumer.principal, f"bench-stream-{n}")
        for n, consumer in enumerate(bench.consumers)
    ]
    queue_clear(bench.database_url, bench.consumer_ids)
    offset = log_size(bench.server)
    bench.settle("(j)")
    ours = asyncio.run(stream_latency_run(bench.server, streams, bench.sender, plan))
    bench.notes.append(latency_note("(j)", ours, bench.before["(j)"]))
    theirs: Pushed | None = None
    if bench.rabbitmq is not None:
        log("(j) RabbitMQ, publish -> delivery")
        bench.settle("(j)mq")
        theirs = rabbitmq_latency_run(bench.server, bench.rabbitmq, len(streams), plan)
        bench.notes.append(latency_note("(j)mq", theirs, bench.before["(j)mq"]))
    log("(j) logouts ending streams")
    logouts = asyncio.run(logout_run(bench.server, bench.consumers[0].principal, LOGOUTS))
    bench.notes.append(
        f"(j)end    ends {dict(logouts.codes)}; errors {dict(logouts.errors) or 0}; ms: "
        + " ".join(f"{value:.0f}" for value in logouts.ends_ms)
    )
    bench.notes += log_note("(j)", log_since(bench.server, offset))

    what = (
        f"stream, send -> event, {len(ours.latencies_ms)} msgs at {plan.longpoll_rate:g}/s, "
        f"{len(streams)} streams"
    )
    p50, p99 = percentile(ours.latencies_ms, 0.5), percentile(ours.latencies_ms, 0.99)
    bench.values["(j)p50"] = p50
    d50, d99 = bench.values.get("(d)p50"), bench.values.get("(d)p99")
    bench.rows.append(
        Row(
            "(j)",
            what + ": p50",
            fmt(p50, 1),
            "ms",
            f"{p50 / d50:.2f} x (d)" if d50 else "",
            f"< {LATENCY_TARGET_MS:g} ms",
            verdict(p50 < LATENCY_TARGET_MS),
        )
    )
    bench.rows.append(
        Row("(j)", what + ": p99", fmt(p99, 1), "ms", f"{p99 / d99:.2f} x (d)" if d99 else "")
    )
    bench.rows.append(
        Row("(j)", "the send call itself: p50", fmt(percentile(ours.send_ms, 0.5), 1), "ms")
    )
    if theirs is not None:
        what = (
            f"RabbitMQ, publish -> delivery (basic_consume), {len(theirs.latencies_ms)} msgs at "
            f"{plan.longpoll_rate:g}/s, {len(streams)} consumers"
        )
        for share, name in ((0.5, "p50"), (0.99, "p99")):
            value = percentile(theirs.latencies_ms, share)
            bench.rows.append(Row("(j)mq", f"{what}: {name}", fmt(value, 1), "ms"))
    ends = logouts.ends_ms
    bench.rows.append(
        Row(
            "(j)end",
            f"logout's 200 -> the stream's end TOKEN_REVOKED, {len(ends)} of {LOGOUTS}: p50 "
            f"(max {max(ends, default=float('nan')):.0f} ms)",
            fmt(percentile(ends, 0.5), 0),
            "ms",
        )
    )


def latency_note(key: str, pushed: Pushed, before: float) -> str:
    rabbitmq = f"; beam.smp {pushed.cpu.rabbitmq:.0f}%" if pushed.cpu.rabbitmq else ""
    return (
        f"{key:<8} {pushed.cpu.line()}  (send call p50 {percentile(pushed.send_ms, 0.5):.1f} ms; "
        f"not delivered {pushed.missing}; errors {dict(pushed.errors) or 0}{rabbitmq})"
        f"  [machine {before:.0f}% just before]"
    )


# --- (k) with streams -----------------------------------------------------------------------------


def streams_held(bench: Bench) -> None:
    log(f"(k)stream {STREAMS:,} adapters holding streams open, on a server started for them")
    adapters = waiters_create(bench.database_url, STREAMS, device="streamer")
    queue_clear(bench.database_url, [adapter.adapter_id for adapter in adapters])
    open_files_raise(3 * STREAMS + 1000)
    workdir = bench.server.log_path.parent / "streams"
    workdir.mkdir(exist_ok=True)
    server = server_start(bench.database_url, workdir)
    try:
        bench.settle("(k)stream")
        seconds = bench.plan.duration * 2
        k = asyncio.run(held_run(server, bench.sender, adapters, seconds))
    finally:
        server.stop()
    bench.notes.append(
        f"(k)sidle  {k.idle_cpu.line()}  (all {STREAMS:,} open, nothing sent)"
        f"  [machine {bench.before['(k)stream']:.0f}% just before]"
    )
    bench.notes.append(
        f"(k)stream {k.load_cpu.line()}  (sends {dict(k.sends)}; opens {dict(k.opens)} in "
        f"{k.open_seconds:.1f} s; ACKs {dict(k.acks)}; ends {dict(k.ends) or 0}; "
        f"failures {dict(k.failures) or 0}; delivered {k.delivered:,})"
    )
    bench.notes += [" " * 11 + "refused: " + refusal for refusal in k.refusals]
    bench.notes += log_note("(k)stream", log_since(server, 0))
    shares = (0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
    for name, values in (("send -> event", k.latencies_ms), ("the send call", k.send_ms)):
        figures = " ".join(f"{percentile(values, share):.1f}" for share in shares)
        log(f"(k)stream {name}, ms at p50 p90 p95 p99 p99.9 max: {figures}")
    p50, p99 = percentile(k.latencies_ms, 0.5), percentile(k.latencies_ms, 0.99)
    lost = k.sent - len(k.latencies_ms)
    what = f"{STREAMS:,} streams open, {k.sent:,} msgs at {RATE:g}/s spread over them"
    bench.rows += [
        Row(
            "(k)stream",
            what + ": refused",
            fmt(k.refused),
            "opens",
            "",
            "0",
            verdict(k.refused == 0),
        ),
        Row("(k)stream", f"send -> event: p50 ({lost} not delivered)", fmt(p50, 1), "ms"),
        Row(
            "(k)stream",
            "send -> event: p99",
            fmt(p99, 1),
            "ms",
            "",
            f"< {HELD_TARGET_MS:g} ms",
            verdict(p99 < HELD_TARGET_MS),
        ),
        Row(
            "(k)stream",
            f"server memory per open stream (RSS, {WARM} open before)",
            fmt(k.rss_per_stream_kb, 1),
            "KiB",
        ),
        Row(
            "(k)stream",
            f"server CPU while they are open and nothing is sent (PostgreSQL "
            f"{k.idle_cpu.postgres:.1f} %)",
            fmt(k.idle_cpu.server, 1),
            "% of a core",
        ),
    ]
