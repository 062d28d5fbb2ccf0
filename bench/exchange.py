"""The exchange benchmark: one run, one table.

    .venv/bin/python bench/exchange.py [--quick]

It builds a database of its own (``exchange_bench``: on the server of DATABASE_URL when that is
set, on the embedded PostgreSQL otherwise; dropped and created anew on every run), uses the Redis
of REDIS_URL or starts a redis-server of its own (production runs with Redis: the cache, the
rate-limit counters and the session revisions), starts its own gunicorn on a free loopback port
with the platform's deploy/gunicorn.conf.py (2 workers x 8 threads), and measures with 8
concurrent clients:

(a) a raw psycopg loop per message (session check, claim, ACK): the database's ceiling at batch 1;
(b) the HTTP API at batch 1 (GET ?max=1, then ACK), against (a);
(c) the HTTP API at batch 100, against the raw loop at batch 100;
(d) long polling: latency from send to receive;
(e) an authenticated GET /api/exchange/whoami against a bare Django view on the same server;
(f) receive latency with 1,000 and with 1,000,000 messages waiting (two consumers' queues in one
    table, received from in turns).

HTTP load comes from wrk (C, one connection per thread) with a Lua script that ACKs what each
receive returned, so the client takes little of the machine's CPU; the latency figures (d, f) come
from a small Python client. docs/performance.md has a full run and what limits each figure.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import multiprocessing
import os
import platform
import re
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder comes first on sys.path, and this file (exchange.py) would
# hide the platform's exchange package: put the checkout there instead.
if sys.path and Path(sys.path[0] or ".").resolve() == ROOT / "bench":
    sys.path[0] = str(ROOT)

from platform_site.embedded import free_port  # noqa: E402 (after the path is set)

BENCH_DATABASE = "exchange_bench"
MAX_DELIVERIES = 10
LEASE_SECONDS = 30
SESSION_CHECK = (
    "SELECT s.revoked_at, s.expires_at, s.device_key, u.is_active FROM accounts_session s "
    "JOIN accounts_user u ON u.id = s.user_id WHERE s.id = %s"
)
PREFILL = (
    "INSERT INTO exchange_message (message_id, recipient_id, sender_id, type, payload, headers, "
    "enqueued_at, visible_at, receive_count) "
    "SELECT gen_random_uuid(), %s, %s, 'bench', '{\"n\": 1}'::jsonb, '{}'::jsonb, now(), now(), 0 "
    "FROM generate_series(1, %s)"
)
GUNICORN_WORKERS = 2
GUNICORN_THREADS = 8
UNEVEN_RETRIES = 5  # new connections for a measured run that started unevenly spread (uneven())
APT_HINT = "apt-get install -y wrk"


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


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
            batch100_fill=100_000,
        )
    if args.duration is not None:
        plan = Plan(**{**plan.__dict__, "duration": args.duration})
    return plan


# --- The database --------------------------------------------------------------------------------


def url_with_database(url: str, database: str) -> str:
    return urlsplit(url)._replace(path="/" + database).geturl()


def database_recreate(maintenance_url: str, database: str = BENCH_DATABASE) -> None:
    with psycopg.connect(maintenance_url, autocommit=True) as conn:
        name = sql.Identifier(database)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def database_prepare(database: str = BENCH_DATABASE) -> tuple[str, str]:
    """The bench database's URL, freshly created, and where it lives. Each bench script may name
    a database of its own, so that one does not drop another's."""
    configured = os.environ.get("DATABASE_URL")
    if configured:
        try:
            database_recreate(url_with_database(configured, "postgres"), database)
        except psycopg.OperationalError:
            database_recreate(configured, database)
        return url_with_database(configured, database), "DATABASE_URL's server"
    from platform_site import embedded

    url = embedded.server_start(pgdata=embedded.PGDATA, database=database)
    database_recreate(url_with_database(url, "postgres"), database)
    return url, f"embedded PostgreSQL ({embedded.PGDATA})"


def database_drop(url: str, database: str = BENCH_DATABASE) -> None:
    """Drop the bench database: its queues and delivery log can take a few GB."""
    for maintenance_url in (url_with_database(url, "postgres"), url):
        try:
            with psycopg.connect(maintenance_url, autocommit=True) as conn:
                name = sql.Identifier(database)
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            return
        except psycopg.Error as error:
            log(f"could not drop {database} from {maintenance_url}: {error}")


