"""The adapters' client against a hand-written httpx loop: what the library's consume loop costs.

    .venv/bin/python -m bench.client [--rounds N] [--seconds S] [--quiet-wait S] [--keep-db]
    .venv/bin/python -m bench.client --breakdown

It builds the ``client_bench`` database (as bench.throughput builds its own: on the server of
DATABASE_URL, or on the embedded PostgreSQL; dropped after), uses the Redis of REDIS_URL or a
redis-server of its own, starts one gunicorn with the production shape (deploy/gunicorn.conf.py,
2 workers x 8 threads, bench.throughput.servers.server_start) and, in this one process, drains a
prefilled queue at batch 1 and at batch 100 with:

(a) a hand-written loop on a plain ``httpx.Client`` (HTTP/1.1, keep-alive): GET
    /api/exchange/messages?max=N&waitSeconds=0&leaseSeconds=30, a no-op handler per message,
    then POST /api/exchange/messages/ack with the ids and the next receive's options, which
    answers the next batch (docs/exchange.md, "Acknowledging and receiving in one request"), and
    so on, Bearer token and X-Device-ID on every request: the requests consume() makes;
(b) ``ExchangeClient(...).consume(handler, batch=N, wait=0, until_empty=True)`` with the same
    no-op handler: the library's loop as an adapter runs it (Message objects, the lease keeper,
    the token and retry wrappers all included).

Each side has an adapter of its own, signed in once before the measurements (sign-in is a
password hash, not the loop's cost); before every measurement its queue is filled to the same
depth with SQL and the table vacuumed, and a measurement ends at the first empty receive, so both
sides make exactly the same requests. The two sides take turns (a b, b a, a b...) so that the
machine's noise falls on both; each figure is the median of the rounds, and the ratio is
(b)'s median over (a)'s, against a target of 0.9 x. A first unmeasured drain per side warms both
up and sizes the queue so that a measurement lasts about ``--seconds``.

Exit status 0 when both ratios reach 0.9 x, 1 otherwise. docs/performance.md has a run.

``--breakdown`` measures instead, in this process and without a server (httpx.MockTransport
answering from memory), the CPU per message of the hand-written loop, of the same loop on the
client's receive() and ack_and_receive(), and of consume(): what each layer of the client
adds.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import secrets
import statistics
import tempfile
import time
import timeit
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from exchange_client import ExchangeClient, Message

from bench.throughput.load import LEASE_SECONDS
from bench.throughput.machine import cpu_model, cpu_seconds, quiet_wait
from bench.throughput.report import log
from bench.throughput.servers import (
    GUNICORN_THREADS,
    GUNICORN_WORKERS,
    Principal,
    Server,
    database_drop,
    database_facts,
    database_prepare,
    manage,
    principals_create,
    queue_fill,
    redis_for_bench,
    server_start,
    sign_in,
)

BENCH_DATABASE = "client_bench"
BATCHES = (1, 100)
TARGET = 0.9
# The unmeasured first drain per side and batch size: warms both up and sizes the queues.
WARM_UP_DEPTH = {1: 400, 100: 8_000}
HAND = "hand-written httpx loop"
CALLS = "receive() + ack_and_receive()"
LIBRARY = "ExchangeClient.consume()"


def handle(message: object) -> None:
    """The handler of both loops: does nothing, so that only the loops are measured."""


# --- The two loops -------------------------------------------------------------------------------


def hand_written(http: httpx.Client, batch: int) -> int:
    """Receive, handle, then ACK receiving the next batch, until a receive finds nothing; the
    messages acknowledged.

    What an adapter's developer writes with httpx: the query string and the receive's options
    built once (as in docs/adapters.md's consumer), the JSON parsed, the handler called per
    message, the ACK's results read, and any error answer stops it."""
    receive = f"/api/exchange/messages?max={batch}&waitSeconds=0&leaseSeconds={LEASE_SECONDS}"
    options = {"max": batch, "waitSeconds": 0, "leaseSeconds": LEASE_SECONDS}
    answer = http.get(receive)
    if answer.status_code != 200:
        raise SystemExit(f"receive: {answer.status_code} {answer.text[:300]}")
    messages = answer.json()["messages"]
    acked = 0
    while messages:
        for message in messages:
            handle(message)
        ids = [message["messageId"] for message in messages]
        answer = http.post(
            "/api/exchange/messages/ack", json={"messageIds": ids, "receive": options}
        )
        if answer.status_code != 200:
            raise SystemExit(f"ACK: {answer.status_code} {answer.text[:300]}")
        body = answer.json()
        acked += sum(result["status"] == "acked" for result in body["results"])
        messages = body["messages"]
    return acked


def library(client: ExchangeClient, batch: int) -> int:
    """The client's own loop, until a receive finds nothing; the messages it handled."""
    handler: Callable[[Message], object] = handle
    summary = client.consume(
        handler, batch=batch, wait=0, lease=LEASE_SECONDS, until_empty=True, handle_signals=False
    )
    if summary.failed or summary.given_back:
        raise SystemExit(f"consume: {summary}")
    return summary.handled


# --- Measurements --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One loop over one adapter's queue."""

    name: str
    principal: Principal
    drain: Callable[[int], int]  # batch -> messages handled


@dataclass(frozen=True)
class Drain:
    messages: int
    seconds: float
    client_cpu: float  # this process, every thread (the lease keeper's too)
    server_cpu: float  # the gunicorn workers

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def server_cpu(server: Server) -> float:
    total = 0.0
    for process in server.workers():
        with contextlib.suppress(Exception):
            total += cpu_seconds(process)
    return total


def left_in_queue(database_url: str, adapter_id: int) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM exchange_message WHERE recipient_id = %s", [adapter_id]
        ).fetchone()
    return int(row[0]) if row else 0


