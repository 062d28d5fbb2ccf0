"""The latency figures, from a small Python client (httpx): (d) long polling from send to
receive, and (f) a receive's latency with 1,000 and with 1,000,000 messages waiting."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import httpx

from bench.throughput.load import Plan
from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.report import log
from bench.throughput.servers import Client, Server

# --- (d) long polling ----------------------------------------------------------------------------


@dataclass
class LongPoll:
    latencies_ms: list[float] = field(default_factory=list)
    send_ms: list[float] = field(default_factory=list)
    errors: dict[int, int] = field(default_factory=dict)
    cpu: CpuShare = field(default_factory=CpuShare)


async def longpoll_run(
    server: Server, consumers: list[Client], sender: Client, plan: Plan
) -> LongPoll:
    result = LongPoll()
    warmup = max(len(consumers) * 2, 16)
    total = warmup + plan.longpoll_messages
    received: set[int] = set()
    finished = asyncio.Event()
    timeout = httpx.Timeout(40.0)

    async def consume(client: Client) -> None:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers=client.headers(), timeout=timeout
        ) as http:
            while True:
                response = await http.get(
                    "/api/exchange/messages", params={"waitSeconds": 20, "max": 10}
                )
                arrived = time.monotonic()
                if response.status_code != 200:
                    result.errors[response.status_code] = (
                        result.errors.get(response.status_code, 0) + 1
                    )
                    await asyncio.sleep(0.05)
                    continue
                messages = response.json()["messages"]
                for message in messages:
                    number = int(message["payload"]["n"])
                    if number >= warmup and number not in received:
                        result.latencies_ms.append(1000 * (arrived - message["payload"]["sentAt"]))
                    received.add(number)
                if messages:
                    await http.post(
                        "/api/exchange/messages/ack",
                        json={"messageIds": [message["messageId"] for message in messages]},
                    )
                if len(received) >= total:
                    finished.set()

    async def send() -> None:
        async with httpx.AsyncClient(
            base_url=server.base_url, headers=sender.headers(), timeout=timeout
        ) as http:
            interval = 1.0 / plan.longpoll_rate
            next_at = time.monotonic()
            for number in range(total):
                next_at += interval
                target = consumers[number % len(consumers)].principal.adapter_id
                sent_at = time.monotonic()
                response = await http.post(
                    "/api/exchange/messages",
                    json={
                        "to": target,
                        "type": "bench",
                        "payload": {"sentAt": sent_at, "n": number},
                    },
                )
                if number >= warmup:
                    result.send_ms.append(1000 * (time.monotonic() - sent_at))
                if response.status_code != 201:
                    result.errors[response.status_code] = (
                        result.errors.get(response.status_code, 0) + 1
                    )
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    tasks = [asyncio.create_task(consume(client)) for client in consumers]
    await asyncio.sleep(1.0)  # every consumer is waiting before the first send
    meter = CpuMeter(server)
    cpu_before = time.process_time()
    await send()
    try:
        await asyncio.wait_for(finished.wait(), timeout=30)
    except TimeoutError:
        log(f"long poll: {total - len(received)} messages not received within 30 s")
    result.cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


# --- (f) receive latency against queue depth -----------------------------------------------------


@dataclass(frozen=True)
class Latency:
    depth: int
    median_ms: float
    p99_ms: float
    empty: int
    cpu: CpuShare


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def receive_latencies(
    server: Server, queues: list[tuple[Client, int]], receives: int
) -> list[Latency]:
    """Receive+ACK one message at a time from each queue in turn, timing each receive.

    The queues take turns call by call, so a machine that speeds up or slows down during the
    measurement does so for every depth alike (measured one after the other, the two medians
    drifted apart by up to 30 % on a shared machine).
    """
    times: list[list[float]] = [[] for _ in queues]
    empty = [0 for _ in queues]
    clients = [
        httpx.Client(base_url=server.base_url, headers=consumer.headers(), timeout=30)
        for consumer, _ in queues
    ]
    try:
        meter: CpuMeter | None = None
        cpu_before = 0.0
        for number in range(20 + receives):
            if number == 20:
                meter, cpu_before = CpuMeter(server), time.process_time()
            for index, http in enumerate(clients):
                started = time.perf_counter()
                response = http.get("/api/exchange/messages", params={"max": 1})
                elapsed = time.perf_counter() - started
                messages = response.json()["messages"] if response.status_code == 200 else []
                if not messages:
                    empty[index] += 1
                    continue
                if number >= 20:
                    times[index].append(1000 * elapsed)
                http.post(
                    "/api/exchange/messages/ack", json={"messageIds": [messages[0]["messageId"]]}
                )
        assert meter is not None
        cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    finally:
        for http in clients:
            http.close()
    return [
        Latency(
            depth=depth,
            median_ms=statistics.median(samples) if samples else float("nan"),
            p99_ms=percentile(samples, 0.99),
            empty=missed,
            cpu=cpu,
        )
        for (_, depth), samples, missed in zip(queues, times, empty, strict=True)
    ]
