"""What the benchmark starts and signs in: its database, Redis, gunicorn, and the adapters.

The other bench scripts build their own runs from these (each with a database of its own).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import psycopg
from psycopg import sql

from bench.throughput.report import log
from platform_site.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
BENCH_DATABASE = "exchange_bench"
PREFILL = (
    "INSERT INTO exchange_message (message_id, recipient_id, sender_id, type, payload, headers, "
    "enqueued_at, visible_at, receive_count) "
    "SELECT gen_random_uuid(), %s, %s, 'bench', '{\"n\": 1}'::jsonb, '{}'::jsonb, now(), now(), 0 "
    "FROM generate_series(1, %s)"
)
GUNICORN_WORKERS = 2
GUNICORN_THREADS = 8


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


def queue_clear(database_url: str, recipients: list[int], *, checkpoint: bool = True) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM exchange_message WHERE recipient_id = ANY(%s)", [recipients])
        database_settle(conn, checkpoint=checkpoint)


def database_settle(conn: psycopg.Connection[Any], *, checkpoint: bool = True) -> None:
    """Leave each phase the same table: no dead rows, fresh statistics, no checkpoint pending.

    Without ``checkpoint`` for the turns of one phase: right after a checkpoint, the first
    change to each page writes the whole page to the WAL, and the delivery log's index of
    random message ids takes a change on a new page with almost every ACK, so every turn would
    start with PostgreSQL's costliest seconds (and RabbitMQ has nothing like them)."""
    conn.execute("VACUUM ANALYZE exchange_message")
    if not checkpoint:
        return
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
    database: str  # the name of the database it serves: its PostgreSQL backends are counted

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.base_url)
        return parts.hostname or "127.0.0.1", parts.port or 80

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
    app: str = "platform_site.asgi:application",
    worker_class: str | None = None,
    **env_extra: str,
) -> Server:
    """The platform's server as deploy/serve starts it (gunicorn with deploy/gunicorn.conf.py),
    2 processes x 8 threads unless told otherwise (bench.waits compares other shapes), ready
    when this returns."""
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
        # (k) reads how many long polls wait from the server's metrics.
        MANAGEMENT_ENDPOINTS_EXPOSURE="health,info,prometheus",
        **env_extra,
    )
    log_path = workdir / "gunicorn.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "deploy/gunicorn.conf.py",
                *(["--worker-class", worker_class] if worker_class else []),
                *(["--threads", str(threads)] if worker_class == "gthread" else []),
                app,
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(
        process=process,
        base_url=f"http://127.0.0.1:{port}",
        log_path=log_path,
        database=urlsplit(database_url).path.lstrip("/"),
    )
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


# --- Redis ---------------------------------------------------------------------------------------


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
