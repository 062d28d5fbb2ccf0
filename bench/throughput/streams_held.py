"""(k) with push streams: thousands of adapters each holding a stream open, messages spread over
them.

As ``waiting`` does for long polls: each of STREAMS adapters (``waiting.waiters_create``, on
devices of their own) opens GET /api/exchange/messages/stream, all from one process of this
benchmark on asyncio, each on a connection of its own (``events.Connection``); every message an
event brings is acknowledged at once, one ACK per message, over ACKERS connections shared by all
(each request with its adapter's headers). The figures: the opens refused (anything but 200),
send -> event latency at RATE messages a second spread round robin over the adapters, the server's
resident memory per open stream, and its CPU while the streams are open and nothing is sent.

Memory is measured on a server started for the phase (``server_start``: the same shape), after
WARM streams have opened and each delivered and acknowledged a message, so that what the first
stream of a process loads once (code, a database connection per thread) is not spread over the
others: per stream is (RSS with all open - RSS with WARM open) / (STREAMS - WARM). Measured on the
server that had just held (k)'s long polls, the streams would reuse memory that Python's allocator
keeps after they ended, and look cheaper than they are.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.throughput.events import ACK, SEND, STREAM, Connection, Event, sent_at
from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.report import log
from bench.throughput.servers import Client, Server
from bench.throughput.waiting import RATE, SENDERS, Waiter, server_rss_mb

STREAMS = 2000
WARM = 40
ACKERS = 16
# One heartbeat period (EXCHANGE_STREAM_HEARTBEAT_SECONDS, 15 by default): each heartbeat of a
# stream is followed by a look for messages, so a shorter window would count only some of them.
IDLE_SECONDS = 15.0
OPEN_TIMEOUT = 120.0


@dataclass
class Held:
    streams: int = 0
    opens: Counter[int] = field(default_factory=Counter)  # answers to the opens, by status
    failures: Counter[str] = field(default_factory=Counter)  # no answer, or a dropped stream
    ends: Counter[str] = field(default_factory=Counter)  # end events, by code
    refusals: list[str] = field(default_factory=list)  # the first refusals' bodies
    latencies_ms: list[float] = field(default_factory=list)
    delivered: int = 0
    acks: Counter[int] = field(default_factory=Counter)
    sends: Counter[int] = field(default_factory=Counter)
    sent: int = 0
    send_ms: list[float] = field(default_factory=list)
    open_seconds: float = 0.0
    rss_warm_mb: float = 0.0
    rss_open_mb: float = 0.0
    idle_cpu: CpuShare = field(default_factory=CpuShare)
    load_cpu: CpuShare = field(default_factory=CpuShare)

    @property
    def refused(self) -> int:
        """Opens answered with anything but 200, or not answered."""
        refusals = sum(count for status, count in self.opens.items() if status != 200)
        return refusals + sum(n for what, n in self.failures.items() if what.startswith("open"))

    @property
    def rss_per_stream_kb(self) -> float:
        return 1024 * (self.rss_open_mb - self.rss_warm_mb) / max(self.streams - WARM, 1)


def open_files_raise(needed: int) -> None:
    """Raise this process's limit of open files (and its children's) towards ``needed``, as far
    as the hard limit allows: each stream is a socket here and one in a server process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        ceiling = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, ceiling), hard))


