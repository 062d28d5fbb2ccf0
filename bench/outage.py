"""PostgreSQL crashes under a live exchange: how long requests take to fail while it is gone, and
how soon they succeed once it is back (docs/operations.md, "When PostgreSQL goes away").

    .venv/bin/python -m bench.outage [--runs 5] [--outage 5] [--after 5] [--stop kill|fast]

It starts a PostgreSQL of its own in a temporary folder (platform_site.embedded, as
tests/stack/conftest.py's StackDatabase does), migrates it, uses the Redis of REDIS_URL or a
redis-server of its own, and serves the platform with one gunicorn in the production shape
(bench.throughput.servers.server_start: deploy/gunicorn.conf.py, 2 workers x 8 threads). In this
process, plain httpx loops run the exchange the whole time, each thread on one keep-alive
connection and a device id of its own: senders (the sender adapter) send to the consumers in
turn, and each consumer adapter's receiver receives up to 10 messages and ACKs them. A loop waits
--pause (20 ms) after every send and after every failed or empty receive: it ignores Retry-After
on purpose, so that the delays measured are the server's and not a client's back-off. Another
thread asks /api/actuator/health every 0.1 s.

Each run SIGKILLs the postmaster (the pid in postmaster.pid), as the fault run did, waits until
its processes are gone, leaves PostgreSQL down for --outage seconds, starts it again (crash
recovery included), and keeps the loops running for --after seconds. It reports:

- during the outage (exchange requests started once the server's last process was gone, a few ms
  after the kill, and before PostgreSQL accepted connections again): how long the first one took,
  the median and the maximum of the others, and their answers (503 SERVICE_UNAVAILABLE with
  Retry-After expected);
- from the moment PostgreSQL accepts connections again (its postmaster.pid says "ready", read
  every 2 ms): when the first send answered 201, when the first ACK of a receive answered 200,
  when health said UP, and how many exchange requests failed after that moment.

At the end the senders stop, the receivers drain the queues, and the database is asked whether
every message sent with 201 was received and ACKed (it is in the delivery log) and whether anything
is left queued or dead-lettered. Exit status 0 when nothing was lost and every exchange request
during the outages answered 503, 1 otherwise. docs/operations.md has a run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import platform
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

from bench.throughput.machine import cpu_model
from bench.throughput.report import log
from bench.throughput.servers import (
    GUNICORN_THREADS,
    GUNICORN_WORKERS,
    Client,
    Server,
    manage,
    principals_create,
    redis_for_bench,
    server_start,
    sign_in,
)
from platform_site import embedded

DATABASE = "outage_bench"
BATCH = 10
LEASE_SECONDS = 30
HEALTH_EVERY = 0.1
SLOW_MS = 100
ACCEPT_POLL = 0.002
EXCHANGE = ("send", "receive", "ack")
# What the workers log when their view of the database changes.
AVAILABILITY_LOGGER = "platform_site.db.availability"
FLIPS = {"down": "PostgreSQL does not answer", "up": "PostgreSQL answers again"}


# --- The traffic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    kind: str  # send, receive, ack, health
    started: float  # time.monotonic()
    ended: float
    status: int  # 0: no answer at all (a transport error)
    code: str  # the problem's code; health's status
    retry_after: str | None

    @property
    def ok(self) -> bool:
        return self.status in (200, 201)

    @property
    def ms(self) -> float:
        return 1000 * (self.ended - self.started)

    def answer(self) -> str:
        return f"{self.status} {self.code}".strip() if self.status else "no answer"


class Traffic:
    """Senders, receivers and a health poller, each a thread on a connection of its own, recording
    every call they make until stopped."""

    def __init__(
        self,
        base_url: str,
        senders: list[Client],
        receivers: list[Client],
        *,
        pause: float,
        wait: int,
    ) -> None:
        self.base_url = base_url
        self.pause = pause
        self.wait = wait
        self.calls: list[Call] = []
        self.sent: dict[str, int] = {}  # messageId -> the payload's n, for every 201
        self.received: set[str] = set()
        self.acked: set[str] = set()  # the messages an ACK answered "acked" for
        self.redeliveries: list[int] = []  # per receive: appended, so threads never race on a sum
        self.sending = threading.Event()
        self.receiving = threading.Event()
        self._numbers = itertools.count()
        recipients = [client.principal.adapter_id for client in receivers]
        self._senders = [
            threading.Thread(target=self._send, args=(client, recipients[n:] + recipients[:n]))
            for n, client in enumerate(senders)
        ]
        self._receivers = [
            threading.Thread(target=self._receive, args=(client,)) for client in receivers
        ]
        self._receivers.append(threading.Thread(target=self._poll_health))

    def start(self) -> None:
        self.sending.set()
        self.receiving.set()
        for thread in [*self._senders, *self._receivers]:
            thread.start()

    def stop_sending(self) -> None:
        self.sending.clear()
        for thread in self._senders:
            thread.join()

    def stop(self) -> None:
        self.stop_sending()
        self.receiving.clear()
        for thread in self._receivers:
            thread.join()

    def _call(self, http: httpx.Client, kind: str, method: str, url: str, **kw: Any) -> Any:
        """The JSON of a 200 or 201 answer, else None; the call recorded either way."""
        started = time.monotonic()
        try:
            response = http.request(method, url, **kw)
        except httpx.TransportError as error:
            self.calls.append(Call(kind, started, time.monotonic(), 0, type(error).__name__, None))
            return None
        ended = time.monotonic()
        body: Any = None
        if response.headers.get("Content-Type", "").endswith("json"):
            body = response.json()
        code = ""
        if isinstance(body, dict):
            code = str(body.get("status") if kind == "health" else body.get("code") or "")
        retry_after = response.headers.get("Retry-After")
        self.calls.append(Call(kind, started, ended, response.status_code, code, retry_after))
        return body if response.status_code in (200, 201) else None

    def _client(self, client: Client | None = None) -> httpx.Client:
        headers = client.headers() if client is not None else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=60)

    def _send(self, client: Client, recipients: list[int]) -> None:
        with self._client(client) as http:
            for recipient in itertools.cycle(recipients):
                if not self.sending.is_set():
                    return
                n = next(self._numbers)
                message = {"to": recipient, "type": "outage", "payload": {"n": n}}
                sent = self._call(http, "send", "POST", "/api/exchange/messages", json=message)
                if sent is not None:
                    self.sent[sent["messageId"]] = n
                time.sleep(self.pause)

    def _receive(self, client: Client) -> None:
        receive = (
            f"/api/exchange/messages?max={BATCH}&waitSeconds={self.wait}"
            f"&leaseSeconds={LEASE_SECONDS}"
        )
        with self._client(client) as http:
            while self.receiving.is_set():
                received = self._call(http, "receive", "GET", receive)
                messages = received["messages"] if received is not None else []
                if not messages:
                    time.sleep(self.pause)
                    continue
                ids = [message["messageId"] for message in messages]
                self.received.update(ids)
                self.redeliveries.append(sum(bool(message["redelivered"]) for message in messages))
                acked = self._call(
                    http, "ack", "POST", "/api/exchange/messages/ack", json={"messageIds": ids}
                )
                if acked is None:
                    # The next receive gets them again: this device holds their leases.
                    time.sleep(self.pause)
                    continue
                self.acked.update(
                    r["messageId"] for r in acked["results"] if r["status"] == "acked"
                )

    def _poll_health(self) -> None:
        with self._client() as http:
            while self.receiving.is_set():
                self._call(http, "health", "GET", "/api/actuator/health")
                time.sleep(HEALTH_EVERY)


# --- The database: crash and restart ------------------------------------------------------------


def postmaster(pgdata: Path) -> psutil.Process:
    return psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))


@dataclass(frozen=True)
class Stopped:
    pid: int  # the postmaster's
    at: float  # time.monotonic() of the SIGKILL (or of the fast stop's start)
    processes: int  # the postmaster and its children
    children_gone: float  # seconds until every child had exited
    gone: float  # seconds until the postmaster was reaped (by its parent, init)
    killed: int  # children still there after 15 s, then SIGKILLed too


def exited(process: psutil.Process) -> bool:
    """Gone, or a zombie: its parent (init, for a postmaster's orphans) reaps it in its own time."""
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def stopped_after(master: psutil.Process, children: list[psutil.Process], at: float) -> Stopped:
    """Wait for the server's processes to exit (SIGKILL those left after 15 s), then for the
    postmaster to be reaped: embedded.server_start would take an unreaped one for a running one."""
    while not all(map(exited, children)) and time.monotonic() - at < 15:
        time.sleep(ACCEPT_POLL)
    left = [process for process in children if not exited(process)]
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(left, timeout=5)
    children_gone = time.monotonic() - at
    master.wait(timeout=30)
    gone = time.monotonic() - at
    return Stopped(master.pid, at, 1 + len(children), children_gone, gone, len(left))


def crash(pgdata: Path) -> Stopped:
    """SIGKILL the postmaster, as a crash would; return once every process of the server is gone
    (a new postmaster refuses to start while an old backend still holds the shared memory)."""
    master = postmaster(pgdata)
    children = master.children()
    at = time.monotonic()
    master.send_signal(signal.SIGKILL)
    return stopped_after(master, children, at)


def fast_stop(pgdata: Path) -> Stopped:
    master = postmaster(pgdata)
    children = master.children()
    at = time.monotonic()
    embedded.server_stop(pgdata=pgdata)
    return stopped_after(master, children, at)


def ready_at(pgdata: Path, stale_pid: int, since: float) -> float:
    """The moment (time.monotonic()) a new postmaster in ``pgdata`` accepts connections: it writes
    "ready" into postmaster.pid's status line then. The file is read every ACCEPT_POLL seconds;
    connecting that often instead would fork a backend each time and slow the recovery down."""
    pid_file = pgdata / "postmaster.pid"
    while time.monotonic() - since < 120:
        with contextlib.suppress(OSError):
            lines = pid_file.read_text().splitlines()
            if len(lines) >= 8 and lines[0] != str(stale_pid) and lines[7].strip() == "ready":
                return time.monotonic()
        time.sleep(ACCEPT_POLL)
    raise SystemExit(f"PostgreSQL in {pgdata} did not get ready in 120 s")


# --- One run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outage:
    number: int
    stopped: Stopped
    restart_at: float  # server_start called
    accepting_at: float  # postmaster.pid said "ready"
    returned_at: float  # server_start returned
    until: float  # the end of the run's --after
    flips: Counter[str]  # the workers' availability log lines during the run


@dataclass(frozen=True)
class Figures:
    """One run's figures: milliseconds during the outage, seconds after PostgreSQL is back."""

    requests: int
    first: Call | None
    others_median_ms: float
    others_max_ms: float
    slow: int  # requests of the outage that took SLOW_MS or more
    answers: Counter[str]
    not_503: int  # answered before PostgreSQL was back, other than 503 with Retry-After
    in_flight: list[Call]  # started before the server was gone, answered after the stop
    health_down_s: float  # after the server was gone
    recovery_s: float  # server_start called -> accepting connections
    returned_s: float  # accepting -> server_start returned
    first_send_s: float  # accepting -> the first 201 of a send
    first_ack_s: float  # accepting -> the first 200 of an ACK
    health_up_s: float
    failed_after: int  # exchange requests started once PostgreSQL accepted, and not 200/201
    last_failure_s: float
    failed_answers: Counter[str]  # what those answered: "kind status code"


def seconds_after(origin: float, calls: Sequence[Call]) -> float:
    return min((call.ended for call in calls), default=math.inf) - origin


def unavailable(call: Call) -> bool:
    return (call.status, call.code, call.retry_after) == (503, "SERVICE_UNAVAILABLE", "1")


def figures_of(outage: Outage, calls: list[Call]) -> Figures:
    # The outage starts when the last process of the server is gone: until then a backend still
    # alive may commit the request it is serving (the SIGKILL reaches the postmaster alone).
    start, back = outage.stopped.at + outage.stopped.children_gone, outage.accepting_at
    run = [call for call in calls if call.ended >= start and call.started < outage.until]
    exchange = sorted((call for call in run if call.kind in EXCHANGE), key=lambda c: c.started)
    since = [call for call in exchange if call.started >= start]
    # Started while PostgreSQL was gone; one that straddles its return may succeed.
    during = [call for call in since if call.started < back]
    others = [call.ms for call in during[1:]]
    # Answered before the run ended: one that straddles the next run's kill belongs to that run.
    failed = [
        call for call in since if back <= call.started and call.ended < outage.until and not call.ok
    ]
    health = [call for call in run if call.kind == "health" and call.started >= start]
    return Figures(
        requests=len(during),
        first=during[0] if during else None,
        others_median_ms=statistics.median(others) if others else math.nan,
        others_max_ms=max(others, default=math.nan),
        slow=sum(1 for call in during if call.ms >= SLOW_MS),
        answers=Counter(call.answer() for call in during),
        not_503=sum(1 for call in during if call.ended < back and not unavailable(call)),
        in_flight=[call for call in exchange if call.started < start],
        health_down_s=seconds_after(start, [call for call in health if call.status == 503]),
        recovery_s=back - outage.restart_at,
        returned_s=outage.returned_at - back,
        first_send_s=seconds_after(back, [c for c in since if c.kind == "send" and c.ok]),
        first_ack_s=seconds_after(back, [c for c in since if c.kind == "ack" and c.ok]),
        health_up_s=seconds_after(back, [call for call in health if call.ok]),
        failed_after=len(failed),
        last_failure_s=max((call.ended for call in failed), default=math.nan) - back,
        failed_answers=Counter(f"{call.kind} {call.answer()}" for call in failed),
    )


def log_flips(log_path: Path, offset: int) -> Counter[str]:
    """The availability changes the workers logged (JSON lines) after ``offset`` of their log."""
    flips: Counter[str] = Counter()
    with log_path.open("rb") as lines:
        lines.seek(offset)
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("logger") == AVAILABILITY_LOGGER:
                    message = str(entry.get("message"))
                    flips.update(name for name, text in FLIPS.items() if message.startswith(text))
    return flips


def outage_run(number: int, pgdata: Path, server: Server, args: argparse.Namespace) -> Outage:
    offset = server.log_path.stat().st_size
    stopped = crash(pgdata) if args.stop == "kill" else fast_stop(pgdata)
    log(
        f"run {number}: PostgreSQL stopped ({args.stop}; {stopped.processes} processes, gone "
        f"after {stopped.gone:.2f} s); down for {args.outage:g} s"
    )
    time.sleep(max(0.0, stopped.at + args.outage - time.monotonic()))
    with ThreadPoolExecutor(max_workers=1) as pool:
        restart_at = time.monotonic()
        accepting = pool.submit(ready_at, pgdata, stopped.pid, restart_at)
        embedded.server_start(pgdata=pgdata, database=DATABASE)
        returned_at = time.monotonic()
        accepting_at = accepting.result()
    log(f"run {number}: PostgreSQL accepts connections again ({accepting_at - restart_at:.2f} s)")
    time.sleep(max(0.0, accepting_at + args.after - time.monotonic()))
    flips = log_flips(server.log_path, offset)
    return Outage(number, stopped, restart_at, accepting_at, returned_at, time.monotonic(), flips)


# --- The end: nothing lost -----------------------------------------------------------------------


@dataclass(frozen=True)
class Accounting:
    sent: int  # 201
    logged: int  # of those, in the delivery log: received and ACKed
    lost: int  # sent with 201 and not in the delivery log
    not_received: int  # sent with 201 and never seen by a receive
    queued: int
    dead: int
    unconfirmed_sends: int  # in the delivery log without a 201 the bench saw: the answer was lost
    unconfirmed_acks: int  # in the delivery log without an "acked" the bench saw
    redelivered: int

    @property
    def whole(self) -> bool:
        return not (self.lost or self.not_received or self.queued or self.dead)


def queued(url: str, recipients: list[int]) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM exchange_message WHERE recipient_id = ANY(%s)", [recipients]
        ).fetchone()
    return int(row[0]) if row else -1


def drain_and_account(
    url: str, traffic: Traffic, recipients: list[int], sender: int, timeout: float
) -> Accounting:
    """Stop the senders, let the receivers empty the queues, stop them; count in the database."""
    traffic.stop_sending()
    deadline = time.monotonic() + timeout
    while queued(url, recipients) and time.monotonic() < deadline:
        time.sleep(0.2)
    traffic.stop()
    with psycopg.connect(url, autocommit=True) as conn:
        logged = {
            str(row[0])
            for row in conn.execute(
                "SELECT message_id FROM exchange_delivery_log WHERE sender_id = %s", [sender]
            )
        }
        row = conn.execute(
            "SELECT count(*) FROM exchange_deadletter WHERE recipient_id = ANY(%s)", [recipients]
        ).fetchone()
        dead = int(row[0]) if row else -1
    sent = set(traffic.sent)
    return Accounting(
        sent=len(sent),
        logged=len(sent & logged),
        lost=len(sent - logged),
        not_received=len(sent - traffic.received),
        queued=queued(url, recipients),
        dead=dead,
        unconfirmed_sends=len(logged - sent),
        unconfirmed_acks=len((sent & logged) - traffic.acked),
        redelivered=sum(traffic.redeliveries),
    )


# --- The report ----------------------------------------------------------------------------------


