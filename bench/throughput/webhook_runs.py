"""(l)'s runs against the platform's webhooks: the receiver's process and the bench's handle on
it, the adapters' owner setting webhooks through the cabinet API, a throughput turn (queues filled,
webhooks enabled, everything delivered) and a latency run ((j)'s sender, the receiver's arrivals).
``webhook_figures`` puts them together into rows.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import psycopg

from bench.throughput.api import SEND, send_body
from bench.throughput.figures import Bench
from bench.throughput.flow import payload
from bench.throughput.machine import CpuMeter, CpuShare, cpu_seconds
from bench.throughput.report import log
from bench.throughput.servers import ROOT, manage
from bench.throughput.stream_handlers import api_fill
from bench.throughput.stream_latency import Pushed, warmup_of
from platform_site.embedded import free_port

STALL_SECONDS = 30.0  # a turn gives up once nothing more has arrived for this long
POLL_SECONDS = 0.1  # how often the bench asks the receiver how far it got
CONCURRENCY = int(os.environ.get("EXCHANGE_WEBHOOK_CONCURRENCY", "10"))  # the server's, inherited
# The adapters' owner is the bench's (servers.principals_create), so that its sender may send to
# them; given a password the bench knows, to sign in to the cabinet API as owners do.
OWNER = "bench-owner"
OWNER_CODE = """
import json
from accounts.models import User
from accounts.services.adapters import adapter_create
owner = User.objects.get(username={owner!r})
owner.set_password({password!r})
owner.email_confirmed = True
owner.save()
made = [adapter_create(owner=owner, login=login) for login in {logins!r}]
print("BENCH " + json.dumps([c.adapter_id for c in made]))
"""
ATTEMPTS = (
    "SELECT count(*), coalesce(avg(latency_ms), 0), count(*) FILTER (WHERE outcome <> "
    "'delivered') FROM exchange_webhookattempt WHERE adapter_id = ANY(%s) AND id > %s"
)


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
    sets: the fast endpoints' adapters, then the slow one's."""

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


def hooks_create(bench: Bench, receiver: Receiver, fast: int) -> Hooks:
    """``fast`` + 1 adapters of their own, their owner signed in; each adapter's webhook created
    disabled (the bench's other adapters keep receiving: a webhook refuses receives)."""
    password = secrets.token_urlsafe(18)
    logins = [f"bench-webhook-{n}" for n in range(fast)] + ["bench-webhook-slow"]
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

    endpoints: int
    messages: int  # distinct messages the receiver had
    requests: int  # its POSTs: a message posted twice counts twice
    seconds: float  # from the first PUT to the last arrival
    first_ms: float  # from the first PUT to the first arrival
    left: int  # messages still queued a second after the last arrival
    attempts: tuple[int, float, int]  # the delivery log's: POSTs, their mean ms, not delivered
    cpu: CpuShare  # its client: the receiver
    receiver_cpu: float  # seconds of its CPU
    before: float = 0.0  # the machine's CPU just before the turn (Bench.settle), % of a core

    def line(self) -> str:
        """With where a message's time goes: an endpoint's room (CONCURRENCY) is taken from its
        claim to its settling, so at this rate each message held it slot_ms, of which its POST
        (as the deliverer timed it, in the delivery log) took post_ms."""
        rate = self.messages / self.seconds
        slot_ms = 1000 * CONCURRENCY * self.endpoints / rate
        posts, post_ms, failed = self.attempts
        return (
            f"{self.messages:,} msgs in {self.seconds:.1f} s, {rate:,.0f}/s; POSTs "
            f"{self.requests:,} ({posts:,} logged, {failed} not delivered); first after "
            f"{self.first_ms:.0f} ms; left {self.left}; each held its endpoint's room "
            f"{slot_ms:.1f} ms, its POST {post_ms:.1f} ms of them"
        )


def attempts_after(bench: Bench, adapters: list[int], after: int) -> tuple[int, float, int]:
    """The delivery log's attempts for ``adapters`` after the attempt ``after``: how many, their
    mean POST in ms (the deliverer's own timing, per endpoint), how many were not delivered."""
    with psycopg.connect(bench.database_url, autocommit=True) as conn:
        row = conn.execute(ATTEMPTS, [adapters, after]).fetchone()
    return (int(row[0]), float(row[1]), int(row[2])) if row else (0, 0.0, 0)


def last_attempt(bench: Bench) -> int:
    with psycopg.connect(bench.database_url, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM exchange_webhookattempt").fetchone()
    return int(row[0]) if row else 0


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
    after = last_attempt(bench)
    meter = CpuMeter(bench.server, background=True)
    receiver_before = receiver.cpu_seconds()
    started = time.monotonic()
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=True)
    summary = arrived(receiver, paths, fill * len(adapters))
    receiver_cpu = receiver.cpu_seconds() - receiver_before
    cpu = meter.read(client_cpu=receiver_cpu)
    time.sleep(1.0)  # the last outcomes settled
    turn = Delivered(
        endpoints=len(adapters),
        messages=int(summary["distinct"]),
        requests=int(summary["requests"]),
        seconds=summary["last"] - started,
        first_ms=1000 * (summary["first"] - started),
        left=queued(bench, adapters),
        attempts=attempts_after(bench, adapters, after),
        cpu=cpu,
        receiver_cpu=receiver_cpu,
    )
    for adapter, path in zip(adapters, paths, strict=True):
        hooks.put(adapter, path, enabled=False)
    receiver.forget(paths)
    log(f"(l) turn {tag}: {turn.line()}")
    return turn


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
