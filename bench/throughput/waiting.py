"""(k): thousands of adapters waiting in long polls at once, with messages spread over them.

Each of WAITERS adapters (made with a session each, straight in the database: signing in 2,000
times would mostly hash passwords) keeps one long poll open (``waitSeconds=20``), and after a
message ACKs it and receives again in the same request, as a one-at-a-time consumer does. One
process of this benchmark holds every connection, on asyncio, each request written out as HTTP/1.1
on a keep-alive connection of its own (httpx's pool, with 2,000 connections in it, cost more CPU
per request than the server: it spent 85 % of a core to send 170 messages in 10 s). The figures:
the receives refused, send -> receive latency at ``RATE`` messages a second spread round robin
over the adapters, the server's resident memory per waiting consumer, and its CPU while they only
wait.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field

import psutil

from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.report import log
from bench.throughput.servers import Client, Server, manage

WAITERS = 2000
RATE = 200.0
SENDERS = 8
IDLE_SECONDS = 10.0

WAITERS_CODE = """
import json
from accounts.devices import Device
from accounts.models import User
from accounts.services.sessions import session_start
owner = User.objects.get(username="bench-owner")
made = []
for n in range({count}):
    adapter, _ = User.objects.get_or_create(
        username=f"bench-waiter-{{n}}",
        defaults={{"kind": User.Kind.ADAPTER, "owner": owner, "password": "!"}},
    )
    device = Device(
        key=f"d:{device}-{{n}}", device_id=f"{device}-{{n}}", user_agent="bench", ip="127.0.0.1"
    )
    _, pair = session_start(user=adapter, device=device)
    made.append([adapter.pk, pair.access_token, device.device_id])
print("BENCH " + json.dumps(made))
"""


@dataclass(frozen=True)
class Waiter:
    adapter_id: int
    access: str
    device: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access}", "X-Device-ID": self.device}


@dataclass
class Waiting:
    waiters: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    receives: Counter[int] = field(default_factory=Counter)  # answers to receives, by status
    failures: Counter[str] = field(default_factory=Counter)  # no answer at all, by error
    sends: Counter[int] = field(default_factory=Counter)
    sent: int = 0
    send_ms: list[float] = field(default_factory=list)  # the send requests' own latency
    rss_idle_mb: float = 0.0
    rss_waiting_mb: float = 0.0
    idle_cpu: CpuShare = field(default_factory=CpuShare)
    load_cpu: CpuShare = field(default_factory=CpuShare)

    @property
    def refused(self) -> int:
        return sum(count for status, count in self.receives.items() if status != 200) + sum(
            self.failures.values()
        )

    @property
    def rss_per_waiter_kb(self) -> float:
        return 1024 * (self.rss_waiting_mb - self.rss_idle_mb) / max(self.waiters, 1)


def waiters_create(database_url: str, count: int, device: str = "waiter") -> list[Waiter]:
    """``count`` adapters (made once, then found again), each with a new session on the device
    ``<device>-<n>``."""
    code = WAITERS_CODE.format(count=count, device=device)
    out = manage(database_url, "shell", "-c", code)
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    return [Waiter(int(a), str(b), str(c)) for a, b, c in json.loads(line[6:])]


def server_rss_mb(server: Server) -> float:
    processes = [psutil.Process(server.process.pid), *server.workers()]
    return sum(process.memory_info().rss for process in processes) / 2**20


class Connection:
    """One keep-alive HTTP/1.1 connection: a request at a time, answers with a Content-Length."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.fixed = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        content = b"" if body is None else json.dumps(body).encode()
        kind = "Content-Type: application/json\r\n" if body is not None else ""
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.fixed}{kind}"
            f"Content-Length: {len(content)}\r\n\r\n".encode()
            + content
        )
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)[1])  # type: ignore[index]
            return int(head.split(b" ", 2)[1]), await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError):
            writer.close()
            self.streams = None
            raise

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def waiting_now(server: Server) -> float:
    connection = Connection(*server.address, {})
    _, body = await connection.request("GET", "/actuator/prometheus")
    connection.close()
    match = re.search(rb"^platform_http_requests_waiting (\S+)$", body, re.M)
    return float(match.group(1)) if match else -1.0


async def waiting_run(
    server: Server, sender: Client, waiters: list[Waiter], seconds: float
) -> Waiting:
    result = Waiting(waiters=len(waiters), rss_idle_mb=server_rss_mb(server))
    poll = "/api/exchange/messages?waitSeconds=20"

    async def consume(waiter: Waiter) -> None:
        connection = Connection(*server.address, waiter.headers())
        method, path, body = "GET", poll, None
        try:
            while True:
                try:
                    status, content = await connection.request(method, path, body)
                except (OSError, asyncio.IncompleteReadError) as error:
                    result.failures[type(error).__name__] += 1
                    await asyncio.sleep(1)
                    continue
                arrived = time.time()
                result.receives[status] += 1
                messages = json.loads(content)["messages"] if status == 200 else []
                for message in messages:
                    result.latencies_ms.append(1000 * (arrived - message["payload"]["sentAt"]))
                if messages:
                    ids = [message["messageId"] for message in messages]
                    method, path = "POST", "/api/exchange/messages/ack"
                    body = {"messageIds": ids, "receive": {"waitSeconds": 20}}
                else:
                    if status != 200:
                        await asyncio.sleep(1)
                    method, path, body = "GET", poll, None
        finally:
            connection.close()

    async def send(first: int, deadline: float) -> None:
        connection = Connection(*server.address, sender.headers())
        interval = SENDERS / RATE
        next_at = time.monotonic()
        number = first
        while time.monotonic() < deadline:
            target = waiters[number % len(waiters)].adapter_id
            sent_at = time.time()
            message = {"to": target, "type": "bench", "payload": {"sentAt": sent_at}}
            status, _ = await connection.request("POST", "/api/exchange/messages", message)
            result.send_ms.append(1000 * (time.time() - sent_at))
            result.sends[status] += 1
            result.sent += 1
            number += SENDERS
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        connection.close()

    tasks = [asyncio.create_task(consume(waiter)) for waiter in waiters]
    started = time.monotonic()
    while (now := await waiting_now(server)) < len(waiters):
        if time.monotonic() - started > 120:
            log(f"(k) only {now:.0f} of {len(waiters)} waiting after 120 s")
            break
        await asyncio.sleep(0.5)
    log(f"(k) {len(waiters)} long polls waiting after {time.monotonic() - started:.1f} s")
    result.rss_waiting_mb = server_rss_mb(server)

    meter = CpuMeter(server)
    cpu_before = time.process_time()
    await asyncio.sleep(IDLE_SECONDS)
    result.idle_cpu = meter.read(client_cpu=time.process_time() - cpu_before)

    meter = CpuMeter(server)
    cpu_before = time.process_time()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(send(n, deadline) for n in range(SENDERS)))
    await asyncio.sleep(2)  # the last messages' deliveries
    result.load_cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result