def shown_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.1f} ms"


def shown_s(value: float) -> str:
    """Seconds after a moment, signed: a success may come a few ms before this process's own
    connection attempt (every ACCEPT_POLL) saw PostgreSQL accept."""
    return "never" if math.isnan(value) or math.isinf(value) else f"{value:+.3f} s"


def shown_count(value: float) -> str:
    return f"{value:,.0f}"


def run_report(outage: Outage, f: Figures, stop: str) -> list[str]:
    stopped = outage.stopped
    how = "SIGKILL of the postmaster" if stop == "kill" else "fast shutdown (pg_ctl -m fast)"
    extra = f", {stopped.killed} SIGKILLed after 15 s" if stopped.killed else ""
    first = "none"
    if f.first is not None:
        first = f"{f.first.kind} {f.first.answer()} in {shown_ms(f.first.ms)}"
    in_flight = "none"
    if f.in_flight:
        waits = [1000 * (call.ended - stopped.at) for call in f.in_flight]
        answers = Counter(call.answer() for call in f.in_flight)
        in_flight = (
            f"{len(f.in_flight)}, answered {shown_ms(min(waits))} to {shown_ms(max(waits))} "
            "after it: " + ", ".join(f"{answer} x {n}" for answer, n in answers.items())
        )
    answers_during = ", ".join(f"{answer} x {n}" for answer, n in f.answers.most_common())
    flips = ", ".join(f"{name} {outage.flips[name]}" for name in FLIPS)
    failed = f"{f.failed_after} exchange requests"
    if f.failed_after:
        failures = ", ".join(f"{answer} x {n}" for answer, n in f.failed_answers.most_common())
        failed += f" ({failures}; the last answered {shown_s(f.last_failure_s)})"
    return [
        f"run {outage.number}: {how} ({stopped.processes} processes: the children gone "
        f"{stopped.children_gone:.3f} s after{extra}, the postmaster reaped after "
        f"{stopped.gone:.2f} s); started again after "
        f"{outage.restart_at - stopped.at:.2f} s, accepting connections {f.recovery_s:.2f} s "
        f"later (server_start returned {shown_s(f.returned_s)} after that)",
        f"  during the outage: {f.requests} exchange requests started once the server's last "
        "process was gone and before PostgreSQL accepted connections again",
        f"    the first of them        {first}",
        f"    the others               median {shown_ms(f.others_median_ms)}, "
        f"max {shown_ms(f.others_max_ms)}; {f.slow} of all took {SLOW_MS} ms or more",
        f"    answers                  {answers_during}; answered before PostgreSQL was back and "
        f"not 503 SERVICE_UNAVAILABLE with Retry-After: 1: {f.not_503}",
        f"    in flight before         {in_flight}",
        f"    health DOWN              {shown_s(f.health_down_s)} after the server was gone",
        "  once PostgreSQL accepted connections again:",
        f"    first send 201           {shown_s(f.first_send_s)}",
        f"    first ACK 200            {shown_s(f.first_ack_s)} (a receive, then its ACK)",
        f"    health UP                {shown_s(f.health_up_s)}",
        f"    failed after it          {failed}",
        f"  the workers' log: availability {flips} (platform_site.db.availability)",
    ]


