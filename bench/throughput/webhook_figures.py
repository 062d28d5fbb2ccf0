"""(l): webhooks, each figure beside the push stream's of the same run. The deliverer
(exchange/webhooks/delivery.py) runs in the bench's server's own processes, as deployed by
default (not EXCHANGE_WEBHOOK_DELIVERY_SEPARATE); the server allows loopback endpoints
(EXCHANGE_WEBHOOK_ALLOW_PRIVATE), and the endpoints are ``webhook_receiver``'s, in a process of
its own (``webhook_runs`` drives both).

(l)  throughput: 4 adapters (as (i) has 4 consumers), each with a webhook of its own, their
     queues filled by SQL before each turn as (i)'s are; then their owner enables the webhooks
     (PUT, as in the cabinet) and the clock runs from the first PUT to the receiver's last
     arrival: delivered messages a second, against (i)'s ACKed ones;
(l)  latency: send -> the receiver's arrival, (j)'s messages at (j)'s rate round robin over the
     4 webhooks: p50 and p99, against (j)'s p50;
(l)fast one endpoint's throughput and latency alone, and beside a slow endpoint that answers
     after 5 s with its queue kept full: each endpoint has at most EXCHANGE_WEBHOOK_CONCURRENCY
     requests in flight, so the slow one should take nothing of the fast one's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.throughput.figures import Bench
from bench.throughput.latency import percentile
from bench.throughput.machine import quiet_wait
from bench.throughput.report import Row, fmt, log
from bench.throughput.servers import queue_clear
from bench.throughput.stream_figures import log_note, log_since, log_size
from bench.throughput.stream_handlers import api_fill
from bench.throughput.stream_latency import Pushed
from bench.throughput.webhook_receiver import SLOW_SECONDS
from bench.throughput.webhook_runs import (
    CONCURRENCY,
    POLL_SECONDS,
    Delivered,
    Hooks,
    delivered_turn,
    hooks_create,
    pushed_run,
    receiver_started,
)

ADAPTERS = 4
TURNS = 2  # measured turns of each throughput figure
WARM_FILL = 1_000  # per adapter, a warm-up turn's: its rate sizes the measured turns
SLOW_FILL = 1_000  # the slow endpoint's queue: it drains 10 messages per 5 s, never dry here


def turns_of(
    bench: Bench, hooks: Hooks, adapters: list[int], key: str, tag: str
) -> list[Delivered]:
    """A warm-up turn, whose rate sizes the measured turns to last the plan's duration each,
    then TURNS measured ones."""
    warm = delivered_turn(bench, hooks, adapters, f"{tag}-warm", WARM_FILL)
    rate = warm.messages / warm.seconds / len(adapters)
    fill = max(WARM_FILL, 100 * round(rate * bench.plan.duration / 100))
    turns = []
    for turn in range(TURNS):
        bench.settle(key)
        turns.append(delivered_turn(bench, hooks, adapters, f"{tag}-{turn}", fill))
        turns[-1].before = bench.before[key]
    return turns


def rate_of(turns: list[Delivered]) -> float:
    return sum(turn.messages for turn in turns) / sum(turn.seconds for turn in turns)


def server_cpu_of(turns: list[Delivered]) -> float:
    """µs of the API's servers' CPU (gunicorn, PostgreSQL, Redis) per delivered message."""
    used = sum(
        (t.cpu.server + t.cpu.postgres + t.cpu.postgres_background + t.cpu.redis) / 100 * t.seconds
        for t in turns
    )
    return 1e6 * used / sum(turn.messages for turn in turns)


def turn_notes(key: str, turns: list[Delivered]) -> list[str]:
    notes = []
    for turn in turns:
        per_request = 1e6 * turn.receiver_cpu / max(1, turn.requests)
        notes.append(
            f"{key:<8} {turn.cpu.line()}  (client: the receiver)  [machine {turn.before:.0f}% "
            "just before]"
        )
        notes.append(
            " " * 11 + f"{turn.line()}; the receiver {per_request:.0f} µs of CPU per request "
            f"(one core's worth: {1e6 / per_request:,.0f}/s)"
        )
    return notes


def latency_note(key: str, pushed: Pushed, before: float) -> str:
    return (
        f"{key:<8} {pushed.cpu.line()}  (client: the receiver; send call p50 "
        f"{percentile(pushed.send_ms, 0.5):.1f} ms; not delivered {pushed.missing}; errors "
        f"{dict(pushed.errors) or 0})  [machine {before:.0f}% just before]"
    )


# --- The slow endpoint ----------------------------------------------------------------------------


@contextmanager
def slow_loaded(bench: Bench, hooks: Hooks, loaded: bool) -> Iterator[list[float]]:
    """With ``loaded``, the slow endpoint enabled, its queue full, and its room taken (CONCURRENCY
    answers pending) before the body runs: its pending answers then and at the end. Disabled
    after, and its posts under way let finish, so that the next turn alone is alone."""
    if not loaded:
        yield []
        return
    slow, path = hooks.adapters[-1], "/slow/s"
    hooks.put(slow, path, enabled=True)
    deadline = time.monotonic() + SLOW_SECONDS
    while hooks.receiver.summary([path])["pending"] < CONCURRENCY and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    pending = [hooks.receiver.summary([path])["pending"]]
    try:
        yield pending
    finally:
        pending.append(hooks.receiver.summary([path])["pending"])
        hooks.put(slow, path, enabled=False)
        time.sleep(SLOW_SECONDS + 1)


# --- The phase ------------------------------------------------------------------------------------


def webhooks(bench: Bench, phases: set[str]) -> None:
    if "l" not in phases:
        return
    log(f"(l) webhooks: {ADAPTERS} endpoints at a receiver on loopback, the deliverer in gunicorn")
    offset = log_size(bench.server)
    with receiver_started() as receiver:
        hooks = hooks_create(bench, receiver, ADAPTERS)
        fast = hooks.adapters[:ADAPTERS]
        queue_clear(bench.database_url, hooks.adapters)  # and the phase's one checkpoint
        many = turns_of(bench, hooks, fast, "(l)", "l")
        bench.notes += turn_notes("(l)", many)
        bench.settle("(l)lat")
        pushed = pushed_run(bench, hooks, fast, "l-latency")
        bench.notes.append(latency_note("(l)lat", pushed, bench.before["(l)lat"]))
        alone, beside, pending, slow_posts = slow_beside_fast(bench, hooks)
    bench.notes += log_note("(l)", log_since(bench.server, offset))
    bench.rows += throughput_rows(bench, many) + latency_rows(bench, pushed)
    bench.rows += slow_rows(alone, beside, pending, slow_posts)


def slow_beside_fast(
    bench: Bench, hooks: Hooks
) -> tuple[tuple[list[Delivered], Pushed], tuple[list[Delivered], Pushed], list[float], int]:
    """One fast endpoint's turns alone and beside the loaded slow one, alternating, then its
    latency alone and beside it."""
    log(f"(l)fast one endpoint alone, and beside one that answers after {SLOW_SECONDS:g} s")
    fast = hooks.adapters[:1]
    api_fill(bench.database_url, hooks.adapters[-1], bench.sender.principal.adapter_id, SLOW_FILL)
    warm = delivered_turn(bench, hooks, fast, "f-warm", WARM_FILL)
    fill = max(WARM_FILL, 100 * round(warm.messages / warm.seconds * bench.plan.duration / 100))
    turns: dict[bool, list[Delivered]] = {False: [], True: []}
    pending: list[float] = []
    for turn, loaded in enumerate([False, True, True, False][: 2 * TURNS]):
        with slow_loaded(bench, hooks, loaded) as slow_pending:
            bench.settle("(l)fast")
            turns[loaded].append(delivered_turn(bench, hooks, fast, f"f-{turn}", fill))
            turns[loaded][-1].before = bench.before["(l)fast"]
        pending += slow_pending
    latencies, before = {}, {}
    for loaded in (False, True):
        with slow_loaded(bench, hooks, loaded) as slow_pending:
            before[loaded] = quiet_wait(bench.quiet_limit)
            latencies[loaded] = pushed_run(bench, hooks, fast, f"f-latency-{int(loaded)}")
        pending += slow_pending
    slow_posts = int(hooks.receiver.summary(["/slow/s"])["requests"])
    for loaded, key in ((False, "(l)fast"), (True, "(l)f+slow")):
        bench.notes += turn_notes(key, turns[loaded])
        bench.notes.append(latency_note(key, latencies[loaded], before[loaded]))
    return (turns[False], latencies[False]), (turns[True], latencies[True]), pending, slow_posts


# --- The rows -------------------------------------------------------------------------------------


def throughput_rows(bench: Bench, turns: list[Delivered]) -> list[Row]:
    rate, cpu = rate_of(turns), server_cpu_of(turns)
    ours, ours_cpu = bench.values.get("(i)"), bench.values.get("(i)cpu")
    return [
        Row(
            "(l)",
            f"webhooks, prefilled, {ADAPTERS} endpoints ({CONCURRENCY} in flight each), "
            "receiver answers 200 at once: delivered",
            fmt(rate),
            "msgs/s",
            f"{rate / ours:.2f} x (i)" if ours else "",
        ),
        Row(
            "(l)",
            "the API's servers' CPU per delivered message (gunicorn, PostgreSQL, Redis)",
            fmt(cpu),
            "µs",
            f"{cpu / ours_cpu:.2f} x (i)" if ours_cpu else "",
        ),
    ]


def latency_rows(bench: Bench, pushed: Pushed) -> list[Row]:
    what = (
        f"webhooks, send -> receiver, {len(pushed.latencies_ms)} msgs at "
        f"{bench.plan.longpoll_rate:g}/s, {ADAPTERS} endpoints"
    )
    p50, p99 = percentile(pushed.latencies_ms, 0.5), percentile(pushed.latencies_ms, 0.99)
    j50 = bench.values.get("(j)p50")
    return [
        Row("(l)", what + ": p50", fmt(p50, 1), "ms", f"{p50 / j50:.2f} x (j)" if j50 else ""),
        Row("(l)", what + ": p99", fmt(p99, 1), "ms"),
        Row("(l)", "the send call itself: p50", fmt(percentile(pushed.send_ms, 0.5), 1), "ms"),
    ]


def slow_rows(
    alone: tuple[list[Delivered], Pushed],
    beside: tuple[list[Delivered], Pushed],
    pending: list[float],
    slow_posts: int,
) -> list[Row]:
    rate, rate_beside = rate_of(alone[0]), rate_of(beside[0])
    p50 = percentile(alone[1].latencies_ms, 0.5)
    p50_beside = percentile(beside[1].latencies_ms, 0.5)
    slow = (
        f"beside a slow endpoint ({SLOW_SECONDS:g} s an answer, {slow_posts} POSTs to it, "
        f"{min(pending, default=0):.0f}-{max(pending, default=0):.0f} pending)"
    )
    return [
        Row("(l)fast", "one endpoint alone, prefilled: delivered", fmt(rate), "msgs/s", "baseline"),
        Row(
            "(l)fast",
            f"the same {slow}: delivered",
            fmt(rate_beside),
            "msgs/s",
            f"{rate_beside / rate:.2f} x alone",
        ),
        Row("(l)fast", "one endpoint alone, send -> receiver: p50", fmt(p50, 1), "ms", "baseline"),
        Row(
            "(l)fast",
            "the same beside the slow one: p50",
            fmt(p50_beside, 1),
            "ms",
            f"{p50_beside / p50:.2f} x alone",
        ),
    ]
