"""The figures (a) to (f): each measured on the running server, each a row of the table.

(a) a raw psycopg loop per message (session check, claim, ACK): the database's ceiling at batch 1;
(b) the HTTP API at batch 1 (GET ?max=1, then ACK), against (a);
(c) the HTTP API at batch 100, against the raw loop at batch 100: GET then ACK, and (c)next, each
    ACK receiving the next batch (one request per batch);
(d) long polling: latency from send to receive;
(e) an authenticated GET /api/exchange/whoami against a bare Django view on the same server;
(f) receive latency with 1,000 and with 1,000,000 messages waiting (two consumers' queues in one
    table, received from in turns);
(k) 2,000 adapters waiting in long polls at once, 200 messages a second spread over them
    (bench/throughput/waiting.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.throughput.latency import (
    Latency,
    LongPoll,
    longpoll_run,
    percentile,
    receive_latencies,
)
from bench.throughput.load import Plan, Throughput, in_turns, raw_run, wrk_run
from bench.throughput.machine import quiet_wait
from bench.throughput.profiling import profiled
from bench.throughput.rabbitmq import Broker
from bench.throughput.report import Row, fmt, log, verdict
from bench.throughput.servers import (
    Client,
    Server,
    index_note,
    index_reads,
    queue_clear,
    queue_fill,
)
from bench.throughput.waiting import RATE, WAITERS, waiters_create, waiting_run


@dataclass
class Bench:
    """One run: the server and principals every figure uses, and what was measured so far."""

    database_url: str
    server: Server
    consumers: list[Client]
    sender: Client
    plan: Plan
    wrk: str | None
    script: Path  # wrk's Lua script, with the consumers' tokens
    quiet_limit: float  # --quiet-wait
    spy: str | None  # py-spy, for --profile
    profile_dir: Path | None
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    before: dict[str, float] = field(default_factory=dict)  # the machine's CPU before each
    indexes: dict[str, str] = field(default_factory=dict)  # index_note() of a phase
    rabbitmq: Broker | None = None  # the queue of (g), (h), (i) and (j)
    values: dict[str, float] = field(default_factory=dict)  # figures later rows compare with

    @property
    def consumer_ids(self) -> list[int]:
        return [consumer.principal.adapter_id for consumer in self.consumers]

    def settle(self, key: str) -> None:
        self.before[key] = quiet_wait(self.quiet_limit)

    def note(self, key: str, result: Throughput | Latency | LongPoll, extra: str = "") -> None:
        idle = f"  [machine {self.before.get(key, 0):.0f}% just before]"
        self.notes.append(f"{key:<8} {result.cpu.line()}{extra}{idle}")
        if key in self.indexes:
            self.notes.append(" " * 11 + self.indexes[key].strip())

    def profiled(self, name: str) -> contextlib.AbstractContextManager[None]:
        return profiled(self.server, self.spy, self.profile_dir, name)

    def throughput(
        self, keys: tuple[str, ...], fill: int, *runs: Callable[[Plan], Throughput]
    ) -> tuple[Throughput, ...]:
        """One figure, or a raw loop and its HTTP counterpart in turns, with the queues filled
        to ``fill`` each; again with twice that if one of them ran dry."""
        sender_id = self.sender.principal.adapter_id
        for _ in range(3):
            seconds = queue_fill(self.database_url, self.consumer_ids, sender_id, fill)
            log(f"{' and '.join(keys)}: queues at {fill:,} messages each ({seconds:.1f} s)")
            self.settle(keys[0])
            for key in keys[1:]:
                self.before[key] = self.before[keys[0]]
            reads = index_reads(self.database_url)
            results = in_turns(*runs, plan=self.plan) if len(runs) > 1 else (runs[0](self.plan),)
            time.sleep(1.5)  # backends publish their statistics about once a second
            self.indexes[keys[-1]] = index_note(reads, index_reads(self.database_url))
            if all(result.empty == 0 for result in results):
                return results
            log(f"{', '.join(keys)}: empty receives: the queues ran dry, more messages")
            fill *= 2
        return results

    def raw_loop_of(self, batch: int) -> Callable[[Plan], Throughput]:
        return lambda turn: raw_run(self.database_url, self.server, self.consumers, batch, turn)

    def http_of(self, mode: str, batch: int = 1) -> Callable[[Plan], Throughput]:
        wrk = self.wrk
        assert wrk is not None
        return lambda turn: wrk_run(wrk, self.script, self.server, turn, mode, batch)


def measure(bench: Bench, phases: set[str]) -> None:
    """The figures of ``phases`` (letters of abcdef), in order, into ``bench.rows``."""
    if phases & set("ab"):
        batch_1(bench, phases)
    if "c" in phases:
        batch_100(bench)
    if "d" in phases:
        long_poll(bench)
    if "e" in phases:
        whoami_overhead(bench)
    if "f" in phases:
        queue_depth(bench)
    if "k" in phases:
        waiting_many(bench)


def batch_1(bench: Bench, phases: set[str]) -> None:
    """(a) and (b), in turns when both are asked for."""
    plan = bench.plan
    a: Throughput | None = None
    b: Throughput | None = None
    if phases >= set("ab"):
        log("(a) raw psycopg loop and (b) HTTP API, batch 1, in turns")
        with bench.profiled("b"):
            a, b = bench.throughput(
                ("(a)", "(b)"), plan.batch1_fill, bench.raw_loop_of(1), bench.http_of("queue")
            )
    elif "a" in phases:
        log("(a) raw psycopg loop, batch 1")
        (a,) = bench.throughput(("(a)",), plan.batch1_fill, bench.raw_loop_of(1))
    else:
        log("(b) HTTP API, batch 1")
        with bench.profiled("b"):
            (b,) = bench.throughput(("(b)",), plan.batch1_fill, bench.http_of("queue"))
    if a is not None:
        bench.note("(a)", a)
        bench.rows.append(
            Row(
                "(a)",
                f"raw psycopg, batch 1: session check + claim + ACK ({plan.clients} conns)",
                fmt(a.rate),
                "msgs/s",
                "baseline",
            )
        )
    if b is not None:
        bench.note("(b)", b, f"  (HTTP p50 {b.p50_ms:.1f} ms, p99 {b.p99_ms:.1f} ms)")
        ratio = b.rate / a.rate if a else float("nan")
        bench.rows.append(
            Row(
                "(b)",
                "HTTP API, batch 1: GET ?max=1 then ACK (wrk, 8 connections)",
                fmt(b.rate),
                "msgs/s",
                f"{ratio:.2f} x (a)" if a else "",
                ">= 0.20 x (a)",
                verdict(ratio >= 0.20) if a else "",
            )
        )


def batch_100(bench: Bench) -> None:
    """(c)raw, (c) and (c)next, in turns."""
    log("(c) raw psycopg loop, HTTP API and HTTP API with the ACK receiving, batch 100, in turns")
    with bench.profiled("c"):
        a100, c, following = bench.throughput(
            ("(c)raw", "(c)", "(c)next"),
            bench.plan.batch100_fill,
            bench.raw_loop_of(100),
            bench.http_of("queue", 100),
            bench.http_of("next", 100),
        )
    bench.note("(c)raw", a100)
    for key, result in (("(c)", c), ("(c)next", following)):
        bench.note(key, result, f"  (HTTP p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms)")
    bench.rows.append(
        Row(
            "(c)raw",
            "raw psycopg, batch 100: session check + claim 100 + ACK 100",
            fmt(a100.rate),
            "msgs/s",
            "baseline",
        )
    )
    ratio = c.rate / a100.rate
    bench.rows.append(
        Row(
            "(c)",
            "HTTP API, batch 100: GET ?max=100 then one ACK of 100",
            fmt(c.rate),
            "msgs/s",
            f"{ratio:.2f} x (c)raw",
            ">= 0.50 x (c)raw",
            verdict(ratio >= 0.50),
        )
    )
    bench.rows.append(
        Row(
            "(c)next",
            "HTTP API, batch 100: each ACK of 100 receives the next 100 (one request per batch)",
            fmt(following.rate),
            "msgs/s",
            f"{following.rate / a100.rate:.2f} x (c)raw",
        )
    )


def long_poll(bench: Bench) -> None:
    """(d): messages sent at a steady rate to consumers waiting in long polls."""
    plan = bench.plan
    log("(d) long polling, send to receive")
    queue_clear(bench.database_url, bench.consumer_ids)
    bench.settle("(d)")
    d = asyncio.run(longpoll_run(bench.server, bench.consumers, bench.sender, plan))
    bench.note(
        "(d)",
        d,
        f"  (send call p50 {percentile(d.send_ms, 0.5):.1f} ms; errors {d.errors or 0})",
    )
    p50, p99 = percentile(d.latencies_ms, 0.5), percentile(d.latencies_ms, 0.99)
    bench.values.update({"(d)p50": p50, "(d)p99": p99})
    what = (
        f"long poll, send -> receive, {len(d.latencies_ms)} msgs at "
        f"{plan.longpoll_rate:g}/s, {plan.clients} waiting consumers"
    )
    bench.rows.append(
        Row("(d)", what + ": p50", fmt(p50, 1), "ms", "", "< 50 ms", verdict(p50 < 50))
    )
    bench.rows.append(Row("(d)", what + ": p99", fmt(p99, 1), "ms"))


def whoami_overhead(bench: Bench) -> None:
    """(e): the bare view and whoami, in turns."""
    log("(e) bare Django view and whoami, in turns")
    bench.settle("(e)")
    bench.before["(e)bare"] = bench.before["(e)"]
    with bench.profiled("e"):
        bare, who = in_turns(bench.http_of("bare"), bench.http_of("whoami"), plan=bench.plan)
    bench.note("(e)bare", bare, f"  (p50 {bare.p50_ms:.2f} ms)")
    bench.note("(e)", who, f"  (p50 {who.p50_ms:.2f} ms; errors {who.errors})")
    ratio = who.rate / bare.rate
    bench.rows.append(
        Row(
            "(e)bare",
            "GET /bench/bare: plain Django view",
            fmt(bare.rate),
            "req/s",
            "baseline",
        )
    )
    bench.rows.append(
        Row(
            "(e)",
            "GET /api/exchange/whoami: JWT + session + DRF",
            fmt(who.rate),
            "req/s",
            f"{ratio:.2f} x bare",
            ">= 0.60 x bare",
            verdict(ratio >= 0.60),
        )
    )


def count_short(count: int) -> str:
    """1k, 1M, 10M: a queue's depth in a row's name."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count >= size and count % size == 0:
            return f"{count // size}{suffix}"
    return f"{count:,}"


