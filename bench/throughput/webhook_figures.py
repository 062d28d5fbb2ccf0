"""(l): webhooks, each figure beside the push stream's of the same run. The deliverer
(exchange/webhooks/delivery.py) runs in the bench's server's own processes, as deployed by
default (not EXCHANGE_WEBHOOK_DELIVERY_SEPARATE); the server allows loopback endpoints
(EXCHANGE_WEBHOOK_ALLOW_PRIVATE), and the endpoints are ``webhook_receiver``'s, in a process of
its own.

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

import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import psycopg

from bench.throughput.api import SEND, send_body
from bench.throughput.figures import Bench
from bench.throughput.flow import payload
from bench.throughput.latency import percentile
from bench.throughput.machine import CpuMeter, CpuShare, cpu_seconds
from bench.throughput.report import Row, fmt, log
from bench.throughput.servers import ROOT, manage, queue_clear
from bench.throughput.stream_figures import log_note, log_since, log_size
from bench.throughput.stream_handlers import api_fill
from bench.throughput.stream_latency import Pushed, warmup_of
from bench.throughput.webhook_receiver import SLOW_SECONDS
from platform_site.embedded import free_port

ADAPTERS = 4
TURNS = 2  # measured turns of each throughput figure
WARM_FILL = 1_000  # per adapter, a warm-up turn's: its rate sizes the measured turns
SLOW_FILL = 1_000  # the slow endpoint's queue: it drains 10 messages per 5 s, never dry here
STALL_SECONDS = 30.0  # a turn gives up once nothing more has arrived for this long
POLL_SECONDS = 0.1  # how often the bench asks the receiver how far it got
CONCURRENCY = int(os.environ.get("EXCHANGE_WEBHOOK_CONCURRENCY", "10"))  # the server's, inherited
OWNER = "bench-webhook-owner"
OWNER_CODE = """
import json
from accounts.models import User
from accounts.services.adapters import adapter_create
owner = User.objects.create_user(
    username={owner!r}, email="bench-webhooks@example.com", password={password!r},
    email_confirmed=True,
)
made = [adapter_create(owner=owner, login=login) for login in {logins!r}]
print("BENCH " + json.dumps([c.adapter_id for c in made]))
"""


# --- The receiver and the owner -------------------------------------------------------------------


@dataclass(frozen=True)
class Receiver:
    """The bench's handle on ``webhook_receiver``'s process."""

    process: subprocess.Popen[bytes]
    base_url: str
    http: httpx.Client

    def summary(self, paths: list[str]) -> dict[str, float]:
        answer: dict[str, float] = self.http.get("/_summary", params={"path": paths}).json()
        return answer

    def arrivals(self, paths: list[str]) -> list[list[float]]:
        answer: list[list[float]] = self.http.get("/_arrivals", params={"path": paths}).json()
        return answer

    def forget(self, paths: list[str]) -> None:
        self.http.get("/_forget", params={"path": paths})

    def cpu_seconds(self) -> float:
        return cpu_seconds(psutil.Process(self.process.pid))


@contextmanager
def receiver_started() -> Iterator[Receiver]:
    port = free_port()
    module = "bench.throughput.webhook_receiver"
    process = subprocess.Popen([sys.executable, "-m", module, str(port)], cwd=ROOT)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
    receiver = Receiver(process, str(http.base_url).rstrip("/"), http)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                receiver.summary([])
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("(l): the webhook receiver did not start") from None
                time.sleep(0.1)
        yield receiver
    finally:
        http.close()
        process.terminate()
        process.wait(timeout=10)


@dataclass(frozen=True)
class Hooks:
    """The adapters' owner signed in to the cabinet API, and the adapters whose webhooks the bench
    sets: ADAPTERS of them, then the slow one."""

    http: httpx.Client
    adapters: list[int]
    receiver: Receiver

    def put(self, adapter: int, path: str, *, enabled: bool) -> None:
        answer = self.http.put(
            f"/api/users/adapters/{adapter}/webhook",
            json={"url": self.receiver.base_url + path, "enabled": enabled},
        )
        if answer.status_code != 200:
            raise SystemExit(f"(l): PUT webhook of {adapter}: {answer.status_code} {answer.text}")


def hooks_create(bench: Bench, receiver: Receiver) -> Hooks:
    """A cabinet user of its own with ADAPTERS + 1 adapters, signed in; each adapter's webhook
    created disabled (the bench's other adapters keep receiving: a webhook refuses receives)."""
    password = secrets.token_urlsafe(18)
    logins = [f"bench-webhook-{n}" for n in range(ADAPTERS)] + ["bench-webhook-slow"]
    code = OWNER_CODE.format(owner=OWNER, password=password, logins=logins)
    out = manage(bench.database_url, "shell", "-c", code)
    adapters = [int(a) for a in json_line(out)]
    device = {"X-Device-ID": "bench-webhook-owner"}
    http = httpx.Client(base_url=bench.server.base_url, headers=device, timeout=30)
    signed = http.post("/api/auth/login/username", json={"username": OWNER, "password": password})
    if signed.status_code != 200:
        raise SystemExit(f"(l): the owner's sign-in: {signed.status_code} {signed.text}")
    http.headers["Authorization"] = f"Bearer {signed.json()['accessToken']}"
    hooks = Hooks(http, adapters, receiver)
    for adapter in adapters:
        hooks.put(adapter, "/fast/created", enabled=False)
    return hooks


def json_line(out: str) -> list[Any]:
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    found: list[Any] = json.loads(line[6:])
    return found


# --- One throughput turn --------------------------------------------------------------------------


@dataclass
class Delivered:
    """One turn: queues filled, webhooks enabled, everything delivered."""

    messages: int  # distinct messages the receiver had
    requests: int  # its POSTs: a message posted twice counts twice
    seconds: float  # from the first PUT to the last arrival
    first_ms: float  # from the first PUT to the first arrival
    left: int  # messages still queued a second after the last arrival
    posts: tuple[float, float]  # the deliverers' POSTs in the turn: seconds and count
    cpu: CpuShare  # its client: the receiver
    receiver_cpu: float = field(default=0.0)  # seconds

    def line(self) -> str:
        post_ms = 1000 * self.posts[0] / max(1, self.posts[1])
        return (
            f"{self.messages:,} msgs in {self.seconds:.1f} s, {self.messages / self.seconds:,.0f}"
            f"/s; POSTs {self.requests:,}; first after {self.first_ms:.0f} ms; left "
            f"{self.left}; the deliverers' mean POST {post_ms:.2f} ms"
        )


def posts_so_far(bench: Bench) -> tuple[float, float]:
    """The deliverers' POST seconds and count so far, from the server's histogram."""
    text = httpx.get(bench.server.base_url + "/actuator/prometheus", timeout=30).text
    found = []
    for part in ("sum", "count"):
        name = f"platform_exchange_webhook_delivery_seconds_{part}"
        match = re.search(rf"^{name} (\S+)$", text, re.M)
        found.append(float(match.group(1)) if match else 0.0)
    return found[0], found[1]


def arrived(receiver: Receiver, paths: list[str], count: int) -> dict[str, float]:
    """The receiver's summary once it has had ``count`` distinct messages on ``paths``, or once
    nothing more has come for STALL_SECONDS."""
    summary = receiver.summary(paths)
    seen, progress_at = 0.0, time.monotonic()
    while summary["distinct"] < count:
        if summary["distinct"] > seen:
            seen, progress_at = summary["distinct"], time.monotonic()
        elif time.monotonic() - progress_at > STALL_SECONDS:
            log(f"(l) {count - seen:,.0f} of {count:,} not delivered: nothing came for 30 s")
            break
        time.sleep(POLL_SECONDS)
        summary = receiver.summary(paths)
    return summary


def queued(bench: Bench, adapters: list[int]) -> int:
    with psycopg.connect(bench.database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM exchange_message WHERE recipient_id = ANY(%s)", [adapters]
        ).fetchone()
    return int(row[0]) if row else 0


def delivered_turn(
    bench: Bench, hooks: Hooks, adapters: list[int], tag: str, fill: int
) -> Delivered:
    """Fill each adapter's queue with ``fill`` messages, enable their webhooks, wait until the
    receiver has them all, disable them."""
    sender = bench.sender.principal.adapter_id
    for adapter in adapters:
        api_fill(bench.database_url, adapter, sender, fill)
    paths = [f"/fast/{tag}-{n}" for n in range(len(adapters))]
    receiver = hooks.receiver
    posts = posts_so_far(bench)
    meter = CpuMeter(bench.server, background=True)
    receiver_before = receiver.cpu_seconds()
    started = time.monotonic()
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=True)
    summary = arrived(receiver, paths, fill * len(adapters))
    receiver_cpu = receiver.cpu_seconds() - receiver_before
    cpu = meter.read(client_cpu=receiver_cpu)
    posted = posts_so_far(bench)
    time.sleep(1.0)
    turn = Delivered(
        messages=int(summary["distinct"]),
        requests=int(summary["requests"]),
        seconds=summary["last"] - started,
        first_ms=1000 * (summary["first"] - started),
        left=queued(bench, adapters),
        posts=(posted[0] - posts[0], posted[1] - posts[1]),
        cpu=cpu,
        receiver_cpu=receiver_cpu,
    )
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=False)
    receiver.forget(paths)
    log(f"(l) turn {tag}: {turn.line()}")
    return turn


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
        notes.append(f"{key:<8} {turn.cpu.line()}  (client: the receiver)")
        notes.append(
            " " * 11 + f"{turn.line()}; the receiver {per_request:.0f} µs of CPU per request "
            f"(one core's worth: {1e6 / per_request:,.0f}/s)"
        )
    return notes


