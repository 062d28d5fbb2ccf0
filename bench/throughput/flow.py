"""Producers and consumers in processes of their own: the harness of (g) and (h), for both sides.

A turn forks its workers (``api``'s loops against the exchange API, ``rabbitmq``'s against
RabbitMQ). Each connects, starts at ``start``, counts what it does from ``measure_from`` and
stops at ``end``, all on the monotonic clock, which Linux keeps for the whole machine; then it
hands back its Tally. The turn's Flow adds them up, with every server's CPU over the window.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

from bench.throughput.load import UNEVEN_RETRIES, connections_per_worker, uneven
from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.servers import Server

CONNECT_SECONDS = 1.0  # to fork the workers and let them connect before the start
BODY = "x" * 100
# An empty answer to a consumer that asks (GET ?max=1, basic_get) is followed by this pause on
# both sides, so that idle consumers do not spin on the CPU that the producers need.
EMPTY_PAUSE = 0.001
HOLD_PAUSE = 0.0005  # a producer's wait between two looks at the backlog
# The backlog's bound in (h): two calls' worth of messages per worker, enough to keep every
# producer and consumer busy (each has at most one call's worth in flight).
BACKLOG_CALLS = 2


def payload(sent_at: float, number: int) -> bytes:
    """A message's payload, the same JSON bytes on both sides: when its send began (its consumer
    subtracts that from when it arrived), its number, and a body the size of a small event."""
    return f'{{"sentAt":{sent_at!r},"n":{number},"body":"{BODY}"}}'.encode()


@dataclass(frozen=True)
class Window:
    start: float
    measure_from: float
    end: float

    def counts(self, at: float) -> bool:
        return self.measure_from <= at < self.end


class Backlog:
    """The messages a turn's producers have sent and its consumers not yet acknowledged, counted
    in shared memory: the producers hold back while there are ``limit`` of them.

    Without a bound, producers that cost the servers less per message than the consumers take
    the CPU the consumers need, the queue grows for as long as the turn runs and the latency
    is the turn's length (docs/performance.md, "The exchange API beside RabbitMQ"). The bound,
    the same on both sides, holds each side at the rate its consumers sustain."""

    def __init__(self, context: BaseContext, limit: int | None) -> None:
        self.limit = limit
        self.sent: Synchronized[int] = context.Value("q", 0)
        self.acked: Synchronized[int] = context.Value("q", 0)

    def over(self) -> bool:
        return self.limit is not None and self.sent.value - self.acked.value >= self.limit

    def add(self, counter: Synchronized[int], count: int) -> None:
        if self.limit is not None:
            with counter.get_lock():
                counter.value += count


class Clock:
    """A worker's window as it runs: the time until the end, the worker's own CPU (user and
    system) from ``measure_from`` on, and the turn's backlog."""

    def __init__(self, window: Window, abort: Event, backlog: Backlog) -> None:
        self.window = window
        self.abort = abort
        self.backlog = backlog
        self.cpu_from: float | None = None
        self.held = False

    def wait_start(self) -> None:
        time.sleep(max(0.0, self.window.start - time.monotonic()))

    def now(self) -> float | None:
        """The time, or None once the window is over or the turn was called off in its warm-up."""
        now = time.monotonic()
        if now >= self.window.end:
            return None
        if self.cpu_from is None:
            if now >= self.window.measure_from:
                self.cpu_from = time.process_time()
            elif self.abort.is_set():
                return None
        return now

    def cpu(self) -> float:
        return 0.0 if self.cpu_from is None else time.process_time() - self.cpu_from

    def hold(self) -> float | None:
        """For a producer before each call: the time once the backlog is under its bound (or
        None once the window is over); whether it had to wait, in ``held``."""
        self.held = False
        while (now := self.now()) is not None and self.backlog.over():
            self.held = True
            time.sleep(HOLD_PAUSE)
        return now

    def sent(self, count: int) -> None:
        self.backlog.add(self.backlog.sent, count)

    def acked(self, count: int) -> None:
        self.backlog.add(self.backlog.acked, count)


@dataclass
class Tally:
    """What one worker did inside the measured window."""

    sent: int = 0
    received: int = 0
    acked: int = 0
    sends: int = 0  # a producer's calls
    held: int = 0  # a producer's calls that waited for the backlog to shrink first
    receives: int = 0  # a consumer's receives that brought messages
    acks: int = 0  # a consumer's acknowledgements
    empty: int = 0  # receives that brought nothing
    failed: int = 0  # messages not sent, answers other than 2xx
    cpu: float = 0.0  # seconds, user and system
    latencies_ms: list[float] = field(default_factory=list)
    error: str = ""


Worker = Callable[[Clock], Tally]


