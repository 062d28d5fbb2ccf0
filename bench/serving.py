"""``python -m bench.serving``: the serving stacks the platform could run on, measured in turns.

The same Django project, the same gunicorn settings (2 processes; deploy/gunicorn.conf.py), three
ways of serving it:

- ``gthread``: gunicorn's threaded WSGI workers (8 threads), what the platform ran before;
- ``django-asgi``: uvicorn workers with Django's own ASGI handler (``get_asgi_application``):
  its synchronous middleware and views run through asgiref's thread hops;
- ``platform``: uvicorn workers with the platform's server (platform_site/server.py): requests
  read on the event loop, Django's WSGI handler in 8 threads, one hop per request.

Each turn starts one stack, runs wrk (8 connections) against ``GET /bench/bare`` (Django and its
middleware only) and ``GET /api/exchange/whoami`` (JWT, session check, DRF) after a warm-up, and
stops it; the turns go round ``--rounds`` times, in alternating order. It prints each stack's
median requests a second and the ratio to ``gthread``. docs/deployment.md ("The server") has a run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, ClassVar

from bench.throughput.load import Plan, plan_of, wrk_run, wrk_script
from bench.throughput.report import log
from bench.throughput.servers import (
    database_drop,
    database_prepare,
    manage,
    principals_create,
    redis_for_bench,
    server_start,
    sign_in,
)
from platform_site.worker import Worker


class DjangoAsgiWorker(Worker):
    """The platform's worker, without the lifespan protocol, which Django's handler refuses."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {**Worker.CONFIG_KWARGS, "lifespan": "off"}


STACKS = {
    "gthread": ("django.core.wsgi:get_wsgi_application()", "gthread"),
    "django-asgi": ("django.core.asgi:get_asgi_application()", "bench.serving.DjangoAsgiWorker"),
    "platform": ("platform_site.asgi:application", "platform_site.worker.Worker"),
}
DATABASE = "exchange_bench_serving"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per figure")
    args = parser.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    plan: Plan = plan_of(
        argparse.Namespace(quick=True, clients=8, duration=args.duration, only="e")
    )
    database_url, _ = database_prepare(DATABASE)
    manage(database_url, "migrate", "--no-input", "-v", "0")
    principals, _ = principals_create(database_url, plan.clients)
    workdir = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    figures: dict[str, dict[str, list[float]]] = {
        name: {"bare": [], "whoami": []} for name in STACKS
    }
    with ExitStack() as cleanup:
        cleanup.callback(database_drop, database_url, DATABASE)
        cleanup.enter_context(redis_for_bench(workdir))
        script = workdir / "exchange.lua"
        for round_number in range(args.rounds):
            order = list(STACKS) if round_number % 2 == 0 else list(reversed(STACKS))
            for name in order:
                app, worker_class = STACKS[name]
                turn = workdir / f"{name}-{round_number}"
                turn.mkdir()
                server = server_start(database_url, turn, app=app, worker_class=worker_class)
                try:
                    if not script.exists():
                        consumers = [
                            sign_in(server.base_url, principal, f"bench-{n}")
                            for n, principal in enumerate(principals)
                        ]
                        wrk_script(script, consumers)
                    for mode in ("bare", "whoami"):
                        result = wrk_run(wrk, script, server, plan, mode)
                        figures[name][mode].append(result.rate)
                        log(f"round {round_number + 1} {name} {mode}: {result.rate:,.0f} req/s")
                finally:
                    server.stop()
    print(table(figures, args.rounds, args.duration))
    return 0


def table(figures: dict[str, dict[str, list[float]]], rounds: int, duration: float) -> str:
    baseline = {mode: statistics.median(figures["gthread"][mode]) for mode in ("bare", "whoami")}
    lines = [f"\n{'stack':<12} {'bare req/s':>12} {'x':>6} {'whoami req/s':>14} {'x':>6}"]
    for name, measured in figures.items():
        bare = statistics.median(measured["bare"])
        whoami = statistics.median(measured["whoami"])
        lines.append(
            f"{name:<12} {bare:>12,.0f} {bare / baseline['bare']:>6.2f} "
            f"{whoami:>14,.0f} {whoami / baseline['whoami']:>6.2f}"
        )
    lines.append(f"(x: against gthread; medians of {rounds} turns of {duration:g} s each, 8 wrk")
    lines.append(" connections)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