def queue_depth(bench: Bench) -> None:
    """(f): two consumers' queues in the one table, filled to both depths, measured in turns."""
    plan = bench.plan
    queues = [(bench.consumers[0], plan.small_queue), (bench.consumers[1], plan.large_queue)]
    queue_clear(bench.database_url, bench.consumer_ids)
    for consumer, depth in queues:
        seconds = queue_fill(
            bench.database_url,
            [consumer.principal.adapter_id],
            bench.sender.principal.adapter_id,
            depth,
        )
        log(f"(f) {depth:,} waiting for {consumer.principal.login} ({seconds:.1f} s)")
    bench.settle("(f)")
    results = receive_latencies(bench.server, queues, plan.latency_receives)
    bench.note("(f)", results[0], " (both queues, in turns)")
    small, large = results
    ratio = large.median_ms / small.median_ms
    spread = max(ratio, 1 / ratio)
    bench.rows.append(
        Row(
            "(f)1k",
            f"receive latency, {small.depth:,} waiting (queues in turns): median "
            f"(p99 {small.p99_ms:.2f} ms)",
            fmt(small.median_ms, 2),
            "ms",
            "baseline",
        )
    )
    bench.rows.append(
        Row(
            f"(f){count_short(large.depth)}",
            f"receive latency, {large.depth:,} waiting (queues in turns): median "
            f"(p99 {large.p99_ms:.2f} ms)",
            fmt(large.median_ms, 2),
            "ms",
            f"{ratio:.2f} x (f)1k",
            "within 20 %",
            verdict(spread <= 1.20),
        )
    )