def child_env(database_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="platform_site.settings",
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def manage(database_url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=child_env(database_url),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class Principal:
    adapter_id: int
    login: str
    password: str


PRINCIPALS_CODE = """
import json
from accounts.models import User
from accounts.services.adapters import adapter_create
owner = User.objects.create_user(
    username="bench-owner", email="bench@example.com", password={password!r}
)
made = [adapter_create(owner=owner, login=login) for login in {logins!r}]
print("BENCH " + json.dumps([[c.adapter_id, c.login, c.password] for c in made]))
"""


def principals_create(database_url: str, clients: int) -> tuple[list[Principal], Principal]:
    """One consumer adapter per client and one sender, all of the owner bench-owner."""
    logins = [f"bench-consumer-{n}" for n in range(clients)] + ["bench-sender"]
    code = PRINCIPALS_CODE.format(password=secrets.token_urlsafe(18), logins=logins)
    out = manage(database_url, "shell", "-c", code)
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    made = [Principal(int(a), str(b), str(c)) for a, b, c in json.loads(line[6:])]
    return made[:-1], made[-1]


def queue_fill(database_url: str, recipients: list[int], sender: int, depth: int) -> float:
    """Top up each recipient's queue to ``depth`` messages; VACUUM ANALYZE; seconds taken."""
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as conn:
        for recipient in recipients:
            row = conn.execute(
                "SELECT count(*) FROM exchange_message WHERE recipient_id = %s", [recipient]
            ).fetchone()
            missing = depth - (int(row[0]) if row else 0)
            if missing > 0:
                conn.execute(PREFILL, [recipient, sender, missing])
        database_settle(conn)
    return time.monotonic() - started


def queue_clear(database_url: str, recipients: list[int]) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM exchange_message WHERE recipient_id = ANY(%s)", [recipients])
        database_settle(conn)


def database_settle(conn: psycopg.Connection[Any]) -> None:
    """Leave each phase the same table: no dead rows, fresh statistics, no checkpoint pending."""
    conn.execute("VACUUM ANALYZE exchange_message")
    # CHECKPOINT needs superuser or pg_checkpoint; without them the run goes on all the same.
    with contextlib.suppress(psycopg.Error):
        conn.execute("CHECKPOINT")


def index_reads(database_url: str) -> dict[str, tuple[int, int]]:
    """Scans and index entries read so far per index of exchange_message (cumulative stats)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes "
            "WHERE relname = 'exchange_message'"
        ).fetchall()
    return {str(name): (int(scans), int(reads)) for name, scans, reads in rows}


def index_note(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> str:
    """Which index the claims walked: the queue index, or the primary key past other queues."""
    parts = []
    for name, label in (
        ("exchange_message_queue_idx", "queue idx"),
        ("exchange_message_pkey", "pkey"),
    ):
        scans = after.get(name, (0, 0))[0] - before.get(name, (0, 0))[0]
        reads = after.get(name, (0, 0))[1] - before.get(name, (0, 0))[1]
        parts.append(f"{label} {scans:,} scans / {reads:,} entries read")
    return "  {" + "; ".join(parts) + " (whole phase)}"


def database_facts(database_url: str) -> dict[str, str]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        facts: dict[str, str] = {}
        row = conn.execute("SHOW server_version").fetchone()
        facts["version"] = str(row[0]) if row else "?"
        for name in ("synchronous_commit", "fsync", "shared_buffers", "max_wal_size"):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            facts[name] = str(row[0]) if row else "?"
    return facts


# --- The server ----------------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def workers(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def server_start(
    database_url: str,
    workdir: Path,
    *,
    workers: int = GUNICORN_WORKERS,
    threads: int = GUNICORN_THREADS,
    app: str = "bench.wsgi",
    **env_extra: str,
) -> Server:
    """The platform under gunicorn with deploy/gunicorn.conf.py, 2 workers x 8 threads unless
    told otherwise (bench/waits.py compares other shapes), ready when this returns."""
    port = free_port()
    metrics_dir = workdir / "prometheus"
    metrics_dir.mkdir()
    env = child_env(
        database_url,
        DJANGO_SETTINGS_MODULE="bench.settings",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS=str(workers),
        GUNICORN_THREADS=str(threads),
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        DEBUG="false",
        ALLOWED_HOSTS="127.0.0.1",
        EXCHANGE_RATE_LIMIT="100000000/m",
        ACCOUNTS_RATE_LIMIT_IP="100000/m",
        ACCOUNTS_RATE_LIMIT_ACCOUNT="100000/m",
        JWT_ACCESS_TTL_SECONDS="86400",
        EXCHANGE_LONG_POLL_MAX_WAITING="16",
        **env_extra,
    )
    log_path = workdir / "gunicorn.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", app],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process=process, base_url=f"http://127.0.0.1:{port}", log_path=log_path)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited:\n{log_path.read_text(errors='replace')}")
        try:
            response = httpx.get(server.base_url + "/api/actuator/health/readiness", timeout=5)
            if response.status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    server.stop()
    raise SystemExit(f"gunicorn not ready in 90 s:\n{log_path.read_text(errors='replace')}")


# --- Signing in ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    principal: Principal
    device_id: str
    token: str
    session_id: str

    @property
    def device_key(self) -> str:
        return f"d:{self.device_id}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "X-Device-ID": self.device_id}


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, not verified: the server signed it a moment ago."""
    part = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return claims


def sign_in(base_url: str, principal: Principal, device_id: str) -> Client:
    response = httpx.post(
        base_url + "/api/auth/login/username",
        json={"username": principal.login, "password": principal.password},
        headers={"X-Device-ID": device_id},
        timeout=30,
    )
    if response.status_code != 200:
        raise SystemExit(f"sign-in of {principal.login}: {response.status_code} {response.text}")
    token = str(response.json()["accessToken"])
    return Client(principal, device_id, token, str(jwt_claims(token)["sid"]))


# --- CPU accounting ------------------------------------------------------------------------------


def cpu_model() -> str:
    """The processor's name: the same code gave (e) 0.57-0.67 on one session's machine and
    0.69-0.75 on another's, so a figure means little without it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "processor unknown"


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine, in clock ticks."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return total - idle, total


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def postgres_backends() -> list[psutil.Process]:
    """This machine's server processes serving the bench database (none if it is elsewhere)."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith("postgres:") and f" {BENCH_DATABASE} " in cmdline[0]:
            found.append(process)
    return found


def redis_servers() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name"]) if p.info.get("name") == "redis-server"]


@contextmanager
def redis_for_bench(workdir: Path) -> Iterator[str]:
    """REDIS_URL, or a redis-server of the bench's own; the platform's production setup either
    way. Without redis-server, a description of what runs instead."""
    configured = os.environ.get("REDIS_URL")
    if configured:
        yield "yes (REDIS_URL)"
        return
    binary = shutil.which("redis-server")
    if binary is None:
        yield (
            "no (redis-server not found: local-memory cache per worker, every request reads "
            "its session from PostgreSQL)"
        )
        return
    from platform_site.embedded import redis_server

    with redis_server(directory=workdir, binary=binary) as (url, _):
        os.environ["REDIS_URL"] = url
        try:
            yield f"yes (its own redis-server {urlsplit(url).port})"
        finally:
            os.environ.pop("REDIS_URL", None)


@dataclass
class CpuShare:
    """CPU used during one measurement, in % of one core (200 % is all of a 2-core machine)."""

    client: float = 0.0
    server: float = 0.0
    postgres: float = 0.0
    machine: float = 0.0
    redis: float = 0.0
    split: str = ""  # wrk's connections per gunicorn worker, "4/4" (one per run in turns)

    def line(self) -> str:
        other = max(0.0, self.machine - self.client - self.server - self.postgres - self.redis)
        return (
            f"client {self.client:5.0f}%  gunicorn {self.server:5.0f}%  "
            f"postgres {self.postgres:5.0f}%  redis {self.redis:4.0f}%  other {other:4.0f}%  "
            f"machine {self.machine:5.0f}% of {100 * (os.cpu_count() or 1)}%"
        ) + (f"  [connections per worker {self.split}]" if self.split else "")


class CpuMeter:
    """Snapshot at the start of a measurement window and read the shares at its end."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.started = time.monotonic()
        self.jiffies = machine_jiffies()
        self.server_procs = {
            p.pid: p for p in [psutil.Process(server.process.pid), *server.workers()]
        }
        self.server_cpu = {pid: cpu_seconds(p) for pid, p in self.server_procs.items()}
        self.pg_procs = {p.pid: p for p in postgres_backends()}
        self.pg_cpu = {pid: self._safe(p) for pid, p in self.pg_procs.items()}
        self.redis_procs = redis_servers()
        self.redis_cpu = {p.pid: self._safe(p) for p in self.redis_procs}

    @staticmethod
    def _safe(process: psutil.Process) -> float:
        try:
            return cpu_seconds(process)
        except psutil.Error:
            return 0.0

    def read(self, client_cpu: float) -> CpuShare:
        elapsed = max(1e-6, time.monotonic() - self.started)
        busy, total = machine_jiffies()
        cores = os.cpu_count() or 1
        machine = 100.0 * cores * (busy - self.jiffies[0]) / max(1, total - self.jiffies[1])
        server = sum(
            self._safe(p) - self.server_cpu.get(pid, 0.0) for pid, p in self.server_procs.items()
        )
        backends = {p.pid: p for p in postgres_backends()}
        postgres = sum(self._safe(p) - self.pg_cpu.get(pid, 0.0) for pid, p in backends.items())
        redis = sum(self._safe(p) - self.redis_cpu.get(p.pid, 0.0) for p in self.redis_procs)
        return CpuShare(
            client=100.0 * client_cpu / elapsed,
            server=100.0 * server / elapsed,
            postgres=100.0 * postgres / elapsed,
            machine=machine,
            redis=100.0 * redis / elapsed,
        )


def machine_busy(seconds: float = 1.0) -> float:
    """CPU the whole machine used over ``seconds``, in % of one core."""
    busy, total = machine_jiffies()
    time.sleep(seconds)
    busy2, total2 = machine_jiffies()
    return 100.0 * (os.cpu_count() or 1) * (busy2 - busy) / max(1, total2 - total)


def quiet_wait(limit: float, threshold: float = 30.0) -> float:
    """Wait up to ``limit`` seconds for other programs to leave the CPU (the benchmark shares the
    machine with whatever else runs); the machine's CPU use of the last second, in % of a core."""
    deadline = time.monotonic() + limit
    busy = machine_busy()
    while busy > threshold and time.monotonic() < deadline:
        busy = machine_busy()
    if busy > threshold:
        log(f"the machine is busy ({busy:.0f}% of a core) without this benchmark: measuring anyway")
    return busy


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
            ids = ",".join(str(row[1]) for row in rows)  # the ACK takes them as one text
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
    from exchange import queries

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
  end
end

function request()
  if fixed then return fixed end
  if pending then
    return wrk.format("POST", "/api/exchange/messages/ack", ack_headers,
                      '{"messageIds":[' .. pending .. ']}')
  end
  return receive
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
    pending = nil
    return
  end
  if fixed then return end
  if pending then
    for _ in string.gmatch(body, '"status":"acked"') do acked = acked + 1 end
    pending = nil
  else
    local ids = {}
    for id in string.gmatch(body, '"messageId"%%s*:%%s*"([%%x%%-]+)"') do
      ids[#ids + 1] = '"' .. id .. '"'
    end
    if #ids == 0 then
      empty = empty + 1
    else
      received = received + #ids
      pending = table.concat(ids, ",")
    end
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
    count = acked if mode == "queue" else requests - bad
    return Throughput(
        rate=count / seconds,
        empty=empty,
        errors=bad + socket_errors,
        cpu=cpu,
        p50_ms=p50 / 1000,
        p99_ms=p99 / 1000,
    )


def in_turns(
    first: Callable[[Plan], Throughput],
    second: Callable[[Plan], Throughput],
    plan: Plan,
    rounds: int = 6,
) -> tuple[Throughput, Throughput]:
    """Two throughputs measured in turns (A B, B A, A B...), ``plan.duration`` in all for each,
    every turn after a warm-up of its own: the machine's speed drifts (a raw loop measured one
    phase after another moved from 899 to 1,123 msgs/s between runs of unchanged code), and a
    ratio of two figures is only worth something if both saw the same machine."""
    turn = replace(plan, warmup=1.0, duration=max(2.0, plan.duration / rounds))
    runs: tuple[list[Throughput], list[Throughput]] = ([], [])
    for round_ in range(rounds):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            runs[side].append((first, second)[side](turn))
    return combined(runs[0]), combined(runs[1])


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


# --- (d) long polling ----------------------------------------------------------------------------


@dataclass
class LongPoll:
    latencies_ms: list[float] = field(default_factory=list)
    send_ms: list[float] = field(default_factory=list)
    errors: dict[int, int] = field(default_factory=dict)
    cpu: CpuShare = field(default_factory=CpuShare)


async def longpoll_run(
    server: Server, consumers: list[Client], sender: Client, plan: Plan
) -> LongPoll:
    result = LongPoll()
    warmup = max(len(consumers) * 2, 16)
    total = warmup + plan.longpoll_messages
    received: set[int] = set()
    finished = asyncio.Event()
    timeout = httpx.Timeout(40.0)

    async def consume(client: Client) -> None:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers=client.headers(), timeout=timeout
        ) as http:
            while True:
                response = await http.get(
                    "/api/exchange/messages", params={"waitSeconds": 20, "max": 10}
                )
                arrived = time.monotonic()
                if response.status_code != 200:
                    result.errors[response.status_code] = (
                        result.errors.get(response.status_code, 0) + 1
                    )
                    await asyncio.sleep(0.05)
                    continue
                messages = response.json()["messages"]
                for message in messages:
                    number = int(message["payload"]["n"])
                    if number >= warmup and number not in received:
                        result.latencies_ms.append(1000 * (arrived - message["payload"]["sentAt"]))
                    received.add(number)
                if messages:
                    await http.post(
                        "/api/exchange/messages/ack",
                        json={"messageIds": [message["messageId"] for message in messages]},
                    )
                if len(received) >= total:
                    finished.set()

    async def send() -> None:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers=sender.headers(), timeout=timeout
        ) as http:
            interval = 1.0 / plan.longpoll_rate
            next_at = time.monotonic()
            for number in range(total):
                next_at += interval
                target = consumers[number % len(consumers)].principal.adapter_id
                sent_at = time.monotonic()
                response = await http.post(
                    "/api/exchange/messages",
                    json={
                        "to": target,
                        "type": "bench",
                        "payload": {"sentAt": sent_at, "n": number},
                    },
                )
                if number >= warmup:
                    result.send_ms.append(1000 * (time.monotonic() - sent_at))
                if response.status_code != 201:
                    result.errors[response.status_code] = (
                        result.errors.get(response.status_code, 0) + 1
                    )
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    tasks = [asyncio.create_task(consume(client)) for client in consumers]
    await asyncio.sleep(1.0)  # every consumer is waiting before the first send
    meter = CpuMeter(server)
    cpu_before = time.process_time()
    await send()
    try:
        await asyncio.wait_for(finished.wait(), timeout=30)
    except TimeoutError:
        log(f"long poll: {total - len(received)} messages not received within 30 s")
    result.cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


# --- (f) receive latency against queue depth -----------------------------------------------------


@dataclass(frozen=True)
class Latency:
    depth: int
    median_ms: float
    p99_ms: float
    empty: int
    cpu: CpuShare


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def receive_latencies(
    server: Server, queues: list[tuple[Client, int]], receives: int
) -> list[Latency]:
    """Receive+ACK one message at a time from each queue in turn, timing each receive.

    The queues take turns call by call, so a machine that speeds up or slows down during the
    measurement does so for every depth alike (measured one after the other, the two medians
    drifted apart by up to 30 % on a shared machine).
    """
    times: list[list[float]] = [[] for _ in queues]
    empty = [0 for _ in queues]
    clients = [
        httpx.Client(base_url=server.base_url, headers=consumer.headers(), timeout=30)
        for consumer, _ in queues
    ]
    try:
        meter: CpuMeter | None = None
        cpu_before = 0.0
        for number in range(20 + receives):
            if number == 20:
                meter, cpu_before = CpuMeter(server), time.process_time()
            for index, http in enumerate(clients):
                started = time.perf_counter()
                response = http.get("/api/exchange/messages", params={"max": 1})
                elapsed = time.perf_counter() - started
                messages = response.json()["messages"] if response.status_code == 200 else []
                if not messages:
                    empty[index] += 1
                    continue
                if number >= 20:
                    times[index].append(1000 * elapsed)
                http.post(
                    "/api/exchange/messages/ack", json={"messageIds": [messages[0]["messageId"]]}
                )
        assert meter is not None
        cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    finally:
        for http in clients:
            http.close()
    return [
        Latency(
            depth=depth,
            median_ms=statistics.median(samples) if samples else float("nan"),
            p99_ms=percentile(samples, 0.99),
            empty=missed,
            cpu=cpu,
        )
        for (_, depth), samples, missed in zip(queues, times, empty, strict=True)
    ]


# --- The table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    key: str
    what: str
    figure: str
    unit: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(rows: list[Row]) -> str:
    header = Row("row", "what", "figure", "unit", "ratio vs baseline", "target", "result")
    cells = [
        [r.key, r.what, r.figure, r.unit, r.ratio, r.target, r.verdict] for r in [header, *rows]
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(7)]
    right = {2}
    out: list[str] = []
    for index, line in enumerate(cells):
        out.append(
            "  ".join(
                value.rjust(widths[i]) if i in right else value.ljust(widths[i])
                for i, value in enumerate(line)
            ).rstrip()
        )
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


# --- py-spy (optional): where a worker's time goes -----------------------------------------------


@contextmanager
def profiled(server: Server, spy: str | None, out_dir: Path | None, name: str) -> Iterator[None]:
    """Record every gunicorn worker with py-spy while the block runs (raw collapsed stacks)."""
    if spy is None or out_dir is None:
        yield
        return
    recorders = [
        subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(worker.pid),
                "--rate",
                "200",
                "--format",
                "raw",
                "--nonblocking",
                "--gil",
                "--output",
                str(out_dir / f"{name}-{worker.pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for worker in server.workers()
    ]
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            try:
                recorder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                recorder.kill()


def profile_summary(out_dir: Path, name: str, top: int = 25) -> str:
    """Inclusive share of samples per function over the workers' stacks of one phase."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for path in sorted(out_dir.glob(f"{name}-*.txt")):
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
            frames = [re.sub(r":\d+\)$", ")", frame) for frame in frames]
            total += count
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + count
            if frames:
                own[frames[-1]] = own.get(frames[-1], 0) + count
    if not total:
        return f"{name}: no samples"
    lines = [f"{name}: {total} samples over the workers' active threads"]
    lines.append("  inclusive:")
    for frame, count in sorted(inclusive.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {100 * count / total:5.1f}%  {frame}")
    lines.append("  self:")
    for frame, count in sorted(own.items(), key=lambda item: -item[1])[:15]:
        lines.append(f"    {100 * count / total:5.1f}%  {frame}")
    return "\n".join(lines)


# --- The run -------------------------------------------------------------------------------------


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark the exchange API against raw SQL on this machine."
    )
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--duration", type=float, help="seconds measured per throughput figure")
    parser.add_argument(
        "--only", default="abcdef", help="phases to run, e.g. 'ab' (default: all of abcdef)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record the gunicorn workers with py-spy during (b), (c) and (e) into this folder "
        "(py-spy on PATH or --py-spy); the profiler costs some CPU, so figures drop a little",
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help=argparse.SUPPRESS)
    parser.add_argument("--keep-db", action="store_true", help=f"keep {BENCH_DATABASE} after")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait before each measurement for other programs to leave the CPU "
        "(120; 30 with --quick)",
    )
    args = parser.parse_args(argv)
    plan = plan_of(args)
    phases = set(args.only)
    quiet_limit = args.quiet_wait if args.quiet_wait is not None else (30 if args.quick else 120)

    wrk = shutil.which("wrk")
    if wrk is None and phases & set("bce"):
        print(
            f"wrk is not installed: it generates the HTTP load. Install it ({APT_HINT} on "
            "Debian/Ubuntu) and run this again.",
            file=sys.stderr,
        )
        return 2
    if args.profile is not None:
        if not args.py_spy:
            print("--profile needs py-spy (pip install py-spy) on PATH.", file=sys.stderr)
            return 2
        args.profile.mkdir(parents=True, exist_ok=True)

    load_before = os.getloadavg()
    log("preparing the database")
    database_url, where = database_prepare()
    facts = database_facts(database_url)
    manage(database_url, "migrate", "--no-input", "-v", "0")
    consumers_p, sender_p = principals_create(database_url, plan.clients)
    consumer_ids = [p.adapter_id for p in consumers_p]

    rows: list[Row] = []
    notes: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="exchange-bench-"))
    server: Server | None = None
    redis_stack = contextlib.ExitStack()
    try:
        redis = redis_stack.enter_context(redis_for_bench(workdir))
        log("starting gunicorn")
        server = server_start(database_url, workdir)
        consumers = [sign_in(server.base_url, p, f"bench-{n}") for n, p in enumerate(consumers_p)]
        sender = sign_in(server.base_url, sender_p, "bench-sender")
        script = workdir / "exchange.lua"
        wrk_script(script, consumers)

        before: dict[str, float] = {}
        indexes: dict[str, str] = {}

        def settle(key: str) -> None:
            before[key] = quiet_wait(quiet_limit)

        def note(key: str, result: Throughput | Latency | LongPoll, extra: str = "") -> None:
            idle = f"  [machine {before.get(key, 0):.0f}% just before]"
            notes.append(f"{key:<8} {result.cpu.line()}{extra}{idle}")
            if key in indexes:
                notes.append(" " * 11 + indexes[key].strip())

        def throughput(
            keys: tuple[str, ...], fill: int, *runs: Callable[[Plan], Throughput]
        ) -> tuple[Throughput, ...]:
            """One figure, or a raw loop and its HTTP counterpart in turns, with the queues filled
            to ``fill`` each; again with twice that if one of them ran dry."""
            for _ in range(3):
                seconds = queue_fill(database_url, consumer_ids, sender_p.adapter_id, fill)
                log(f"{' and '.join(keys)}: queues at {fill:,} messages each ({seconds:.1f} s)")
                settle(keys[0])
                for key in keys[1:]:
                    before[key] = before[keys[0]]
                reads = index_reads(database_url)
                results = in_turns(*runs, plan) if len(runs) == 2 else (runs[0](plan),)
                time.sleep(1.5)  # backends publish their statistics about once a second
                indexes[keys[-1]] = index_note(reads, index_reads(database_url))
                if all(result.empty == 0 for result in results):
                    return results
                log(f"{', '.join(keys)}: empty receives: the queues ran dry, more messages")
                fill *= 2
            return results

        def raw_loop_of(batch: int) -> Callable[[Plan], Throughput]:
            return lambda turn: raw_run(database_url, server, consumers, batch, turn)

        def http_of(batch: int) -> Callable[[Plan], Throughput]:
            assert wrk is not None
            return lambda turn: wrk_run(wrk, script, server, turn, "queue", batch)

        a: Throughput | None = None
        b: Throughput | None = None
        if phases & set("ab"):
            if phases >= set("ab"):
                log("(a) raw psycopg loop and (b) HTTP API, batch 1, in turns")
                with profiled(server, args.py_spy, args.profile, "b"):
                    a, b = throughput(("(a)", "(b)"), plan.batch1_fill, raw_loop_of(1), http_of(1))
            elif "a" in phases:
                log("(a) raw psycopg loop, batch 1")
                (a,) = throughput(("(a)",), plan.batch1_fill, raw_loop_of(1))
            else:
                log("(b) HTTP API, batch 1")
                with profiled(server, args.py_spy, args.profile, "b"):
                    (b,) = throughput(("(b)",), plan.batch1_fill, http_of(1))
            if a is not None:
                note("(a)", a)
                rows.append(
                    Row(
                        "(a)",
                        f"raw psycopg, batch 1: session check + claim + ACK ({plan.clients} conns)",
                        fmt(a.rate),
                        "msgs/s",
                        "baseline",
                    )
                )
            if b is not None:
                note("(b)", b, f"  (HTTP p50 {b.p50_ms:.1f} ms, p99 {b.p99_ms:.1f} ms)")
                ratio = b.rate / a.rate if a else float("nan")
                rows.append(
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
        if "c" in phases:
            log("(c) raw psycopg loop and HTTP API, batch 100, in turns")
            with profiled(server, args.py_spy, args.profile, "c"):
                a100, c = throughput(
                    ("(c)raw", "(c)"), plan.batch100_fill, raw_loop_of(100), http_of(100)
                )
            note("(c)raw", a100)
            note("(c)", c, f"  (HTTP p50 {c.p50_ms:.1f} ms, p99 {c.p99_ms:.1f} ms)")
            rows.append(
                Row(
                    "(c)raw",
                    "raw psycopg, batch 100: session check + claim 100 + ACK 100",
                    fmt(a100.rate),
                    "msgs/s",
                    "baseline",
                )
            )
            ratio = c.rate / a100.rate
            rows.append(
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
        if "d" in phases:
            log("(d) long polling, send to receive")
            queue_clear(database_url, consumer_ids)
            settle("(d)")
            d = asyncio.run(longpoll_run(server, consumers, sender, plan))
            note(
                "(d)",
                d,
                f"  (send call p50 {percentile(d.send_ms, 0.5):.1f} ms; errors {d.errors or 0})",
            )
            p50, p99 = percentile(d.latencies_ms, 0.5), percentile(d.latencies_ms, 0.99)
            what = (
                f"long poll, send -> receive, {len(d.latencies_ms)} msgs at "
                f"{plan.longpoll_rate:g}/s, {plan.clients} waiting consumers"
            )
            rows.append(
                Row("(d)", what + ": p50", fmt(p50, 1), "ms", "", "< 50 ms", verdict(p50 < 50))
            )
            rows.append(Row("(d)", what + ": p99", fmt(p99, 1), "ms"))
            if phases & set("ef"):
                # The server cannot tell that (d)'s clients went away: their last long polls hold
                # worker threads until waitSeconds (20 s) run out, which would starve (e) and (f).
                log("(d) waiting 21 s for the last long polls to end")
                time.sleep(21)
        if "e" in phases:
            assert wrk is not None
            log("(e) bare Django view and whoami, in turns")
            settle("(e)")
            before["(e)bare"] = before["(e)"]
            with profiled(server, args.py_spy, args.profile, "e"):
                bare, who = in_turns(
                    lambda turn: wrk_run(wrk, script, server, turn, "bare"),
                    lambda turn: wrk_run(wrk, script, server, turn, "whoami"),
                    plan,
                )
            note("(e)bare", bare, f"  (p50 {bare.p50_ms:.2f} ms)")
            note("(e)", who, f"  (p50 {who.p50_ms:.2f} ms; errors {who.errors})")
            ratio = who.rate / bare.rate
            rows.append(
                Row(
                    "(e)bare",
                    "GET /bench/bare: plain Django view",
                    fmt(bare.rate),
                    "req/s",
                    "baseline",
                )
            )
            rows.append(
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
        if "f" in phases:
            # Two consumers' queues in the one table, filled to both depths, measured in turns.
            queues = [(consumers[0], plan.small_queue), (consumers[1], plan.large_queue)]
            queue_clear(database_url, consumer_ids)
            for consumer, depth in queues:
                seconds = queue_fill(
                    database_url, [consumer.principal.adapter_id], sender_p.adapter_id, depth
                )
                log(f"(f) {depth:,} waiting for {consumer.principal.login} ({seconds:.1f} s)")
            settle("(f)")
            results = receive_latencies(server, queues, plan.latency_receives)
            note("(f)", results[0], " (both queues, in turns)")
            small, large = results
            ratio = large.median_ms / small.median_ms
            spread = max(ratio, 1 / ratio)
            rows.append(
                Row(
                    "(f)1k",
                    f"receive latency, {small.depth:,} waiting (queues in turns): median "
                    f"(p99 {small.p99_ms:.2f} ms)",
                    fmt(small.median_ms, 2),
                    "ms",
                    "baseline",
                )
            )
            rows.append(
                Row(
                    "(f)1M",
                    f"receive latency, {large.depth:,} waiting (queues in turns): median "
                    f"(p99 {large.p99_ms:.2f} ms)",
                    fmt(large.median_ms, 2),
                    "ms",
                    f"{ratio:.2f} x (f)1k",
                    "within 20 %",
                    verdict(spread <= 1.20),
                )
            )
    finally:
        if server is not None:
            server.stop()
        redis_stack.close()
        if not args.keep_db:
            database_drop(database_url)

    load_after = os.getloadavg()
    print()
    print("Exchange benchmark")
    print(
        f"machine: {platform.node()}, {cpu_model()}, nproc {os.cpu_count()}, "
        f"Python {platform.python_version()}, "
        f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after"
    )
    print(
        f"database: PostgreSQL {facts['version']} ({where}), database {BENCH_DATABASE}, "
        f"synchronous_commit={facts['synchronous_commit']}, fsync={facts['fsync']}, "
        f"shared_buffers={facts['shared_buffers']}, max_wal_size={facts['max_wal_size']}"
    )
    print(
        f"server: gunicorn gthread {GUNICORN_WORKERS} workers x {GUNICORN_THREADS} threads, "
        f"Django pool max {os.environ.get('DATABASE_POOL_MAX_SIZE', '4')} per worker; Redis: "
        + redis
    )
    print(
        f"load: {plan.clients} clients; {plan.duration:g} s measured per throughput figure, the "
        "two figures of each ratio in turns (a warm-up of 1 s before each turn)"
        + (" (--quick)" if args.quick else "")
    )
    print()
    print(table(rows))
    print()
    print("CPU during each measurement (% of one core):")
    for line in notes:
        print("  " + line)
    if args.profile is not None:
        print()
        for name in ("b", "c", "e"):
            if name in phases:
                print(profile_summary(args.profile, name))
    return 0 if all(row.verdict != "FAIL" for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
