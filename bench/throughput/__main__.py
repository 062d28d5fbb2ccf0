"""``python -m bench.throughput``: the exchange benchmark's command line (see the package)."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from amqp.exceptions import AMQPError

from bench.throughput.comparison import compare
from bench.throughput.figures import Bench, measure
from bench.throughput.load import APT_HINT, plan_of, wrk_script
from bench.throughput.machine import cpu_model
from bench.throughput.profiling import profile_summary
from bench.throughput.rabbitmq import bench_queue
from bench.throughput.report import Setting, log, passed, report
from bench.throughput.servers import (
    BENCH_DATABASE,
    GUNICORN_THREADS,
    GUNICORN_WORKERS,
    database_drop,
    database_facts,
    database_prepare,
    manage,
    principals_create,
    redis_for_bench,
    server_start,
    sign_in,
)
from bench.throughput.stream_figures import push
from bench.throughput.topic_figures import topics
from bench.throughput.webhook_figures import webhooks


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.throughput",
        description="Benchmark the exchange API against raw SQL and RabbitMQ on this machine.",
    )
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--duration", type=float, help="seconds measured per throughput figure")
    parser.add_argument(
        "--only",
        default="abcdefghijklm",
        help="phases to run, e.g. 'ab' (default: all of abcdefghijklm; i, j and k's second half "
        "measure push streams, l webhooks beside them, m topics beside a RabbitMQ fanout)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record the gunicorn workers with py-spy during (b), (c) and (e) into this folder "
        "(py-spy on PATH or --py-spy); the profiler costs some CPU, so figures drop a little",
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--database",
        default=os.environ.get("EXCHANGE_BENCH_DATABASE", BENCH_DATABASE),
        help=f"the database to create, use and drop ($EXCHANGE_BENCH_DATABASE or "
        f"{BENCH_DATABASE}): another name lets two runs share a PostgreSQL server",
    )
    parser.add_argument(
        "--large-queue",
        type=int,
        help="messages waiting in (f)'s large queue (1,000,000; docs/performance.md measures "
        "10,000,000 too)",
    )
    parser.add_argument("--keep-db", action="store_true", help="keep the database after")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        help="seconds to wait before each measurement for other programs to leave the CPU "
        "(120; 30 with --quick)",
    )
    return parser.parse_args(argv)


def tools_missing(args: argparse.Namespace, phases: set[str]) -> str | None:
    """Why the run cannot start: wrk for the HTTP figures, py-spy for --profile."""
    if shutil.which("wrk") is None and phases & set("bce"):
        return (
            f"wrk is not installed: it generates the HTTP load. Install it ({APT_HINT} on "
            "Debian/Ubuntu) and run this again."
        )
    if args.profile is not None and not args.py_spy:
        return "--profile needs py-spy (pip install py-spy) on PATH."
    return None


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    plan, phases = plan_of(args), set(args.only)
    quiet_limit = args.quiet_wait if args.quiet_wait is not None else (30 if args.quick else 120)
    if problem := tools_missing(args, phases):
        print(problem, file=sys.stderr)
        return 2
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)

    load_before = os.getloadavg()
    log(f"preparing the database {args.database}")
    database_url, where = database_prepare(args.database)
    facts = database_facts(database_url)
    manage(database_url, "migrate", "--no-input", "-v", "0")
    consumers_p, sender_p = principals_create(database_url, plan.clients)
    workdir = Path(tempfile.mkdtemp(prefix="exchange-bench-"))
    with contextlib.ExitStack() as cleanup:
        if not args.keep_db:
            cleanup.callback(database_drop, database_url, args.database)
        broker, rabbitmq, fanout = None, "", ""
        if phases & set("ghijm"):
            try:
                broker, version = cleanup.enter_context(bench_queue())
            except (OSError, AMQPError) as error:
                print(f"(g) to (j) and (m) need RabbitMQ (RABBITMQ_URL): {error}", file=sys.stderr)
                return 2
            rabbitmq = f"{version} at {broker.where}" if phases & set("ghij") else ""
            if "m" in phases:
                fanout = f"{version} at {broker.host}:{broker.port}, vhost {broker.virtual_host}"
        redis = cleanup.enter_context(redis_for_bench(workdir))
        log("starting gunicorn")
        # (g) sends without consumers, and RabbitMQ's queue has no bound: the API's bound
        # (100,000 waiting per recipient by default) must not refuse a send during the run.
        # (l)'s webhooks reach a receiver on loopback, which production's servers refuse.
        server = server_start(
            database_url,
            workdir,
            EXCHANGE_MAX_QUEUE_DEPTH="100000000",
            EXCHANGE_WEBHOOK_ALLOW_PRIVATE="true",
        )
        cleanup.callback(server.stop)
        consumers = [sign_in(server.base_url, p, f"bench-{n}") for n, p in enumerate(consumers_p)]
        script = workdir / "exchange.lua"
        wrk_script(script, consumers)
        bench = Bench(
            database_url=database_url,
            server=server,
            consumers=consumers,
            sender=sign_in(server.base_url, sender_p, "bench-sender"),
            plan=plan,
            wrk=shutil.which("wrk"),
            script=script,
            quiet_limit=quiet_limit,
            spy=args.py_spy,
            profile_dir=args.profile,
            rabbitmq=broker,
        )
        measure(bench, phases)
        compare(bench, phases)
        push(bench, phases)
        webhooks(bench, phases)
        topics(bench, phases)

    setting = Setting(
        node=platform.node(),
        cpu=cpu_model(),
        cores=os.cpu_count(),
        python=platform.python_version(),
        load_before=load_before[0],
        load_after=os.getloadavg()[0],
        database=facts,
        where=where,
        database_name=args.database,
        workers=GUNICORN_WORKERS,
        threads=GUNICORN_THREADS,
        pool_max=os.environ.get("DATABASE_POOL_MAX_SIZE", "4"),
        redis=redis,
        clients=plan.clients,
        duration=plan.duration,
        quick=args.quick,
        rabbitmq=rabbitmq,
        producers=plan.producers if phases & set("gh") else 0,
        webhooks="l" in phases,
        topics=fanout,
    )
    profiles = []
    if args.profile is not None:
        profiles = [profile_summary(args.profile, name) for name in "bce" if name in phases]
    print(report(setting, bench.rows, bench.notes, profiles))
    return 0 if passed(bench.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