async def held_run(server: Server, sender: Client, adapters: list[Waiter], seconds: float) -> Held:
    result = Held(streams=len(adapters))
    host, port = server.address
    acks: asyncio.Queue[tuple[dict[str, str], str]] = asyncio.Queue()
    opened = asyncio.Event()
    answered = 0  # opens answered, or failed
    measuring = False

    async def hold(adapter: Waiter, wanted: int) -> None:
        nonlocal answered
        connection = Connection(host, port)
        headers = adapter.headers()
        try:
            status, body, events = await connection.stream(STREAM, headers)
        except (OSError, asyncio.IncompleteReadError) as error:
            result.failures[f"open: {type(error).__name__}"] += 1
            status, body = 0, b""
        else:
            result.opens[status] += 1
            if status != 200 and len(result.refusals) < 5:
                result.refusals.append(f"{status} {body[:300].decode(errors='replace')}")
        answered += 1
        if answered >= wanted:
            opened.set()
        if status != 200:
            return
        ended = False
        try:
            async for read_at, batch in events:
                for event in batch:
                    if event.event == "message":
                        received(adapter, event, read_at)
                    else:
                        ended = True
                        result.ends[json.loads(event.data).get("code", "?")] += 1
            if not ended:
                result.failures["stream closed without an end event"] += 1
        except (OSError, asyncio.IncompleteReadError) as error:
            result.failures[f"stream: {type(error).__name__}"] += 1
        finally:
            connection.close()

    def received(adapter: Waiter, event: Event, read_at: float) -> None:
        if measuring:
            result.latencies_ms.append(1000 * (read_at - sent_at(event)))
        result.delivered += 1
        acks.put_nowait((adapter.headers(), str(event.id)))

    async def acknowledge() -> None:
        connection = Connection(host, port)
        try:
            while True:
                headers, message_id = await acks.get()
                try:
                    status, _ = await connection.request(
                        "POST", ACK, headers, {"messageIds": [message_id]}
                    )
                except (OSError, asyncio.IncompleteReadError) as error:
                    result.failures[f"ack: {type(error).__name__}"] += 1
                    continue
                result.acks[status] += 1
        finally:
            connection.close()

    async def send_one(connection: Connection, target: int) -> None:
        started = time.time()
        message = {"to": target, "type": "bench", "payload": {"sentAt": started}}
        status, _ = await connection.request("POST", SEND, sender.headers(), message)
        if measuring:
            result.send_ms.append(1000 * (time.time() - started))
            result.sends[status] += 1
            result.sent += 1

    async def send(first: int, deadline: float) -> None:
        connection = Connection(host, port)
        interval = SENDERS / RATE
        next_at = time.monotonic()
        number = first
        while time.monotonic() < deadline:
            await send_one(connection, adapters[number % len(adapters)].adapter_id)
            number += SENDERS
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        connection.close()

    async def answered_by(wanted: int, what: str) -> None:
        try:
            await asyncio.wait_for(opened.wait(), OPEN_TIMEOUT)
        except TimeoutError:
            log(f"(k)stream only {answered} of {wanted} {what} answered after {OPEN_TIMEOUT:g} s")

    ackers = [asyncio.create_task(acknowledge()) for _ in range(ACKERS)]
    warm, rest = adapters[:WARM], adapters[WARM:]
    tasks = [asyncio.create_task(hold(adapter, WARM)) for adapter in warm]
    await answered_by(WARM, "warm streams")
    # One message each through the warm streams, sent, delivered and acknowledged.
    connection = Connection(host, port)
    for adapter in warm:
        await send_one(connection, adapter.adapter_id)
    connection.close()
    deadline = time.monotonic() + 10
    while (result.delivered < WARM or acks.qsize()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1)
    result.rss_warm_mb = server_rss_mb(server)

    opened.clear()
    started = time.monotonic()
    tasks += [asyncio.create_task(hold(adapter, len(adapters))) for adapter in rest]
    await answered_by(len(adapters), "streams")
    result.open_seconds = time.monotonic() - started
    log(f"(k)stream {result.opens[200]:,} streams open after {result.open_seconds:.1f} s")
    await asyncio.sleep(2)  # each stream's first look
    result.rss_open_mb = server_rss_mb(server)

    meter = CpuMeter(server)
    cpu_before = time.process_time()
    await asyncio.sleep(IDLE_SECONDS)
    result.idle_cpu = meter.read(client_cpu=time.process_time() - cpu_before)

    measuring = True
    meter = CpuMeter(server)
    cpu_before = time.process_time()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(send(n, deadline) for n in range(SENDERS)))
    await asyncio.sleep(2)  # the last messages' deliveries
    result.load_cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    measuring = False
    for task in tasks + ackers:
        task.cancel()
    await asyncio.gather(*tasks, *ackers, return_exceptions=True)
    return result