def measure(
    database_url: str, server: Server, sender: Principal, side: Side, batch: int, depth: int
) -> Drain:
    """Fill ``side``'s queue to ``depth`` (then VACUUM ANALYZE, CHECKPOINT) and drain it."""
    queue_fill(database_url, [side.principal.adapter_id], sender.adapter_id, depth)
    cpu_from, server_from = time.process_time(), server_cpu(server)
    started = time.perf_counter()
    handled = side.drain(batch)
    seconds = time.perf_counter() - started
    cpu, server_used = time.process_time() - cpu_from, server_cpu(server) - server_from
    left = left_in_queue(database_url, side.principal.adapter_id)
    if handled != depth or left:
        raise SystemExit(f"{side.name}, batch {batch}: handled {handled} of {depth}, {left} left")
    return Drain(handled, seconds, cpu, server_used)


@dataclass(frozen=True)
class Figures:
    batch: int
    depth: int
    runs: dict[str, list[Drain]]

    def median_rate(self, name: str) -> float:
        return float(statistics.median(drain.rate for drain in self.runs[name]))

    def ratio(self) -> float:
        return self.median_rate(LIBRARY) / self.median_rate(HAND)

    def pair_ratios(self) -> list[float]:
        return [
            mine.rate / theirs.rate
            for mine, theirs in zip(self.runs[LIBRARY], self.runs[HAND], strict=True)
        ]

    def per_message_us(self, name: str, cpu: Callable[[Drain], float]) -> float:
        drains = self.runs[name]
        return 1e6 * sum(cpu(d) for d in drains) / sum(d.messages for d in drains)


def batch_figures(
    database_url: str,
    server: Server,
    sender: Principal,
    sides: tuple[Side, Side],
    batch: int,
    rounds: int,
    seconds: float,
) -> Figures:
    """One batch size: an unmeasured drain per side, then ``rounds`` rounds in turns."""
    warm = {
        side.name: measure(database_url, server, sender, side, batch, WARM_UP_DEPTH[batch])
        for side in sides
    }
    fastest = max(drain.rate for drain in warm.values())
    step = 100 * batch
    depth = max(step, round(fastest * seconds / step) * step)
    log(
        f"batch {batch}: warm-up at "
        + ", ".join(f"{name} {drain.rate:,.0f} msgs/s" for name, drain in warm.items())
        + f"; {depth:,} messages per measurement"
    )
    runs: dict[str, list[Drain]] = {side.name: [] for side in sides}
    for round_ in range(rounds):
        order = sides if round_ % 2 == 0 else sides[::-1]
        for side in order:
            drain = measure(database_url, server, sender, side, batch, depth)
            runs[side.name].append(drain)
            log(
                f"batch {batch}, round {round_ + 1}/{rounds}: {side.name:<25} "
                f"{drain.rate:8,.0f} msgs/s ({drain.seconds:.1f} s, "
                f"client CPU {1e6 * drain.client_cpu / drain.messages:,.0f} us/msg)"
            )
    return Figures(batch, depth, runs)


# --- Where the client's CPU goes: --breakdown -----------------------------------------------------

BREAKDOWN_MESSAGES = {1: 3_000, 100: 60_000}
BREAKDOWN_ROUNDS = 9
TOKEN = "e" * 260  # about an access token's length
URL = "http://bench.invalid"
# What the platform's sign-in answer sets (django-axes opens a Django session to record it).
SIGN_IN_COOKIE = "sessionid=6wgz1p75smy2oo6m3pv5iqzlx07cyx4u; HttpOnly; Path=/; SameSite=Lax"


