"""python -m bench.outage (the bench is described in bench/outage/__init__.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import psycopg

from bench.outage import BATCH, DATABASE, EXCHANGE, HEALTH_EVERY
from bench.outage.report import run_report, summary
from bench.outage.runs import drain_and_account, figures_of, outage_run
from bench.outage.traffic import Traffic
from bench.throughput.machine import cpu_model
from bench.throughput.report import log
from bench.throughput.servers import (
    GUNICORN_THREADS,
    GUNICORN_WORKERS,
    manage,
    principals_create,
    redis_for_bench,
    server_start,
    sign_in,
)
from platform_site import embedded


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
        f"server: deploy/serve, {GUNICORN_WORKERS} processes x {GUNICORN_THREADS} threads, "
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
