"""Where a receive or ACK request's time goes under load: CPU, Redis, PostgreSQL, the lock.

    .venv/bin/python -m bench.waits [--shape 2x8 --shape 8x1] [--duration S]

For each gunicorn shape (workers x threads; 2x8 is production's, deploy/gunicorn.conf.py), it
starts the platform through bench/probe.py, drives figure (b) of bench.throughput (8 wrk
connections, GET ?max=1 then ACK) and prints, per request, the wall time inside the application
split into: the serving thread's CPU; the wait for Redis's answer; the wait for PostgreSQL's; and
the rest. A wait includes taking the interpreter lock back once the answer is there, which
another thread of the same worker may hold: with one thread per worker that part is gone. The
database, Redis and principals are those of bench.throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.throughput.load import APT_HINT, wrk_once, wrk_script
from bench.throughput.machine import quiet_wait
from bench.throughput.report import log
from bench.throughput.servers import (
    Principal,
    Server,
    database_drop,
    database_prepare,
    manage,
    principals_create,
    queue_fill,
    redis_for_bench,
    server_start,
    sign_in,
)

CLIENTS = 8


def shape(text: str) -> tuple[int, int]:
    workers, _, threads = text.partition("x")
    try:
        return int(workers), int(threads)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write workers x threads, as 2x8") from None


def totals(server: Server, directory: Path) -> dict[str, float]:
    """Every worker's totals so far, added up (each worker appends a line on SIGUSR2)."""
    workers = server.workers()
    for worker in workers:
        worker.send_signal(signal.SIGUSR2)
    time.sleep(1)
    summed: dict[str, float] = {}
    for worker in workers:
        lines = (directory / f"probe.{worker.pid}.jsonl").read_text().splitlines()
        for field, value in json.loads(lines[-1]).items():
            summed[field] = summed.get(field, 0.0) + value
    return summed


def measure(
    database_url: str,
    workdir: Path,
    wrk: str,
    consumers: list[Principal],
    workers: int,
    threads: int,
    seconds: float,
) -> str:
    """One shape: a warm-up, then ``seconds`` of receive and ACK; one line of the table."""
    probe_dir = workdir / f"probe-{workers}x{threads}"
    probe_dir.mkdir()
    server = server_start(
        database_url,
        probe_dir,
        workers=workers,
        threads=threads,
        app="bench.probe:server",
        BENCH_PROBE_DIR=str(probe_dir),
    )
    try:
        clients = [sign_in(server.base_url, p, f"waits-{n}") for n, p in enumerate(consumers)]
        script = probe_dir / "exchange.lua"
        wrk_script(script, clients)
        quiet_wait(30)
        wrk_once(wrk, script, server, CLIENTS, 2, "ack", "1")  # warm-up
        before = totals(server, probe_dir)
        figures, _, cpu = wrk_once(wrk, script, server, CLIENTS, seconds, "ack", "1")
        after = totals(server, probe_dir)
    finally:
        server.stop()
    spent = {field: after[field] - before.get(field, 0.0) for field in after}
    requests = spent["requests"] or 1

    def per_request(value: float) -> str:
        return f"{1e6 * value / requests:8,.0f}"

    redis_wait = spent["redis_wall"] - spent["redis_cpu"]
    pg_wait = spent["pg_wall"] - spent["pg_cpu"]
    rest = spent["wall"] - spent["cpu"] - redis_wait - pg_wait
    duration_us, requests_made, _, _, empty, bad, *_ = figures
    trouble = f"  ({empty:,} empty receives, {bad:,} errors)" if empty or bad else ""
    return (
        f"{workers}x{threads:<6} {requests_made / (duration_us / 1e6):8,.0f} "
        f"{per_request(spent['wall'])} {per_request(spent['cpu'])} {per_request(redis_wait)} "
        f"{per_request(pg_wait)} {per_request(rest)}   {cpu.server:4.0f}%  {cpu.split}{trouble}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--shape", type=shape, action="append", help="workers x threads (2x8 and 8x1)"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per shape (10)")
    args = parser.parse_args(argv)
    shapes: list[tuple[int, int]] = args.shape or [(2, 8), (8, 1)]
    wrk = shutil.which("wrk")
    if wrk is None:
        print(f"wrk is not installed: {APT_HINT}", file=sys.stderr)
        return 2

    log("preparing the database")
    database_url, where = database_prepare()
    lines = []
    with contextlib.ExitStack() as stack:
        stack.callback(database_drop, database_url)  # its queues and log take room: always
        manage(database_url, "migrate", "--no-input", "-v", "0")
        consumers, sender = principals_create(database_url, CLIENTS)
        # Enough for every shape at a few thousand requests per second, without running dry.
        fill = int(len(shapes) * (args.duration + 4) * 400)
        queue_fill(database_url, [c.adapter_id for c in consumers], sender.adapter_id, fill)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="waits-")))
        redis = stack.enter_context(redis_for_bench(workdir))
        for workers, threads in shapes:
            log(f"{workers} workers x {threads} threads")
            lines.append(
                measure(database_url, workdir, wrk, consumers, workers, threads, args.duration)
            )
    print(
        f"\nReceive and ACK under load: {CLIENTS} wrk connections, batch 1 ({where}; "
        f"Redis: {redis})"
    )
    print("per request, microseconds of wall time inside the application:")
    print(
        f"{'shape':<8} {'req/s':>8} {'wall':>8} {'CPU':>8} {'Redis':>8} {'Postgres':>8} "
        f"{'rest':>8}   gunicorn CPU, connections per worker"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