@dataclass
class Flow:
    """One figure: what its workers did in the measured windows of its turns, and the CPU of
    every party over them."""

    seconds: float
    sent: int
    received: int
    acked: int
    sends: int
    held: int
    receives: int
    acks: int
    empty: int
    failed: int
    client_cpu: float  # seconds, all workers
    latencies_ms: list[float]
    cpu: CpuShare
    splits: list[str]  # the HTTP connections per gunicorn worker, each turn's tries: "6/2>4/4"

    def per_second(self, count: int) -> float:
        return count / self.seconds


def flow_turn(
    server: Server,
    workers: list[Worker],
    warmup: float,
    duration: float,
    *,
    spread: bool,
    backlog: int | None,
    connect: float = CONNECT_SECONDS,
) -> Flow:
    """One turn of ``workers``, their backlog bounded by ``backlog`` messages (None: producers
    alone), started ``connect`` seconds after they are forked. With ``spread``, a turn whose HTTP
    connections land unevenly on gunicorn's workers is called off in its warm-up and started
    again on new connections, up to UNEVEN_RETRIES times, as wrk's runs are (``load.uneven``)."""
    context = multiprocessing.get_context("fork")
    splits: list[str] = []
    while True:
        start = time.monotonic() + connect
        window = Window(start, start + warmup, start + warmup + duration)
        abort = context.Event()
        shared = Backlog(context, backlog)
        results: SimpleQueue[Tally] = context.SimpleQueue()
        processes = [
            context.Process(target=_work, args=(worker, Clock(window, abort, shared), results))
            for worker in workers
        ]
        for process in processes:
            process.start()
        if spread:
            _sleep_until(start + min(0.5, warmup / 2))
            split = connections_per_worker(server)
            splits.append("/".join(map(str, split)))
            if uneven(split) and len(splits) <= UNEVEN_RETRIES:
                abort.set()
                _collect(results, processes)
                continue
        _sleep_until(window.measure_from)
        meter = CpuMeter(server, background=True)
        _sleep_until(window.end)
        cpu = meter.read(client_cpu=0.0)
        tallies = _collect(results, processes)
        break
    if failures := [tally.error for tally in tallies if tally.error]:
        raise SystemExit("a worker of (g) or (h) failed: " + "; ".join(failures))
    client_cpu = sum(tally.cpu for tally in tallies)
    cpu.client = 100.0 * client_cpu / duration
    return Flow(
        seconds=duration,
        sent=sum(tally.sent for tally in tallies),
        received=sum(tally.received for tally in tallies),
        acked=sum(tally.acked for tally in tallies),
        sends=sum(tally.sends for tally in tallies),
        held=sum(tally.held for tally in tallies),
        receives=sum(tally.receives for tally in tallies),
        acks=sum(tally.acks for tally in tallies),
        empty=sum(tally.empty for tally in tallies),
        failed=sum(tally.failed for tally in tallies),
        client_cpu=client_cpu,
        latencies_ms=[latency for tally in tallies for latency in tally.latencies_ms],
        cpu=cpu,
        splits=[">".join(splits)] if splits else [],
    )


def flows_combined(turns: list[Flow]) -> Flow:
    """A figure's turns as one: the counts and seconds added up, the CPU shares' mean (the turns
    are of equal length), every latency."""
    cpu = CpuShare()
    for share in fields(CpuShare):
        if share.name != "split":
            setattr(cpu, share.name, statistics.fmean(getattr(t.cpu, share.name) for t in turns))
    return Flow(
        seconds=sum(turn.seconds for turn in turns),
        sent=sum(turn.sent for turn in turns),
        received=sum(turn.received for turn in turns),
        acked=sum(turn.acked for turn in turns),
        sends=sum(turn.sends for turn in turns),
        held=sum(turn.held for turn in turns),
        receives=sum(turn.receives for turn in turns),
        acks=sum(turn.acks for turn in turns),
        empty=sum(turn.empty for turn in turns),
        failed=sum(turn.failed for turn in turns),
        client_cpu=sum(turn.client_cpu for turn in turns),
        latencies_ms=[latency for turn in turns for latency in turn.latencies_ms],
        cpu=cpu,
        splits=[split for turn in turns for split in turn.splits],
    )


def _work(worker: Worker, clock: Clock, results: SimpleQueue[Tally]) -> None:
    try:
        tally = worker(clock)
    except Exception as error:  # handed to the parent, which stops the run with it
        tally = Tally(error=f"{type(error).__name__}: {error}")
    tally.cpu = clock.cpu()
    results.put(tally)


def _collect(results: SimpleQueue[Tally], processes: Sequence[BaseProcess]) -> list[Tally]:
    # Read before joining: a child exits only once its tally has been taken from the pipe.
    tallies = [results.get() for _ in processes]
    for process in processes:
        process.join()
    return tallies


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))
