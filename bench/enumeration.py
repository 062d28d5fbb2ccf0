"""Does timing tell whether an account exists? Known against unknown accounts, measured.

    .venv/bin/python -m bench.enumeration [--samples N] [--reset-samples N] [--warm-up N]

It builds the ``enumeration_bench`` database (as bench.throughput builds its own: on the server
of DATABASE_URL, or on the embedded PostgreSQL), uses the Redis of REDIS_URL or a redis-server of
its own, creates one cabinet user, and calls the platform in this process through Django's test
client with DEBUG off, in pairs, known then unknown and unknown then known in turns, so that a
change in the machine's load falls on both series alike:

- sign-in by e-mail with a wrong password: the user's address against an address nobody has;
- sign-in by login with a wrong password: the user's login against a login nobody has;
- password reset: the user's address against an address nobody has.

Before each sign-in the sign-in gates are emptied (untimed), so that every call checks a password
and none answers from a lock; rate limits are raised out of the way and the resend cooldown is 0,
so that every reset starts a challenge. Celery publishes the outbox's task to its in-memory
transport (``memory://``): the request's side of the outbox, the same for both; the delivery (an
e-mail for the user, a skipped row for nobody) runs in a worker after the answer.

Prints the median wall time of each series, its interquartile range, and the unknown/known ratio.
The suite proves the two paths do the same work (tests/accounts/test_enumeration.py); this measures
what that work takes. Exit status 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.throughput.machine import cpu_model
from bench.throughput.report import log
from bench.throughput.servers import database_drop, database_prepare, manage, redis_for_bench

BENCH_DATABASE = "enumeration_bench"
KNOWN_LOGIN = "bench-ada"
KNOWN_EMAIL = "ada@bench.example"
UNKNOWN_LOGIN = "bench-nobody"
UNKNOWN_EMAIL = "nobody@bench.example"
WRONG_PASSWORD = "not the password"  # noqa: S105


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    known: dict[str, str]
    unknown: dict[str, str]
    status: int
    samples: int
    before: Callable[[], None]  # untimed, before each call


@dataclass(frozen=True)
class Series:
    median: float
    quartiles: tuple[float, float]

    @classmethod
    def of(cls, seconds: list[float]) -> Series:
        first, _, third = statistics.quantiles(seconds, n=4)
        return cls(statistics.median(seconds), (first, third))

    def cell(self) -> str:
        low, high = self.quartiles
        return f"{1000 * self.median:8.2f} ({1000 * (high - low):5.2f})"


def measure(client: Any, case: Case, warm_up: int) -> tuple[Series, Series]:
    """(known, unknown): ``case.samples`` calls each after ``warm_up`` pairs, in pairs whose order
    alternates."""

    def seconds(body: dict[str, str]) -> float:
        case.before()
        started = time.perf_counter()
        response = client.post(case.path, body, content_type="application/json")
        elapsed = time.perf_counter() - started
        if response.status_code != case.status:
            raise SystemExit(f"{case.name}: {response.status_code} {response.content[:300]!r}")
        return elapsed

    for _ in range(warm_up):  # imports, the first connection, templates, the hasher's library
        seconds(case.known)
        seconds(case.unknown)
    known: list[float] = []
    unknown: list[float] = []
    gc.collect()
    gc.disable()  # a collection would land on whichever call happens to trigger it
    try:
        for index in range(case.samples):
            if index % 2 == 0:
                known.append(seconds(case.known))
                unknown.append(seconds(case.unknown))
            else:
                unknown.append(seconds(case.unknown))
                known.append(seconds(case.known))
    finally:
        gc.enable()
    return Series.of(known), Series.of(unknown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=40, help="calls per sign-in series (40)")
    parser.add_argument(
        "--reset-samples", type=int, default=400, help="calls per reset series (400)"
    )
    parser.add_argument("--warm-up", type=int, default=5, help="untimed pairs per case (5)")
    parser.add_argument("--keep-db", action="store_true", help=f"keep {BENCH_DATABASE} after")
    args = parser.parse_args(argv)

    log(f"preparing {BENCH_DATABASE}")
    database_url, where = database_prepare(BENCH_DATABASE)
    with contextlib.ExitStack() as stack:
        if not args.keep_db:
            stack.callback(database_drop, database_url, BENCH_DATABASE)
        manage(database_url, "migrate", "--no-input", "-v", "0")
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="enumeration-"))
        redis = stack.enter_context(redis_for_bench(Path(workdir)))
        os.environ.update(
            DATABASE_URL=database_url,
            DJANGO_SETTINGS_MODULE="bench.settings",
            ALLOWED_HOSTS="testserver",
            DEBUG="false",
            LOG_LEVEL="ERROR",  # a 401 and django-axes' note on it are logged at INFO, WARNING
            ACCOUNTS_RATE_LIMIT_IP="1000000/m",
            ACCOUNTS_RATE_LIMIT_ACCOUNT="1000000/m",
            ACCOUNTS_CODE_RESEND_SECONDS="0",
            CELERY_BROKER_URL="memory://localhost/",
        )
        import django

        django.setup()
        from django.db import connections
        from django.test import Client

        from accounts.models import SignInGate, User

        stack.callback(connections.close_all)  # before the database is dropped
        User.objects.create_user(
            username=KNOWN_LOGIN,
            email=KNOWN_EMAIL,
            password=secrets.token_urlsafe(18),
            email_confirmed=True,
        )

        def gates_cleared() -> None:
            SignInGate.objects.all().delete()

        def nothing() -> None:
            pass

        cases = [
            Case(
                "sign-in by e-mail, wrong password",
                "/api/auth/login/email",
                {"email": KNOWN_EMAIL, "password": WRONG_PASSWORD},
                {"email": UNKNOWN_EMAIL, "password": WRONG_PASSWORD},
                401,
                args.samples,
                gates_cleared,
            ),
            Case(
                "sign-in by login, wrong password",
                "/api/auth/login/username",
                {"username": KNOWN_LOGIN, "password": WRONG_PASSWORD},
                {"username": UNKNOWN_LOGIN, "password": WRONG_PASSWORD},
                401,
                args.samples,
                gates_cleared,
            ),
            Case(
                "password reset",
                "/api/auth/reset-password",
                {"email": KNOWN_EMAIL},
                {"email": UNKNOWN_EMAIL},
                200,
                args.reset_samples,
                nothing,
            ),
        ]
        client = Client()
        load_before = os.getloadavg()[0]
        rows = []
        for case in cases:
            log(f"{case.name}: {case.samples} samples each")
            known, unknown = measure(client, case, args.warm_up)
            ratio = unknown.median / known.median
            rows.append(
                f"  {case.name:<34} {case.samples:>7} {known.cell()} {unknown.cell()} "
                f"{ratio:8.3f} {100 * (ratio - 1):+7.1f} %"
            )
        load_after = os.getloadavg()[0]
    print(
        f"\nKnown against unknown accounts, in one process ({where}; Redis: {redis})\n"
        f"  {cpu_model()}, {os.cpu_count()} cores, load average {load_before:.1f} before and "
        f"{load_after:.1f} after\n"
        f"  {args.warm_up} warm-up pairs, then pairs in alternating order; "
        "wall ms per request: median (interquartile range)\n"
    )
    print(
        f"  {'case':<34} {'samples':>7} {'known':>16} {'unknown':>16} {'unk/known':>8} {'diff':>9}"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
