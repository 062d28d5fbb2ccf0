"""The throughput loads: raw psycopg loops (the database's ceiling) and wrk against the HTTP API.

(a) and (c)raw run the platform's own receive and ACK statements from 8 processes, each on an
autocommit connection; (b), (c) and (e) drive gunicorn with wrk (C, one connection per thread)
and a Lua script that ACKs what each receive returned (mode ``queue``), or whose ACKs also receive
the next batch (mode ``next``), so the client takes little CPU. The figures of a ratio are
measured in turns (``in_turns``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import psutil
import psycopg

from bench.throughput.machine import CpuMeter, CpuShare, children_cpu
from bench.throughput.servers import Client, Server
from exchange import queries

MAX_DELIVERIES = 10
LEASE_SECONDS = 30
SESSION_CHECK = (
    "SELECT s.revoked_at, s.expires_at, s.device_key, u.is_active FROM accounts_session s "
    "JOIN accounts_user u ON u.id = s.user_id WHERE s.id = %s"
)
Measured = TypeVar("Measured")
UNEVEN_RETRIES = 5  # new connections for a measured run that started unevenly spread (uneven())
APT_HINT = "apt-get install -y wrk"


# --- Settings of one run -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    clients: int
    warmup: float
    duration: float
    longpoll_messages: int
    longpoll_rate: float
    latency_receives: int
    small_queue: int
    large_queue: int
    batch1_fill: int  # messages per consumer before a batch-1 phase
    batch100_fill: int
    rounds: int = 6  # of the turns of (g) and (h), each figure's turns plan.duration in all

    @property
    def producers(self) -> int:
        """Producer processes of (g) and (h), and as many consumers: half the clients each."""
        return max(1, self.clients // 2)


def plan_of(args: argparse.Namespace) -> Plan:
    if args.quick:
        plan = Plan(
            clients=args.clients,
            warmup=2.0,
            duration=5.0,
            longpoll_messages=200,
            longpoll_rate=40.0,
            latency_receives=150,
            small_queue=1_000,
            large_queue=1_000_000,
            batch1_fill=6_000,
            batch100_fill=40_000,
            rounds=2,
        )
    else:
        plan = Plan(
            clients=args.clients,
            warmup=3.0,
            duration=12.0,
            longpoll_messages=400,
            longpoll_rate=20.0,
            latency_receives=300,
            small_queue=1_000,
            large_queue=1_000_000,
            batch1_fill=12_000,
            batch100_fill=250_000,
        )
    if args.duration is not None:
        plan = Plan(**{**plan.__dict__, "duration": args.duration})
    if args.large_queue is not None:
        plan = Plan(**{**plan.__dict__, "large_queue": args.large_queue})
    return plan


# --- (a) and the raw batch-100 loop: psycopg, no HTTP --------------------------------------------


@dataclass(frozen=True)
class RawJob:
    database_url: str
    session_id: str
    recipient: int
    device_key: str
    batch: int
    start: float  # time.monotonic() of the warm-up's start (the clock is system-wide)
    measure_from: float
    end: float
    receive_sql: str
    ack_sql: str


@dataclass(frozen=True)
class RawOutcome:
    acked: int
    empty: int
    cpu: float


def raw_loop(job: RawJob) -> RawOutcome:
    """Session check, claim, ACK, again and again on one autocommit connection."""
    receive = {
        "recipient": job.recipient,
        "device": job.device_key,
        "max": job.batch,
        "lease": LEASE_SECONDS,
        "max_deliveries": MAX_DELIVERIES,
    }
    acked = empty = 0
    cpu_from = 0.0
    with psycopg.connect(job.database_url, autocommit=True) as conn:
        while time.monotonic() < job.start:
            time.sleep(0.001)
        measuring = False
        while True:
            now = time.monotonic()
            if now >= job.end:
                break
            if not measuring and now >= job.measure_from:
                measuring, cpu_from = True, time.process_time()
            conn.execute(SESSION_CHECK, [job.session_id]).fetchone()
            rows = conn.execute(job.receive_sql, receive).fetchall()
            if not rows:
                empty += measuring
                continue
            ids = ",".join(row[0] for row in rows)  # the ACK takes them as one text
            done = conn.execute(
                job.ack_sql, {"recipient": job.recipient, "ids": ids, "device": job.device_key}
            ).fetchall()
            if job.measure_from <= time.monotonic() < job.end:
                acked += len(done)
    return RawOutcome(acked=acked, empty=empty, cpu=time.process_time() - cpu_from)


@dataclass(frozen=True)
class Throughput:
    rate: float  # messages (or requests) per second
    empty: int  # receives that found nothing: the queue ran dry or a lease was in the way
    errors: int
    cpu: CpuShare
    p50_ms: float = 0.0
    p99_ms: float = 0.0


def raw_run(
    database_url: str, server: Server, consumers: list[Client], batch: int, plan: Plan
) -> Throughput:
    start = time.monotonic() + 1.5  # time to fork and connect
    measure_from = start + plan.warmup
    end = measure_from + plan.duration
    jobs = [
        RawJob(
            database_url=database_url,
            session_id=consumer.session_id,
            recipient=consumer.principal.adapter_id,
            device_key=consumer.device_key,
            batch=batch,
            start=start,
            measure_from=measure_from,
            end=end,
            receive_sql=queries.RECEIVE,
            ack_sql=queries.ACK,
        )
        for consumer in consumers
    ]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=context) as pool:
        futures = [pool.submit(raw_loop, job) for job in jobs]
        time.sleep(max(0.0, measure_from - time.monotonic()))
        meter = CpuMeter(server)
        # Read just before the end, while the loops' backends still exist (they exit at the end).
        time.sleep(max(0.0, end - 0.05 - time.monotonic()))
        cpu = meter.read(client_cpu=0.0)
        outcomes = [future.result() for future in futures]
        cpu.client = 100.0 * sum(outcome.cpu for outcome in outcomes) / plan.duration
    return Throughput(
        rate=sum(outcome.acked for outcome in outcomes) / plan.duration,
        empty=sum(outcome.empty for outcome in outcomes),
        errors=0,
        cpu=cpu,
    )


# --- wrk: (b), (c) and (e) -----------------------------------------------------------------------

WRK_SCRIPT = r"""
-- One connection per wrk thread (-t N -c N): a thread's Lua state is its connection's state.
local creds = %(creds)s
local threads = {}
local made = 0

