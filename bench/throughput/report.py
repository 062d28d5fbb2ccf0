"""What the benchmark prints: progress on stderr while it runs, then one table and its notes."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


@dataclass(frozen=True)
class Row:
    key: str
    what: str
    figure: str
    unit: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(rows: list[Row]) -> str:
    header = Row("row", "what", "figure", "unit", "ratio vs baseline", "target", "result")
    cells = [
        [r.key, r.what, r.figure, r.unit, r.ratio, r.target, r.verdict] for r in [header, *rows]
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(7)]
    right = {2}
    out: list[str] = []
    for index, line in enumerate(cells):
        out.append(
            "  ".join(
                value.rjust(widths[i]) if i in right else value.ljust(widths[i])
                for i, value in enumerate(line)
            ).rstrip()
        )
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


@dataclass(frozen=True)
class Setting:
    """What the report's header says about the run: the same code measures differently on
    different machines and databases, so a figure means little without it."""

    node: str
    cpu: str
    cores: int | None
    python: str
    load_before: float
    load_after: float
    database: dict[str, str]  # database_facts(): version and the settings that weigh on commits
    where: str
    database_name: str
    workers: int
    threads: int
    pool_max: str
    redis: str
    clients: int
    duration: float
    quick: bool
    rabbitmq: str = ""  # the broker of (g) to (j), and its queue
    producers: int = 0  # of (g) and (h), and as many consumers in (h)
    webhooks: bool = False  # (l) ran
    topics: str = ""  # (m)'s RabbitMQ, when (m) ran


def report(setting: Setting, rows: list[Row], notes: list[str], profiles: list[str]) -> str:
    """The run's header, the table, the CPU notes and the profiles (``--profile``)."""
    facts = setting.database
    lines = [
        "",
        "Exchange benchmark",
        f"machine: {setting.node}, {setting.cpu}, nproc {setting.cores}, "
        f"Python {setting.python}, "
        f"load average {setting.load_before:.2f} before / {setting.load_after:.2f} after",
        f"database: PostgreSQL {facts['version']} ({setting.where}), database "
        f"{setting.database_name}, "
        f"synchronous_commit={facts['synchronous_commit']}, fsync={facts['fsync']}, "
        f"shared_buffers={facts['shared_buffers']}, max_wal_size={facts['max_wal_size']}",
        f"server: deploy/serve, {setting.workers} processes (event loops) x {setting.threads} "
        "threads for Django, "
        f"Django pool max {setting.pool_max} per worker; Redis: " + setting.redis,
        f"load: {setting.clients} clients; {setting.duration:g} s measured per throughput figure, "
        "the figures of each ratio in turns (a warm-up of 1 s before each turn)"
        + (" (--quick)" if setting.quick else ""),
    ]
    if setting.rabbitmq and not setting.producers:
        lines.append(f"(i) and (j): RabbitMQ {setting.rabbitmq}")
    elif setting.rabbitmq:
        lines.append(
            f"(g) and (h): {setting.producers} producers (and in (h) {setting.producers} "
            "consumers) per side, Python processes: http.client against the API, py-amqp "
            f"against {setting.rabbitmq}; the four figures of each in rotation"
        )
    if setting.webhooks:
        lines.append(
            "(l): the webhook deliverer in the server's processes (EXCHANGE_WEBHOOK_ALLOW_PRIVATE="
            "true), posting to bench.throughput.webhook_receiver on loopback (asyncio, keep-alive)"
        )
    if setting.topics:
        lines.append(
            "(m): 1 publisher and 10, then 100, subscribers per side (each side's subscribers in "
            "2 processes), 1,024-byte payloads; the API's topic (http.client, asyncio) against a "
            f"fanout exchange of {setting.topics} (py-amqp)"
        )
    lines += [
        "",
        table(rows),
        "",
        "CPU during each measurement (% of one core):",
        *("  " + line for line in notes),
    ]
    if profiles:
        lines += ["", *profiles]
    return "\n".join(lines)


def passed(rows: list[Row]) -> bool:
    return all(row.verdict != "FAIL" for row in rows)
