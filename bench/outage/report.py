"""The outage bench's report: each run, then one line per figure over the runs."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable

from bench.outage import FLIPS, SLOW_MS
from bench.outage.runs import Figures, Outage

# --- The report ----------------------------------------------------------------------------------


def shown_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.1f} ms"


def shown_s(value: float) -> str:
    """Seconds after a moment, signed: a success may come a few ms before this process's own
    connection attempt (every ACCEPT_POLL) saw PostgreSQL accept."""
    return "never" if math.isnan(value) or math.isinf(value) else f"{value:+.3f} s"


def shown_count(value: float) -> str:
    return f"{value:,.0f}"


def run_report(outage: Outage, f: Figures, stop: str) -> list[str]:
    stopped = outage.stopped
    how = "SIGKILL of the postmaster" if stop == "kill" else "fast shutdown (pg_ctl -m fast)"
    extra = f", {stopped.killed} SIGKILLed after 15 s" if stopped.killed else ""
    first = "none"
    if f.first is not None:
        first = f"{f.first.kind} {f.first.answer()} in {shown_ms(f.first.ms)}"
    in_flight = "none"
    if f.in_flight:
        waits = [1000 * (call.ended - stopped.at) for call in f.in_flight]
        answers = Counter(call.answer() for call in f.in_flight)
        in_flight = (
            f"{len(f.in_flight)}, answered {shown_ms(min(waits))} to {shown_ms(max(waits))} "
            "after it: " + ", ".join(f"{answer} x {n}" for answer, n in answers.items())
        )
    answers_during = ", ".join(f"{answer} x {n}" for answer, n in f.answers.most_common())
    flips = ", ".join(f"{name} {outage.flips[name]}" for name in FLIPS)
    failed = f"{f.failed_after} exchange requests"
    if f.failed_after:
        failures = ", ".join(f"{answer} x {n}" for answer, n in f.failed_answers.most_common())
        failed += f" ({failures}; the last answered {shown_s(f.last_failure_s)})"
    return [
        f"run {outage.number}: {how} ({stopped.processes} processes: the children gone "
        f"{stopped.children_gone:.3f} s after{extra}, the postmaster reaped after "
        f"{stopped.gone:.2f} s); started again after "
        f"{outage.restart_at - stopped.at:.2f} s, accepting connections {f.recovery_s:.2f} s "
        f"later (server_start returned {shown_s(f.returned_s)} after that)",
        f"  during the outage: {f.requests} exchange requests started once the server's last "
        "process was gone and before PostgreSQL accepted connections again",
        f"    the first of them        {first}",
        f"    the others               median {shown_ms(f.others_median_ms)}, "
        f"max {shown_ms(f.others_max_ms)}; {f.slow} of all took {SLOW_MS} ms or more",
        f"    answers                  {answers_during}; answered before PostgreSQL was back and "
        f"not 503 SERVICE_UNAVAILABLE with Retry-After: 1: {f.not_503}",
        f"    in flight before         {in_flight}",
        f"    health DOWN              {shown_s(f.health_down_s)} after the server was gone",
        "  once PostgreSQL accepted connections again:",
        f"    first send 201           {shown_s(f.first_send_s)}",
        f"    first ACK 200            {shown_s(f.first_ack_s)} (a receive, then its ACK)",
        f"    health UP                {shown_s(f.health_up_s)}",
        f"    failed after it          {failed}",
        f"  the workers' log: availability {flips} (platform_site.db.availability)",
    ]


SUMMARY: list[tuple[str, Callable[[Figures], float], Callable[[float], str]]] = [
    (
        "outage: first request once it was gone",
        lambda f: f.first.ms if f.first is not None else math.nan,
        shown_ms,
    ),
    ("outage: the other requests, median", lambda f: f.others_median_ms, shown_ms),
    ("outage: the other requests, max", lambda f: f.others_max_ms, shown_ms),
    ("outage: requests", lambda f: f.requests, shown_count),
    (f"outage: requests of {SLOW_MS} ms or more", lambda f: f.slow, shown_count),
    ("outage: answers other than 503 + Retry-After", lambda f: f.not_503, shown_count),
    ("restart: start -> accepting connections", lambda f: f.recovery_s, lambda v: f"{v:.2f} s"),
    ("back: first send 201", lambda f: f.first_send_s, shown_s),
    ("back: first receive + ACK 200", lambda f: f.first_ack_s, shown_s),
    ("back: health UP", lambda f: f.health_up_s, shown_s),
    ("back: exchange requests that failed", lambda f: f.failed_after, shown_count),
    ("back: server_start returned", lambda f: f.returned_s, shown_s),
]


def summary(all_figures: list[Figures]) -> list[str]:
    """One line per figure: each run, then the median and the maximum over the runs."""
    head = ["figure", *(f"run {n + 1}" for n in range(len(all_figures))), "median", "max"]
    rows = [head]
    for name, value, shown in SUMMARY:
        values = [value(f) for f in all_figures]
        finite = [v for v in values if not math.isnan(v)]
        middle = statistics.median(finite) if finite else math.nan
        rows.append(
            [name, *map(shown, values), shown(middle), shown(max(finite, default=math.nan))]
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(head))]
    lines = [
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines
