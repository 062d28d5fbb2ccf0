"""One outage of the bench and its figures; at the end, the accounting of every message."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.outage import AVAILABILITY_LOGGER, DATABASE, EXCHANGE, FLIPS, SLOW_MS
from bench.outage.postgres import Stopped, crash, fast_stop, ready_at
from bench.outage.traffic import Call, Traffic
from bench.throughput.report import log
from bench.throughput.servers import (
    Server,
)
from platform_site import embedded

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