# --- Latency --------------------------------------------------------------------------------------


def pushed_run(bench: Bench, hooks: Hooks, adapters: list[int], tag: str) -> Pushed:
    """(j)'s sender against webhooks: one message per POST at the plan's rate, round robin over
    ``adapters``, each payload stamped with the monotonic time its send began; the latency is
    from there to the receiver's arrival (its first, should a message be posted twice)."""
    plan, result = bench.plan, Pushed()
    warmup = warmup_of(len(adapters))
    total = warmup + plan.longpoll_messages
    paths = [f"/fast/{tag}-{n}" for n in range(len(adapters))]
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=True)
    time.sleep(1.0)  # every deliverer has read the webhooks again
    meter = CpuMeter(bench.server)
    receiver_before = hooks.receiver.cpu_seconds()
    headers = {**bench.sender.headers(), "Content-Type": "application/json"}
    with httpx.Client(base_url=bench.server.base_url, headers=headers, timeout=30) as http:
        next_at = time.monotonic()
        for number in range(total):
            next_at += 1.0 / plan.longpoll_rate
            started = time.monotonic()
            body = send_body(adapters[number % len(adapters)], [payload(started, number)])
            response = http.post(SEND, content=body)
            if number >= warmup:
                result.send_ms.append(1000 * (time.monotonic() - started))
            if response.status_code != 201:
                result.errors[f"send {response.status_code}"] += 1
            time.sleep(max(0.0, next_at - time.monotonic()))
    arrived(hooks.receiver, paths, total)
    result.cpu = meter.read(client_cpu=hooks.receiver.cpu_seconds() - receiver_before)
    first: dict[int, float] = {}
    for at, sent_at, n in hooks.receiver.arrivals(paths):
        first[int(n)] = min(first.get(int(n), at - sent_at), at - sent_at)
    result.latencies_ms = [1000 * value for n, value in first.items() if n >= warmup]
    result.missing = total - len(first)
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=False)
    hooks.receiver.forget(paths)
    return result