SUMMARY: list[tuple[str, Callable[[Figures], float], Callable[[float], str]]] = [
    (
        "outage: first request once it was gone",
        lambda f: f.first.ms if f.first is not None else math.nan,
        shown_ms,
    ),
    ("outage: the other requests, median", lambda f: f.others_median_ms, shown_ms),
    ("outage: the other requests, max", lambda f: f.others_max_ms, shown_ms),
    ("outage: requests", lambda f: f.requests, shown_count),
    (f"outage: requests of {SLOW_MS} ms or more", lambda f: f.slow, shown_count),
    ("outage: answers other than 503 + Retry-After", lambda f: f.not_503, shown_count),
    ("restart: start -> accepting connections", lambda f: f.recovery_s, lambda v: f"{v:.2f} s"),
    ("back: first send 201", lambda f: f.first_send_s, shown_s),
    ("back: first receive + ACK 200", lambda f: f.first_ack_s, shown_s),
    ("back: health UP", lambda f: f.health_up_s, shown_s),
    ("back: exchange requests that failed", lambda f: f.failed_after, shown_count),
    ("back: server_start returned", lambda f: f.returned_s, shown_s),
]


def summary(all_figures: list[Figures]) -> list[str]:
    """One line per figure: each run, then the median and the maximum over the runs."""
    head = ["figure", *(f"run {n + 1}" for n in range(len(all_figures))), "median", "max"]
    rows = [head]
    for name, value, shown in SUMMARY:
        values = [value(f) for f in all_figures]
        finite = [v for v in values if not math.isnan(v)]
        middle = statistics.median(finite) if finite else math.nan
        rows.append(
            [name, *map(shown, values), shown(middle), shown(max(finite, default=math.nan))]
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(head))]
    lines = [
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="outages, one after the other (5)")
    parser.add_argument("--outage", type=float, default=5.0, help="seconds PostgreSQL is down (5)")
    parser.add_argument(
        "--after", type=float, default=5.0, help="seconds measured once it accepts again (5)"
    )
    parser.add_argument("--before", type=float, default=3.0, help="traffic before the first (3)")
    parser.add_argument(
        "--stop",
        choices=["kill", "fast"],
        default="kill",
        help="SIGKILL the postmaster (a crash, the default) or stop it with pg_ctl -m fast",
    )
    parser.add_argument("--senders", type=int, default=2, help="sender threads (2)")
    parser.add_argument("--receivers", type=int, default=3, help="consumer adapters (3)")
    parser.add_argument(
        "--pause", type=float, default=0.02, help="seconds between a loop's requests (0.02)"
    )
    parser.add_argument(
        "--wait", type=int, default=0, help="the receives' waitSeconds: 0 polls, more long-polls"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="outage-bench-"))
    # Run as root, the library runs the server as its own user, who must reach pgdata (0700).
    workdir.chmod(0o755)
    pgdata = workdir / "pg"
    with contextlib.ExitStack() as stack:
        if args.keep:
            log(f"keeping {workdir}")
        else:
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        log(f"starting a PostgreSQL of the bench's own in {pgdata}")
        url = embedded.server_start(pgdata=pgdata, database=DATABASE)
        stack.callback(embedded.server_stop, pgdata=pgdata)
        with psycopg.connect(url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            version = str(row[0]) if row else "?"
        manage(url, "migrate", "--no-input", "-v", "0")
        consumers, sender = principals_create(url, args.receivers)
        redis = stack.enter_context(redis_for_bench(workdir))
        log("starting gunicorn")
        server = server_start(url, workdir)
        stack.callback(server.stop)
        traffic = Traffic(
            server.base_url,
            [sign_in(server.base_url, sender, f"outage-sender-{n}") for n in range(args.senders)],
            [sign_in(server.base_url, p, f"outage-receiver-{n}") for n, p in enumerate(consumers)],
            pause=args.pause,
            wait=args.wait,
        )
        traffic.start()
        stack.callback(traffic.stop)
        time.sleep(args.before)
        outages = [outage_run(n, pgdata, server, args) for n in range(1, args.runs + 1)]
        log("draining the queues")
        recipients = [consumer.adapter_id for consumer in consumers]
        accounting = drain_and_account(url, traffic, recipients, sender.adapter_id, timeout=120)
    load_after = os.getloadavg()

    all_figures = [figures_of(outage, traffic.calls) for outage in outages]
    exchange_calls = [call for call in traffic.calls if call.kind in EXCHANGE]
    print()
    print("PostgreSQL goes away under a live exchange, and comes back")
    print(
        f"machine: {platform.node()}, {cpu_model()}, nproc {os.cpu_count()}, "
        f"Python {platform.python_version()}, load average {load_before[0]:.2f} before / "
        f"{load_after[0]:.2f} after"
    )
    print(
        f"database: PostgreSQL {version} (the bench's own, embedded), database {DATABASE}; "
        f"server: one gunicorn gthread {GUNICORN_WORKERS} workers x {GUNICORN_THREADS} threads, "
        f"Django pool max {os.environ.get('DATABASE_POOL_MAX_SIZE', '4')} per worker; "
        f"Redis: {redis}"
    )
    print(
        f"load: {args.senders} sender threads, {args.receivers} receivers (max {BATCH}, "
        f"waitSeconds {args.wait}, then ACK), each on one httpx keep-alive connection, "
        f"{1000 * args.pause:g} ms between requests; health every {HEALTH_EVERY:g} s; "
        f"{len(exchange_calls):,} exchange requests in all"
    )
    how = "SIGKILL of the postmaster" if args.stop == "kill" else "fast stop"
    print(
        f"outages: {args.runs} x ({how}, {args.outage:g} s down, then started again and measured "
        f"for {args.after:g} s)"
    )
    for outage, f in zip(outages, all_figures, strict=True):
        print()
        print("\n".join(run_report(outage, f, args.stop)))
    print()
    print("\n".join(summary(all_figures)))
    print()
    a = accounting
    print(
        f"messages: {a.sent:,} sent with 201; {a.logged:,} of them received and ACKed (in the "
        f"delivery log), {a.lost} lost, {a.not_received} never received; {a.queued} left queued, "
        f"{a.dead} dead letters; {a.redelivered} deliveries were redeliveries; "
        f"{a.unconfirmed_sends} sends committed whose 201 never arrived, "
        f"{a.unconfirmed_acks} ACKs committed whose answer never arrived"
    )
    ok = accounting.whole and not any(f.not_503 for f in all_figures)
    print("result: " + ("PASS" if ok else "FAIL") + " (nothing lost; every outage answer a 503)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
