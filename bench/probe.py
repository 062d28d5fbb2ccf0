"""ASGI entry point for bench.waits (``bench.probe:server``): the platform's server, with each
receive and ACK request measured in the thread that runs it.

For every request to /api/exchange/messages (receive and ACK), a worker adds up: the wall time
inside the application, the CPU time of the thread that served it, and the wall and CPU time spent
in the Redis session check (``accounts.liveness._evaluate``) and in PostgreSQL statements
(``psycopg.Cursor.execute``). Wall time that is not CPU time is waiting: for the server to answer,
or, when the answer is there, for the interpreter lock that another thread of the worker holds.

SIGUSR2 makes a worker append its totals so far, as one JSON line, to
``$BENCH_PROBE_DIR/probe.<pid>.jsonl``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg

# isort: off
import platform_site.asgi  # noqa: F401  (first: it sets Django up)
import accounts.liveness
from django.core.handlers.wsgi import WSGIHandler
from exchange.wakeups import wakeups
from platform_site.server import Server

# isort: on

platform = WSGIHandler()

MEASURED = "/api/exchange/messages"
FIELDS = ("requests", "wall", "cpu", "redis_wall", "redis_cpu", "pg_wall", "pg_cpu")

_totals = dict.fromkeys(FIELDS, 0.0)
_lock = threading.Lock()
_request = threading.local()  # the current request's Redis and PostgreSQL times, per thread


def _timed(function: Callable[..., Any], kind: str) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent = getattr(_request, "spent", None)
            if spent is not None:
                spent[f"{kind}_wall"] += time.perf_counter() - wall
                spent[f"{kind}_cpu"] += time.thread_time() - cpu

    return timed


accounts.liveness._evaluate = _timed(accounts.liveness._evaluate, "redis")
psycopg.Cursor.execute = _timed(psycopg.Cursor.execute, "pg")  # type: ignore[method-assign]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if not environ.get("PATH_INFO", "").startswith(MEASURED):
        return platform(environ, start_response)
    _request.spent = spent = dict.fromkeys(FIELDS, 0.0)
    wall, cpu = time.perf_counter(), time.thread_time()
    result = platform(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        result.close()  # request_finished: the pool takes the connection back
    spent["wall"] = time.perf_counter() - wall
    spent["cpu"] = time.thread_time() - cpu
    spent["requests"] = 1
    _request.spent = None
    with _lock:
        for field in FIELDS:
            _totals[field] += spent[field]
    return [body]


def _dump(signum: int, frame: Any) -> None:
    with _lock:
        line = json.dumps(_totals)
    directory = Path(os.environ.get("BENCH_PROBE_DIR", "."))
    with (directory / f"probe.{os.getpid()}.jsonl").open("a") as out:
        out.write(line + "\n")


signal.signal(signal.SIGUSR2, _dump)

server = Server(
    application,
    threads=int(os.environ.get("GUNICORN_THREADS", "8")),
    on_startup=[wakeups.start],
)