def latency_note(key: str, pushed: Pushed) -> str:
    return (
        f"{key:<8} {pushed.cpu.line()}  (client: the receiver; send call p50 "
        f"{percentile(pushed.send_ms, 0.5):.1f} ms; not delivered {pushed.missing}; errors "
        f"{dict(pushed.errors) or 0})"
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
        hooks = hooks_create(bench, receiver)
        fast = hooks.adapters[:ADAPTERS]
        queue_clear(bench.database_url, hooks.adapters)  # and the phase's one checkpoint
        many = turns_of(bench, hooks, fast, "(l)", "l")
        bench.notes += turn_notes("(l)", many)
        bench.settle("(l)lat")
        pushed = pushed_run(bench, hooks, fast, "l-latency")
        bench.notes.append(latency_note("(l)lat", pushed))
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
        pending += slow_pending
    latencies = {}
    for loaded in (False, True):
        with slow_loaded(bench, hooks, loaded) as slow_pending:
            latencies[loaded] = pushed_run(bench, hooks, fast, f"f-latency-{int(loaded)}")
        pending += slow_pending
    slow_posts = int(hooks.receiver.summary(["/slow/s"])["requests"])
    for loaded, key in ((False, "(l)fast"), (True, "(l)f+slow")):
        bench.notes += turn_notes(key, turns[loaded])
        bench.notes.append(latency_note(key, latencies[loaded]))
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
