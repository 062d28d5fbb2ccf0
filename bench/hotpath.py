"""Where one request's CPU goes: the exchange's hot path in one process, one thread, no sockets.

    .venv/bin/python -m bench.hotpath [--requests N]

It builds a database (``exchange_hotpath``) as bench.throughput does, runs Django in this process
with bench.settings, and calls each endpoint through Django's WSGI handler as gunicorn would (the
database connection goes back to the pool after each request): CPU and wall ms per request for
the bare view, whoami, receive and ACK (batch 1 and 100, and an ACK of 100 receiving the next
100), the sends, then a cProfile of CPU time for each:
the share of a request spent in the platform's main steps, and the top functions. The figures
leave out gunicorn and the network.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.throughput.servers import (
    database_drop,
    database_prepare,
    manage,
    principals_create,
    queue_fill,
    redis_for_bench,
)

ROOT = Path(__file__).resolve().parent.parent

# The platform's steps a request goes through: (label, file ending, function name).
STEPS = [
    ("middleware stack (all of it)", "platform_site/observability.py", "__call__"),
    ("DRF dispatch (view, auth, parsing)", "rest_framework/views.py", "dispatch"),
    ("authentication (JWT + session)", "accounts/authentication.py", "authenticate"),
    ("  JWT decode (simplejwt/PyJWT)", "accounts/services/tokens.py", "access_token_decode"),
    ("  session check", "accounts/selectors.py", "session_authenticate"),
    ("    Redis: revision + rate-limit count", "accounts/liveness.py", "checked"),
    ("taking a pooled connection", "django/db/backends/base/base.py", "connect"),
    ("giving it back (request_finished)", "django/db/__init__.py", "close_old_connections"),
    ("rate limit (django-ratelimit, no Redis)", "platform_site/ratelimits.py", "rate_limit_count"),
    ("ORM: SQL compilation", "django/db/models/sql/compiler.py", "as_sql"),
    ("ORM: model instances from rows", "django/db/models/base.py", "from_db"),
    ("database calls (psycopg execute)", "psycopg/cursor.py", "execute"),
    ("receive service (claim SQL + rows)", "exchange/services/messages.py", "messages_receive"),
    ("  a long poll's ticket (before the claim)", "exchange/wakeups.py", "ticket"),
    ("ACK service (SQL)", "exchange/services/messages.py", "messages_ack"),
    (
        "ACK + receive service (one round trip)",
        "exchange/services/messages.py",
        "messages_ack_receive",
    ),
    ("send service", "exchange/services/sending.py", "messages_send"),
    ("  batch items (serializers)", "exchange/api/serializers.py", "batch_items"),
    ("input serializers (is_valid)", "rest_framework/serializers.py", "is_valid"),
    ("JSON body parsing", "platform_site/parsers.py", "parse"),
    ("response rendering (DRF JSON)", "rest_framework/renderers.py", "render"),
    ("request log line", "platform_site/observability.py", "_log"),
    ("Prometheus metrics", "prometheus_client/metrics.py", "inc"),
]


DATABASE = "exchange_hotpath"  # its own: bench.throughput may run beside it

# What the sends carry: an order of about 100 bytes as compact JSON.
PAYLOAD = {"orderId": 1001, "sku": "A-1234-XL", "quantity": 3, "note": "deliver before noon"}


def measure(call: Callable[[], Any], count: int) -> tuple[float, float, float]:
    """(CPU ms, of which in the kernel, wall ms) per call: the kernel's share is the sockets'
    (PostgreSQL, Redis), which cProfile does not see."""
    before, wall = os.times(), time.perf_counter()
    for _ in range(count):
        call()
    after = os.times()
    return (
        1000 * (after.user + after.system - before.user - before.system) / count,
        1000 * (after.system - before.system) / count,
        1000 * (time.perf_counter() - wall) / count,
    )


def profile_of(call: Callable[[], Any], count: int) -> pstats.Stats:
    profiler = cProfile.Profile(time.process_time)  # CPU time: waits on the database drop out
    profiler.enable()
    for _ in range(count):
        call()
    profiler.disable()
    return pstats.Stats(profiler)


def breakdown(stats: pstats.Stats, count: int, top: int) -> list[str]:
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    table = stats.stats  # type: ignore[attr-defined]
    total = max(
        (cumulative for (_, _, name), (*_, cumulative, _) in table.items() if name == "generic"),
        default=0.0,
    )
    total = total or max(cumulative for *_, cumulative, _ in table.values())
    lines = [f"    {'step':<40} {'share':>6} {'ms/req (profiled)':>18}"]
    for label, ending, function in STEPS:
        cumulative = sum(
            value[3]
            for (filename, _, name), value in table.items()
            if name == function and filename.endswith(ending)
        )
        if cumulative:
            share, each = 100 * cumulative / total, 1000 * cumulative / count
            lines.append(f"    {label:<40} {share:5.1f}% {each:12.3f}")
    lines.append("    top functions by own time:")
    ranked = sorted(table.items(), key=lambda item: -item[1][2])[:top]
    for (filename, line, name), (_, _, own, _, _) in ranked:
        short = filename.split("site-packages/")[-1].replace(str(ROOT) + "/", "")
        lines.append(f"      {100 * own / total:5.1f}%  {name} ({short}:{line})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1000, help="calls per figure (1000)")
    parser.add_argument("--top", type=int, default=12, help="functions listed per profile (12)")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)
    count: int = args.requests

    database_url, where = database_prepare(DATABASE)
    manage(database_url, "migrate", "--no-input", "-v", "0")
    consumers, sender = principals_create(database_url, 1)
    consumer = consumers[0]
    # Warm-up, measured and profiled calls: about 32 messages per batch-1 pair, with room (the
    # sends come last and queue their own).
    queue_fill(database_url, [consumer.adapter_id], sender.adapter_id, 40 * count + 10000)
    # Redis as production has it (the bench's own redis-server when REDIS_URL is unset).
    stack = contextlib.ExitStack()
    workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="hotpath-"))
    redis = stack.enter_context(redis_for_bench(Path(workdir)))
    os.environ.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="bench.settings",
        ALLOWED_HOSTS="testserver,127.0.0.1",
        DEBUG="false",
        LOG_LEVEL="WARNING",
        EXCHANGE_RATE_LIMIT="100000000/m",
        JWT_ACCESS_TTL_SECONDS="86400",
    )
    try:
        import django

        django.setup()
        from django.core.wsgi import get_wsgi_application
        from django.test import Client

        client = Client(HTTP_X_DEVICE_ID="hotpath")
        signed = client.post(
            "/api/auth/login/username",
            {"username": consumer.login, "password": consumer.password},
            content_type="application/json",
        )
        token = signed.json()["accessToken"]
        auth = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_X_DEVICE_ID": "hotpath"}
        # Django's WSGI handler, called as gunicorn calls it: the test client would keep the
        # database connection across requests and hide taking it from the pool and giving it back.
        app = get_wsgi_application()

        def request(path: str, query: str = "", body: Any = None) -> Any:
            data = b"" if body is None else json.dumps(body).encode()
            environ = {
                "REQUEST_METHOD": "GET" if body is None else "POST",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "SERVER_NAME": "127.0.0.1",
                "SERVER_PORT": "8000",
                "SERVER_PROTOCOL": "HTTP/1.1",
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_HOST": "127.0.0.1",
                "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": str(len(data)),
                "wsgi.input": io.BytesIO(data),
                "wsgi.url_scheme": "http",
                "wsgi.errors": sys.stderr,
                **auth,
            }
            statuses: list[str] = []

            def start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
                statuses.append(status)
                return None

            result = app(environ, start_response)
            try:
                content = b"".join(result)
            finally:
                result.close()  # request_finished: the connection goes back to the pool
            if not statuses[0].startswith(("200", "201")):
                raise SystemExit(f"{path}: {statuses[0]} {content[:300]!r}")
            return json.loads(content)

        def bare() -> None:
            request("/bench/bare")

        def whoami() -> None:
            request("/api/exchange/whoami")

        def receive_and_ack(batch: int) -> Callable[[], None]:
            # Each receive's messages are ACKed before the next: a message received and not
            # ACKed would come back to this instance on every receive.
            def call() -> None:
                messages = request("/api/exchange/messages", f"max={batch}")["messages"]
                if len(messages) != batch:
                    raise SystemExit(f"receive of {batch} returned {len(messages)} messages")
                ids = [message["messageId"] for message in messages]
                request("/api/exchange/messages/ack", body={"messageIds": ids})

            return call

        def ack_receiving(batch: int) -> Callable[[], None]:
            # Each ACK receives the next batch; the first call's ids come from a receive.
            held: list[str] = []

            def call() -> None:
                nonlocal held
                if not held:
                    messages = request("/api/exchange/messages", f"max={batch}")["messages"]
                    held = [message["messageId"] for message in messages]
                body = {"messageIds": held, "receive": {"max": batch}}
                messages = request("/api/exchange/messages/ack", body=body)["messages"]
                if len(messages) != batch:
                    raise SystemExit(f"an ACK's receive of {batch} returned {len(messages)}")
                held = [message["messageId"] for message in messages]

            return call

        def send(batch: int) -> Callable[[], None]:
            message = {"to": consumer.adapter_id, "type": "bench.order", "payload": PAYLOAD}

            def call() -> None:
                if batch == 1:
                    request("/api/exchange/messages", body=message)
                else:
                    request("/api/exchange/messages/batch", body={"messages": [message] * batch})

            return call

        cases: list[tuple[str, Callable[[], None], int]] = [
            ("GET /bench/bare", bare, count),
            ("GET /api/exchange/whoami", whoami, count),
            ("receive ?max=1, then ACK it (2 requests)", receive_and_ack(1), count),
            ("receive ?max=100, then one ACK (2 requests)", receive_and_ack(100), count // 10),
            ("ACK of 100 receiving the next 100 (1 request)", ack_receiving(100), count // 10),
            ("send 1 (POST /api/exchange/messages)", send(1), count),
            ("send 100 (POST /api/exchange/messages/batch)", send(100), count // 10),
        ]
        for _, call, _ in cases:  # warm up: imports, pool, prepared caches
            for _ in range(20):
                call()
        print(f"Hot path in one process ({where}); {count} calls per figure (batch 100: /10)")
        print(f"  Redis: {redis}")
        print("  (each call through Django's WSGI handler; the database connection goes back to")
        print("  the pool after each request, as under gunicorn)")
        print(f"  {'request':<44} {'CPU ms':>8} {'kernel':>8} {'wall ms':>8}")
        figures: dict[str, float] = {}
        for name, call, calls in cases:
            cpu, kernel, wall = measure(call, calls)
            figures[name] = cpu
            print(f"  {name:<44} {cpu:8.3f} {kernel:8.3f} {wall:8.3f}")
        print()
        for name, call, calls in cases[1:]:
            stats = profile_of(call, max(1, calls // 2))
            print(f"  {name}: cProfile of CPU time (inflated by the profiler; shares hold)")
            print("\n".join(breakdown(stats, max(1, calls // 2), args.top)))
            print()
    finally:
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            database_drop(database_url, DATABASE)
        stack.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
