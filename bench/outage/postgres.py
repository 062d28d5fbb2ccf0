"""The outage bench's PostgreSQL: crashed (SIGKILL of the postmaster) or stopped, and the
moment it accepts connections again."""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.outage import ACCEPT_POLL
from platform_site import embedded

# --- The database: crash and restart ------------------------------------------------------------


def postmaster(pgdata: Path) -> psutil.Process:
    return psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))


@dataclass(frozen=True)
class Stopped:
    pid: int  # the postmaster's
    at: float  # time.monotonic() of the SIGKILL (or of the fast stop's start)
    processes: int  # the postmaster and its children
    children_gone: float  # seconds until every child had exited
    gone: float  # seconds until the postmaster was reaped (by its parent, init)
    killed: int  # children still there after 15 s, then SIGKILLed too


def exited(process: psutil.Process) -> bool:
    """Gone, or a zombie: its parent (init, for a postmaster's orphans) reaps it in its own time."""
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def stopped_after(master: psutil.Process, children: list[psutil.Process], at: float) -> Stopped:
    """Wait for the server's processes to exit (SIGKILL those left after 15 s), then for the
    postmaster to be reaped: embedded.server_start would take an unreaped one for a running one."""
    while not all(map(exited, children)) and time.monotonic() - at < 15:
        time.sleep(ACCEPT_POLL)
    left = [process for process in children if not exited(process)]
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(left, timeout=5)
    children_gone = time.monotonic() - at
    master.wait(timeout=30)
    gone = time.monotonic() - at
    return Stopped(master.pid, at, 1 + len(children), children_gone, gone, len(left))


def crash(pgdata: Path) -> Stopped:
    """SIGKILL the postmaster, as a crash would; return once every process of the server is gone
    (a new postmaster refuses to start while an old backend still holds the shared memory)."""
    master = postmaster(pgdata)
    children = master.children()
    at = time.monotonic()
    master.send_signal(signal.SIGKILL)
    return stopped_after(master, children, at)


def fast_stop(pgdata: Path) -> Stopped:
    master = postmaster(pgdata)
    children = master.children()
    at = time.monotonic()
    embedded.server_stop(pgdata=pgdata)
    return stopped_after(master, children, at)


def ready_at(pgdata: Path, stale_pid: int, since: float) -> float:
    """The moment (time.monotonic()) a new postmaster in ``pgdata`` accepts connections: it writes
    "ready" into postmaster.pid's status line then. The file is read every ACCEPT_POLL seconds;
    connecting that often instead would fork a backend each time and slow the recovery down."""
    pid_file = pgdata / "postmaster.pid"
    while time.monotonic() - since < 120:
        with contextlib.suppress(OSError):
            lines = pid_file.read_text().splitlines()
            if len(lines) >= 8 and lines[0] != str(stale_pid) and lines[7].strip() == "ready":
                return time.monotonic()
        time.sleep(ACCEPT_POLL)
    raise SystemExit(f"PostgreSQL in {pgdata} did not get ready in 120 s")
