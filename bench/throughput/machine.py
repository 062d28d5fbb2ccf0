"""The machine's side of every figure: CPU used by each party, and waiting for a quiet machine.

The benchmark shares a 2-core machine with its own load generator, PostgreSQL, Redis and whatever
else runs, so each figure is printed with the CPU each of them used while it was measured.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import dataclass

import psutil

from bench.throughput.report import log
from bench.throughput.servers import Server

# The processes of a PostgreSQL server that serve no one client: they write what the backends
# commit (the WAL writer, the checkpointer), so a figure that writes pays for them too.
POSTGRES_BACKGROUND = (
    "walwriter",
    "checkpointer",
    "background writer",
    "autovacuum",
    "io worker",
    "walsummarizer",
)


def cpu_model() -> str:
    """The processor's name: the same code gave (e) 0.57-0.67 on one session's machine and
    0.69-0.75 on another's, so a figure means little without it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "processor unknown"


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine, in clock ticks."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])
    return total - idle, total


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def postgres_backends(database: str) -> list[psutil.Process]:
    """This machine's server processes serving ``database`` (none if it is elsewhere)."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith("postgres:") and f" {database} " in cmdline[0]:
            found.append(process)
    return found


def postgres_background(backends: list[psutil.Process]) -> list[psutil.Process]:
    """The background processes of the PostgreSQL server that runs ``backends``."""
    try:
        postmaster = backends[0].parent() if backends else None
        children = postmaster.children() if postmaster else []
    except psutil.Error:
        return []
    found = []
    for child in children:
        try:
            title = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if any(name in title for name in POSTGRES_BACKGROUND):
            found.append(child)
    return found


def rabbitmq_servers() -> list[psutil.Process]:
    """RabbitMQ's Erlang VM: one process, whose threads do all of the broker's work."""
    return [p for p in psutil.process_iter(["name"]) if p.info.get("name") == "beam.smp"]


def redis_servers() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name"]) if p.info.get("name") == "redis-server"]


@dataclass
class CpuShare:
    """CPU used during one measurement, in % of one core (200 % is all of a 2-core machine)."""

    client: float = 0.0
    server: float = 0.0
    postgres: float = 0.0
    machine: float = 0.0
    redis: float = 0.0
    split: str = ""  # wrk's connections per gunicorn worker, "4/4" (one per run in turns)
    # With CpuMeter(background=True) only: PostgreSQL's background processes, and RabbitMQ.
    postgres_background: float = 0.0
    rabbitmq: float = 0.0

    def line(self) -> str:
        other = max(
            0.0,
            self.machine
            - self.client
            - self.server
            - self.postgres
            - self.redis
            - self.postgres_background
            - self.rabbitmq,
        )
        return (
            f"client {self.client:5.0f}%  server {self.server:5.0f}%  "
            f"postgres {self.postgres:5.0f}%  redis {self.redis:4.0f}%  other {other:4.0f}%  "
            f"machine {self.machine:5.0f}% of {100 * (os.cpu_count() or 1)}%"
        ) + (f"  [connections per worker {self.split}]" if self.split else "")


class CpuMeter:
    """Snapshot at the start of a measurement window and read the shares at its end.

    With ``background``, PostgreSQL's background processes and RabbitMQ are counted too: (g)
    and (h) set the platform's servers beside RabbitMQ's, whose one process does its writing."""

    def __init__(self, server: Server, *, background: bool = False) -> None:
        self.server = server
        self.started = time.monotonic()
        self.jiffies = machine_jiffies()
        self.server_procs = {
            p.pid: p for p in [psutil.Process(server.process.pid), *server.workers()]
        }
        self.server_cpu = {pid: cpu_seconds(p) for pid, p in self.server_procs.items()}
        backends = postgres_backends(server.database)
        self.pg_cpu = {p.pid: self._safe(p) for p in backends}
        self.redis_procs = redis_servers()
        self.redis_cpu = {p.pid: self._safe(p) for p in self.redis_procs}
        self.background = postgres_background(backends) if background else []
        self.background_cpu = {p.pid: self._safe(p) for p in self.background}
        self.rabbitmq_procs = rabbitmq_servers() if background else []
        self.rabbitmq_cpu = {p.pid: self._safe(p) for p in self.rabbitmq_procs}

    @staticmethod
    def _safe(process: psutil.Process) -> float:
        try:
            return cpu_seconds(process)
        except psutil.Error:
            return 0.0

    @classmethod
    def _used(cls, processes: list[psutil.Process], before: dict[int, float]) -> float:
        """CPU seconds since the snapshot; nothing for a process that has ended since (an
        autovacuum worker), whose time is lost with it."""
        used = 0.0
        for process in processes:
            if (now := cls._safe(process)) > 0.0:
                used += now - before.get(process.pid, 0.0)
        return used

    def read(self, client_cpu: float) -> CpuShare:
        elapsed = max(1e-6, time.monotonic() - self.started)
        busy, total = machine_jiffies()
        cores = os.cpu_count() or 1
        machine = 100.0 * cores * (busy - self.jiffies[0]) / max(1, total - self.jiffies[1])
        server = sum(
            self._safe(p) - self.server_cpu.get(pid, 0.0) for pid, p in self.server_procs.items()
        )
        backends = {p.pid: p for p in postgres_backends(self.server.database)}
        postgres = sum(self._safe(p) - self.pg_cpu.get(pid, 0.0) for pid, p in backends.items())
        redis = sum(self._safe(p) - self.redis_cpu.get(p.pid, 0.0) for p in self.redis_procs)
        background = self._used(self.background, self.background_cpu)
        rabbitmq = self._used(self.rabbitmq_procs, self.rabbitmq_cpu)
        return CpuShare(
            client=100.0 * client_cpu / elapsed,
            server=100.0 * server / elapsed,
            postgres=100.0 * postgres / elapsed,
            machine=machine,
            redis=100.0 * redis / elapsed,
            postgres_background=100.0 * background / elapsed,
            rabbitmq=100.0 * rabbitmq / elapsed,
        )


def machine_busy(seconds: float = 1.0) -> float:
    """CPU the whole machine used over ``seconds``, in % of one core."""
    busy, total = machine_jiffies()
    time.sleep(seconds)
    busy2, total2 = machine_jiffies()
    return 100.0 * (os.cpu_count() or 1) * (busy2 - busy) / max(1, total2 - total)


def quiet_wait(limit: float, threshold: float = 30.0) -> float:
    """Wait up to ``limit`` seconds for other programs to leave the CPU (the benchmark shares the
    machine with whatever else runs); the machine's CPU use of the last second, in % of a core."""
    deadline = time.monotonic() + limit
    busy = machine_busy()
    while busy > threshold and time.monotonic() < deadline:
        busy = machine_busy()
    if busy > threshold:
        log(f"the machine is busy ({busy:.0f}% of a core) without this benchmark: measuring anyway")
    return busy


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