def canned_message(number: int) -> dict[str, Any]:
    """A message as the receive hands it out (docs/adapters.md)."""
    return {
        "messageId": str(uuid.UUID(int=number)),
        "receiptHandle": base64.urlsafe_b64encode(secrets.token_bytes(48)).decode(),
        "deliveryCount": 1,
        "redelivered": False,
        "enqueuedAt": "2026-11-21T09:30:00.123456Z",
        "leaseExpiresAt": "2026-11-21T09:31:00Z",
        "sender": 17,
        "type": "bench",
        "headers": {},
        "payload": {"n": 1},
    }


def canned_transport(batch: int, total: int) -> httpx.MockTransport:
    """The platform's answers from memory: ``total`` messages in receives of ``batch`` (a GET's,
    or an ACK's that receives), then none; each ACK acknowledges them. Without a server, only
    the client's CPU is left."""
    messages = [canned_message(number) for number in range(batch)]
    results = json.dumps([{"messageId": m["messageId"], "status": "acked"} for m in messages])
    full, empty = json.dumps(messages), "[]"
    tokens = json.dumps({"accessToken": TOKEN, "refreshToken": TOKEN}).encode()
    left = total

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal left
        headers = {"Content-Type": "application/json"}
        path, body = request.url.path, b"{}"
        if path == "/api/auth/login/username":
            headers["Set-Cookie"] = SIGN_IN_COOKIE
            body = tokens
        elif path in ("/api/exchange/messages", "/api/exchange/messages/ack"):
            receives = path == "/api/exchange/messages" or b'"receive"' in request.content
            received = ""
            if receives:
                received, left = (full, left - batch) if left > 0 else (empty, left)
            if path == "/api/exchange/messages":
                body = f'{{"messages":{received}}}'.encode()
            elif receives:
                body = f'{{"results":{results},"messages":{received}}}'.encode()
            else:
                body = f'{{"results":{results}}}'.encode()
        return httpx.Response(200, content=body, headers=headers)

    return httpx.MockTransport(answer)


def by_calls(client: ExchangeClient, batch: int) -> int:
    """The hand-written loop on the client's calls: receive(), the handler, ack_and_receive()."""
    acked = 0
    messages = client.receive(batch, 0, LEASE_SECONDS)
    while messages:
        for message in messages:
            handle(message)
        results, messages = client.ack_and_receive(messages, batch, 0, LEASE_SECONDS)
        acked += sum(status == "acked" for status in results.values())
    return acked


def breakdown_cpu(batch: int, loop: str) -> float:
    """CPU seconds per message of one drain of canned answers."""
    transport = canned_transport(batch, BREAKDOWN_MESSAGES[batch])
    started: float
    if loop == HAND:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-Device-ID": "breakdown"}
        with httpx.Client(base_url=URL, transport=transport, headers=headers) as http:
            started = time.process_time()
            messages = hand_written(http, batch)
    else:
        with ExchangeClient(
            URL, "login", "password", device_id="breakdown", transport=transport
        ) as client:
            client.whoami()  # signs in
            started = time.process_time()
            messages = by_calls(client, batch) if loop == CALLS else library(client, batch)
    return (time.process_time() - started) / messages


def breakdown() -> list[str]:
    """The client's CPU per message against the hand-written loop's, step by step, in this one
    process and without a server: the figures the server's noise hides."""
    loops = (HAND, CALLS, LIBRARY)
    lines = [f"{'batch':>5}  {HAND:>23}  {CALLS:>38}  {LIBRARY:>26}  {'Message.from_json':>17}"]
    raw = canned_message(1)
    for batch in BATCHES:
        cpu: dict[str, list[float]] = {loop: [] for loop in loops}
        for round_ in range(BREAKDOWN_ROUNDS):
            for loop in loops if round_ % 2 == 0 else loops[::-1]:
                cpu[loop].append(breakdown_cpu(batch, loop))
        us = {loop: 1e6 * statistics.median(cpu[loop]) for loop in loops}
        parse = 1e6 * timeit.timeit(lambda: Message.from_json(raw), number=20_000) / 20_000
        calls, consume = us[CALLS] - us[HAND], us[LIBRARY] - us[CALLS]
        lines.append(
            f"{batch:>5}  {us[HAND]:>20.1f} us  {us[CALLS]:>26.1f} us ({calls:+6.1f})"
            f"  {us[LIBRARY]:>14.1f} us ({consume:+6.1f})  {parse:>14.1f} us"
        )
    return lines


# --- The report ----------------------------------------------------------------------------------


def report(figures: list[Figures]) -> list[str]:
    """The table: one line per loop and batch size, columns aligned."""
    rows = [
        [
            "batch",
            "loop",
            "msgs/s",
            "each round (msgs/s)",
            "client CPU/msg",
            "gunicorn CPU/msg",
            "client / hand",
            "result",
        ]
    ]
    for figure in figures:
        for name in (HAND, LIBRARY):
            ratio_cell, result = "baseline", ""
            if name == LIBRARY:
                ratio, pairs = figure.ratio(), figure.pair_ratios()
                ratio_cell = f"{ratio:.2f} x"
                result = (
                    f"{'PASS' if ratio >= TARGET else 'FAIL'} (>= {TARGET} x; round by round "
                    f"{min(pairs):.2f}-{max(pairs):.2f})"
                )
            rows.append(
                [
                    str(figure.batch),
                    name,
                    f"{figure.median_rate(name):,.0f}",
                    " ".join(f"{drain.rate:,.0f}" for drain in figure.runs[name]),
                    f"{figure.per_message_us(name, lambda d: d.client_cpu):,.0f} us",
                    f"{figure.per_message_us(name, lambda d: d.server_cpu):,.0f} us",
                    ratio_cell,
                    result,
                ]
            )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {0, 2, 4, 5, 6}
    lines = [
        "  ".join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rounds", type=int, default=7, help="measurements per loop and batch size (7)"
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="about how long each measurement lasts (4)"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="seconds to wait, before each batch size, for other programs to leave the CPU (30)",
    )
    parser.add_argument("--keep-db", action="store_true", help=f"keep {BENCH_DATABASE} after")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="instead: the client's CPU per message against the hand-written loop's, step by "
        "step, in this process against canned answers (no server; about 30 s)",
    )
    args = parser.parse_args(argv)
    if args.breakdown:
        print(
            f"The client's CPU per message, without a server (httpx.MockTransport answering from "
            f"memory; {cpu_model()}, load average {os.getloadavg()[0]:.2f}); median of "
            f"{BREAKDOWN_ROUNDS} drains of {BREAKDOWN_MESSAGES[1]:,} (batch 1) and "
            f"{BREAKDOWN_MESSAGES[100]:,} (batch 100) messages in turns; in brackets what each "
            "step adds to the one on its left\n"
        )
        print("\n".join(breakdown()))
        return 0

    load_before = os.getloadavg()
    log(f"preparing {BENCH_DATABASE}")
    database_url, where = database_prepare(BENCH_DATABASE)
    figures: list[Figures] = []
    idle: list[float] = []
    with contextlib.ExitStack() as stack:
        if not args.keep_db:
            stack.callback(database_drop, database_url, BENCH_DATABASE)
        facts = database_facts(database_url)
        manage(database_url, "migrate", "--no-input", "-v", "0")
        (hand_p, library_p), sender = principals_create(database_url, 2)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="client-bench-")))
        redis = stack.enter_context(redis_for_bench(workdir))
        log("starting gunicorn")
        server = server_start(database_url, workdir)
        stack.callback(server.stop)

        # Both on HTTP/1.1 keep-alive with httpx's defaults, both bound to a device id of their
        # own, both signed in before the first measurement.
        hand_session = sign_in(server.base_url, hand_p, "client-bench-hand")
        http = stack.enter_context(
            httpx.Client(base_url=server.base_url, headers=hand_session.headers(), timeout=30)
        )
        client = stack.enter_context(
            ExchangeClient(
                server.base_url,
                library_p.login,
                library_p.password,
                device_id="client-bench-library",
            )
        )
        client.whoami()  # signs in
        sides = (
            Side(HAND, hand_p, lambda batch: hand_written(http, batch)),
            Side(LIBRARY, library_p, lambda batch: library(client, batch)),
        )
        for batch in BATCHES:
            log(f"batch {batch}: waiting for a quiet machine (up to {args.quiet_wait:g} s)")
            idle.append(quiet_wait(args.quiet_wait))
            figures.append(
                batch_figures(database_url, server, sender, sides, batch, args.rounds, args.seconds)
            )
    load_after = os.getloadavg()

    print()
    print("The adapters' client against a hand-written httpx loop, receive + ACK")
    print(
        f"machine: {platform.node()}, {cpu_model()}, nproc {os.cpu_count()}, "
        f"Python {platform.python_version()}, httpx {httpx.__version__}, "
        f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after; machine busy "
        + " / ".join(f"{busy:.0f}%" for busy in idle)
        + " of a core before each batch size"
    )
    print(
        f"database: PostgreSQL {facts['version']} ({where}), database {BENCH_DATABASE}; "
        f"server: deploy/serve, {GUNICORN_WORKERS} processes x {GUNICORN_THREADS} threads; "
        f"Redis: {redis}"
    )
    print(
        f"load: one loop at a time in this process, one keep-alive connection; "
        f"{args.rounds} rounds per batch size in turns, each draining "
        + ", ".join(f"{f.depth:,} (batch {f.batch})" for f in figures)
        + " messages; msgs/s: the median round; CPU: per message"
    )
    print()
    print("\n".join(report(figures)))
    return 0 if all(figure.ratio() >= TARGET for figure in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