def waiting_many(bench: Bench) -> None:
    """(k): WAITERS adapters in long polls at once, RATE messages a second spread over them."""
    log(f"(k) {WAITERS:,} adapters waiting in long polls")
    waiters = waiters_create(bench.database_url, WAITERS)
    queue_clear(bench.database_url, [waiter.adapter_id for waiter in waiters])
    bench.settle("(k)")
    k = asyncio.run(waiting_run(bench.server, bench.sender, waiters, bench.plan.duration * 2))
    bench.notes.append(f"(k)idle   {k.idle_cpu.line()}  (all {WAITERS:,} waiting, nothing sent)")
    bench.notes.append(
        f"(k)      {k.load_cpu.line()}  (sends {dict(k.sends)}; receives {dict(k.receives)}; "
        f"no answer {dict(k.failures) or 0})"
    )
    shares = (0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
    for name, values in (("send -> receive", k.latencies_ms), ("the send call", k.send_ms)):
        figures = " ".join(f"{percentile(values, share):.1f}" for share in shares)
        log(f"(k) {name}, ms at p50 p90 p95 p99 p99.9 max: {figures}")
    p50, p99 = percentile(k.latencies_ms, 0.5), percentile(k.latencies_ms, 0.99)
    what = f"{WAITERS:,} long polls waiting, {k.sent:,} msgs at {RATE:g}/s spread over them"
    refused = Row("(k)", what + ": refused", fmt(k.refused), "receives", "", "0")
    bench.rows.append(replace(refused, verdict=verdict(k.refused == 0)))
    bench.rows.append(Row("(k)", "send -> receive: p50", fmt(p50, 1), "ms"))
    bench.rows.append(
        Row("(k)", "send -> receive: p99", fmt(p99, 1), "ms", "", "< 100 ms", verdict(p99 < 100))
    )
    bench.rows.append(
        Row("(k)", "server memory per waiting consumer (RSS)", fmt(k.rss_per_waiter_kb, 1), "KiB")
    )
    bench.rows.append(
        Row("(k)", "server CPU while they only wait", fmt(k.idle_cpu.server, 1), "% of a core")
    )