function setup(thread)
  made = made + 1
  local c = creds[((made - 1) %% #creds) + 1]
  thread:set("token", c[1])
  thread:set("device", c[2])
  table.insert(threads, thread)
end

function init(args)
  mode = args[1]
  batch = tonumber(args[2] or "1")
  acked, received, empty, bad = 0, 0, 0, 0
  pending = nil
  local auth = {["Authorization"] = "Bearer " .. token, ["X-Device-ID"] = device}
  local post = {["Authorization"] = "Bearer " .. token, ["X-Device-ID"] = device,
                ["Content-Type"] = "application/json"}
  if mode == "bare" then
    fixed = wrk.format("GET", "/bench/bare")
  elseif mode == "whoami" then
    fixed = wrk.format("GET", "/api/exchange/whoami", auth)
  else
    receive = wrk.format("GET", "/api/exchange/messages?max=" .. batch, auth)
    ack_headers = post
    -- "next": each ACK also receives the next batch (the ACK's receive member)
    ack_tail = mode == "next" and (',"receive":{"max":' .. batch .. '}}') or "}"
  end
end

function request()
  if fixed then return fixed end
  if pending then
    return wrk.format("POST", "/api/exchange/messages/ack", ack_headers,
                      '{"messageIds":[' .. pending .. ']' .. ack_tail)
  end
  return receive
end

-- The ids of the messages a receive answered, as a JSON list's items ("" when none).
function received_ids(messages)
  local ids = {}
  for id in string.gmatch(messages, '"messageId"%%s*:%%s*"([%%x%%-]+)"') do
    ids[#ids + 1] = '"' .. id .. '"'
  end
  received = received + #ids
  return table.concat(ids, ",")
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
    pending = nil
    return
  end
  if fixed then return end
  local messages = body
  if pending then
    local results, rest = body, ""
    local at = string.find(body, '"messages":', 1, true)
    if at then results, rest = string.sub(body, 1, at - 1), string.sub(body, at) end
    for _ in string.gmatch(results, '"status":"acked"') do acked = acked + 1 end
    pending = nil
    if mode ~= "next" then return end
    messages = rest
  end
  local ids = received_ids(messages)
  if ids == "" then
    empty = empty + 1
  else
    pending = ids
  end
end

function done(summary, latency, requests)
  local a, r, e, b = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("acked")
    r = r + t:get("received")
    e = e + t:get("empty")
    b = b + t:get("bad")
  end
  local errs = summary.errors
  io.write(string.format("BENCH %%d %%d %%d %%d %%d %%d %%d %%d %%d\n",
    summary.duration, summary.requests, a, r, e, b,
    errs.connect + errs.read + errs.write + errs.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def wrk_script(path: Path, clients: list[Client]) -> None:
    creds = ", ".join(
        "{" + json.dumps(client.token) + ", " + json.dumps(client.device_id) + "}"
        for client in clients
    )
    path.write_text(WRK_SCRIPT % {"creds": "{" + creds + "}"})


def wrk_once(
    wrk: str, script: Path, server: Server, connections: int, seconds: float, *args: str
) -> tuple[list[int], float, CpuShare]:
    command = [
        wrk,
        f"-t{connections}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "30s",
        "-s",
        str(script),
        server.base_url,
        "--",
        *args,
    ]
    splits: list[str] = []
    while True:
        meter = CpuMeter(server)
        cpu_before = children_cpu()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as done:
            time.sleep(min(0.5, seconds / 2))
            split = connections_per_worker(server)
            splits.append("/".join(map(str, split)))
            if uneven(split) and len(splits) <= UNEVEN_RETRIES:
                done.kill()  # and start again, on new connections
                done.communicate()
                continue
            stdout, stderr = done.communicate()
        break
    cpu = meter.read(client_cpu=children_cpu() - cpu_before)
    cpu.split = ">".join(splits)
    line = next((line for line in stdout.splitlines() if line.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed ({done.returncode}):\n{stdout}\n{stderr}")
    figures = [int(value) for value in line.split()[1:]]
    return figures, figures[0] / 1e6, cpu


def uneven(split: list[int]) -> bool:
    """More than one connection away from an even spread (8 over 2 workers: 6/2, 7/1, 8/0).

    Which worker accepts a connection is the kernel's lottery: with 8 connections, one worker
    may get 6 and, its core busy, leave the other worker's core half idle. That measures the
    lottery, not the request, and it fell differently for the two figures of a ratio (the bare
    view's turns 4/4, whoami's 6/2, in one run). A measured run that starts so uneven is
    stopped and started again on new connections, up to UNEVEN_RETRIES times, for every HTTP
    figure alike; the CPU notes show each try ("6/2>4/4")."""
    return len(split) > 1 and split[0] - split[-1] > 2


def connections_per_worker(server: Server) -> list[int]:
    """How the load generator's connections are spread over the gunicorn workers, most first.
    The kernel hands each connection to whichever worker accepts first: 8 connections can land
    4/4 or 6/2, and a worker with few keeps its core idle while they wait (on Redis, say)."""
    port = int(server.base_url.rsplit(":", 1)[1])
    counts = []
    for worker in server.workers():
        try:
            sockets = worker.net_connections(kind="tcp")
        except psutil.Error:
            continue
        counts.append(
            sum(1 for c in sockets if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
        )
    return sorted(counts, reverse=True)


def wrk_run(
    wrk: str, script: Path, server: Server, plan: Plan, mode: str, batch: int = 1
) -> Throughput:
    """A warm-up run, then the measured run: messages/s (queue) or requests/s (bare, whoami)."""
    wrk_once(wrk, script, server, plan.clients, plan.warmup, mode, str(batch))
    figures, seconds, cpu = wrk_once(
        wrk, script, server, plan.clients, plan.duration, mode, str(batch)
    )
    _, requests, acked, _, empty, bad, socket_errors, p50, p99 = figures
    count = acked if mode in ("queue", "next") else requests - bad
    return Throughput(
        rate=count / seconds,
        empty=empty,
        errors=bad + socket_errors,
        cpu=cpu,
        p50_ms=p50 / 1000,
        p99_ms=p99 / 1000,
    )


def in_turns(
    *runs: Callable[[Plan], Throughput], plan: Plan, rounds: int = 6
) -> tuple[Throughput, ...]:
    """Throughputs measured in turns (A B C, C B A, A B C...), ``plan.duration`` in all for
    each, every turn after a warm-up of its own: the machine's speed drifts (a raw loop measured
    one phase after another moved from 899 to 1,123 msgs/s between runs of unchanged code), and
    a ratio of two figures is only worth something if both saw the same machine."""
    return tuple(combined(turns) for turns in in_rotation(runs, plan, rounds))


def in_rotation(
    runs: Sequence[Callable[[Plan], Measured]], plan: Plan, rounds: int
) -> list[list[Measured]]:
    """Each run's turns, the runs taking turns in rotation (A B C D, D C B A, A B C D...), a
    warm-up before each turn and ``plan.duration`` in all for each run: what is measured first
    in one round is measured last in the next, so the machine's drift weighs on all alike."""
    turn = replace(plan, warmup=1.0, duration=max(2.0, plan.duration / rounds))
    turns: list[list[Measured]] = [[] for _ in runs]
    for round_ in range(rounds):
        order = range(len(runs)) if round_ % 2 == 0 else reversed(range(len(runs)))
        for index in order:
            turns[index].append(runs[index](turn))
    return turns


def combined(runs: list[Throughput]) -> Throughput:
    """Turns of equal length as one figure: the mean rate, CPU shares and p50; the worst p99."""
    shares = {
        share: statistics.fmean(getattr(run.cpu, share) for run in runs)
        for share in ("client", "server", "postgres", "machine", "redis")
    }
    return Throughput(
        rate=statistics.fmean(run.rate for run in runs),
        empty=sum(run.empty for run in runs),
        errors=sum(run.errors for run in runs),
        cpu=CpuShare(**shares, split=" ".join(run.cpu.split for run in runs if run.cpu.split)),
        p50_ms=statistics.median(run.p50_ms for run in runs),
        p99_ms=max(run.p99_ms for run in runs),
    )
