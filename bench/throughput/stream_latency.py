"""(j): a push stream's latency at a low rate, beside RabbitMQ's, and how soon a logout ends a
stream.

- The API: one stream per consumer adapter (``maxOutstanding`` 100), read with httpx as (d)'s long
  polls are, each message acknowledged as it comes (an ACK of its own, sent beside the stream);
  a sender in the same process, as (d)'s, sends one message per POST at the plan's rate, round
  robin over the adapters, each payload stamped with the monotonic time its send began. The
  latency is from there to the moment the event was read: the whole send request, the commit,
  the notification, the stream's claim and the event.
- RabbitMQ: as many consumers on the bench's queue (``basic_consume``, ``basic_qos`` prefetch 100,
  a ``basic_ack`` per message), each on a connection and thread of its own in this process; a
  publisher at the same rate, persistent messages, waiting for each one's confirm, stamped the
  same way: from just before ``basic_publish`` to the moment the consumer had the message.
- The logout: an adapter signs in on a device of its own, opens a stream, and some time later
  POSTs /api/auth/logout with its refresh token; from the logout's answer (200) to the stream's
  ``end`` event (TOKEN_REVOKED): what the platform promises for a session that ends while a
  stream is idle (exchange/streams.py: a sweep every CHECK_SECONDS).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import amqp
import httpx
from amqp import spec

from bench.throughput.api import send_body
from bench.throughput.events import ACK, SEND, STREAM, EventParser
from bench.throughput.flow import payload
from bench.throughput.load import Plan
from bench.throughput.machine import CpuMeter, CpuShare
from bench.throughput.rabbitmq import CONFIRM_TIMEOUT, PREFETCH, Broker, queue_reset
from bench.throughput.report import log
from bench.throughput.servers import Client, Principal, Server

EVENT_STREAM = {"Accept": "text/event-stream"}
LOGOUT_TIMEOUT = 10.0  # the longest wait for a stream's end after a logout


@dataclass
class Pushed:
    """What one side's latency run gave."""

    latencies_ms: list[float] = field(default_factory=list)
    send_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    missing: int = 0  # messages sent and never delivered
    cpu: CpuShare = field(default_factory=CpuShare)


def warmup_of(consumers: int) -> int:
    """Messages sent first and not measured: (d)'s rule."""
    return max(consumers * 2, 16)


async def stream_latency_run(
    server: Server, consumers: list[Client], sender: Client, plan: Plan
) -> Pushed:
    result = Pushed()
    warmup = warmup_of(len(consumers))
    total = warmup + plan.longpoll_messages
    received: set[int] = set()
    finished = asyncio.Event()
    open_streams = 0
    acking: set[asyncio.Task[None]] = set()

    async def ack(http: httpx.AsyncClient, message_id: str) -> None:
        response = await http.post(ACK, json={"messageIds": [message_id]})
        if response.status_code != 200:
            result.errors[f"ack {response.status_code}"] += 1

    async def consume(client: Client) -> None:
        nonlocal open_streams
        timeout = httpx.Timeout(30.0, read=None)
        async with (
            httpx.AsyncClient(
                base_url=server.base_url, headers=client.headers(), timeout=timeout
            ) as http,
            http.stream("GET", STREAM, headers=EVENT_STREAM) as response,
        ):
            if response.status_code != 200:
                result.errors[
                    f"open {response.status_code}: {(await response.aread())[:200]!r}"
                ] += 1
                return
            open_streams += 1
            parser = EventParser()
            async for chunk in response.aiter_raw():
                arrived = time.monotonic()
                for event in parser.feed(chunk):
                    if event.event != "message":
                        result.errors[f"end {event.data}"] += 1
                        return
                    item = json.loads(event.data)
                    number = int(item["payload"]["n"])
                    if number >= warmup and number not in received:
                        result.latencies_ms.append(1000 * (arrived - item["payload"]["sentAt"]))
                    received.add(number)
                    task = asyncio.create_task(ack(http, item["messageId"]))
                    acking.add(task)
                    task.add_done_callback(acking.discard)
                if len(received) >= total:
                    finished.set()
            result.errors["stream closed without an end event"] += 1

    async def send() -> None:
        headers = {**sender.headers(), "Content-Type": "application/json"}
        async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as http:
            interval = 1.0 / plan.longpoll_rate
            next_at = time.monotonic()
            for number in range(total):
                next_at += interval
                target = consumers[number % len(consumers)].principal.adapter_id
                started = time.monotonic()
                response = await http.post(
                    SEND, content=send_body(target, [payload(started, number)])
                )
                if number >= warmup:
                    result.send_ms.append(1000 * (time.monotonic() - started))
                if response.status_code != 201:
                    result.errors[f"send {response.status_code}"] += 1
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    tasks = [asyncio.create_task(consume(client)) for client in consumers]
    deadline = time.monotonic() + 30
    while open_streams < len(consumers) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # every stream has made its first claim before the first send
    meter = CpuMeter(server)
    cpu_before = time.process_time()
    await send()
    try:
        await asyncio.wait_for(finished.wait(), timeout=30)
    except TimeoutError:
        log(f"(j) stream: {total - len(received)} messages not delivered within 30 s")
    result.missing = total - len(received)
    result.cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, *acking, return_exceptions=True)
    return result


def rabbitmq_latency_run(server: Server, broker: Broker, consumers: int, plan: Plan) -> Pushed:
    result = Pushed()
    warmup = warmup_of(consumers)
    total = warmup + plan.longpoll_messages
    queue_reset(broker)
    received: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()
    ready = threading.Barrier(consumers + 1)

    def consume() -> None:
        connection = broker.connect()
        channel = connection.channel()

        def on_message(message: amqp.Message) -> None:
            arrived = time.monotonic()
            body = json.loads(message.body)
            assert message.delivery_tag is not None
            channel.basic_ack(message.delivery_tag)
            with lock:
                if body["n"] >= warmup and body["n"] not in received:
                    result.latencies_ms.append(1000 * (arrived - body["sentAt"]))
                received.add(body["n"])

        try:
            channel.basic_qos(0, PREFETCH, False)
            channel.basic_consume(broker.queue, no_ack=False, callback=on_message)
            ready.wait()
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    connection.drain_events(timeout=0.2)
        finally:
            connection.close()

    threads = [threading.Thread(target=consume, daemon=True) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    ready.wait()
    connection = broker.connect()
    channel = connection.channel()
    channel.confirm_select()
    confirmed: list[int] = []

    def on_confirm(method: tuple[int, int], delivery_tag: int, multiple: bool) -> None:
        confirmed.append(int(method == spec.Basic.Ack))

    time.sleep(1.0)
    meter = CpuMeter(server, background=True)
    cpu_before = time.process_time()
    interval = 1.0 / plan.longpoll_rate
    next_at = time.monotonic()
    for number in range(total):
        next_at += interval
        started = time.monotonic()
        message = amqp.Message(
            payload(started, number), delivery_mode=2, content_type="application/json", type="bench"
        )
        channel.basic_publish(message, exchange="", routing_key=broker.queue)
        confirmed.clear()
        while not confirmed:
            channel.wait(
                [spec.Basic.Ack, spec.Basic.Nack], callback=on_confirm, timeout=CONFIRM_TIMEOUT
            )
        if not confirmed[0]:
            result.errors["nacked"] += 1
        if number >= warmup:
            result.send_ms.append(1000 * (time.monotonic() - started))
        time.sleep(max(0.0, next_at - time.monotonic()))
    deadline = time.monotonic() + 30
    while len(received) < total and time.monotonic() < deadline:
        time.sleep(0.01)
    result.missing = total - len(received)
    result.cpu = meter.read(client_cpu=time.process_time() - cpu_before)
    connection.close()
    stop.set()
    for thread in threads:
        thread.join()
    return result


# --- The logout ----------------------------------------------------------------------------------


@dataclass
class Logouts:
    ends_ms: list[float] = field(default_factory=list)  # from the logout's 200 to the end event
    codes: Counter[str] = field(default_factory=Counter)  # what ended each stream
    errors: Counter[str] = field(default_factory=Counter)


async def logout_run(server: Server, principal: Principal, samples: int) -> Logouts:
    """``samples`` times: sign in on a new device, open a stream, log out after a pause that
    moves through the sweep's second from sample to sample, and time the stream's end."""
    result = Logouts()
    timeout = httpx.Timeout(30.0, read=None)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=timeout) as http:
        for sample in range(samples):
            device = {"X-Device-ID": f"bench-logout-{sample}"}
            signed = await http.post(
                "/api/auth/login/username",
                json={"username": principal.login, "password": principal.password},
                headers=device,
            )
            if signed.status_code != 200:
                result.errors[f"sign-in {signed.status_code}"] += 1
                continue
            tokens = signed.json()
            headers = {**device, **EVENT_STREAM, "Authorization": f"Bearer {tokens['accessToken']}"}
            ended: asyncio.Future[tuple[float, str]] = asyncio.get_running_loop().create_future()
            opened = asyncio.Event()
            reading = asyncio.create_task(_read_end(http, headers, opened, ended))
            await opened.wait()
            await asyncio.sleep(0.5 + (sample * 0.37) % 1.0)
            answer = await http.post(
                "/api/auth/logout", json={"refreshToken": tokens["refreshToken"]}, headers=device
            )
            logged_out = time.monotonic()
            if answer.status_code != 200:
                result.errors[f"logout {answer.status_code}"] += 1
            try:
                at, code = await asyncio.wait_for(ended, LOGOUT_TIMEOUT)
            except TimeoutError:
                result.errors[f"no end within {LOGOUT_TIMEOUT:g} s"] += 1
            else:
                result.codes[code] += 1
                if code == "TOKEN_REVOKED":
                    result.ends_ms.append(1000 * (at - logged_out))
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
    return result


async def _read_end(
    http: httpx.AsyncClient,
    headers: dict[str, str],
    opened: asyncio.Event,
    ended: asyncio.Future[tuple[float, str]],
) -> None:
    """Read a stream until its end event: when it came, and its code (or what happened instead)."""
    try:
        async with http.stream("GET", STREAM, headers=headers) as response:
            opened.set()
            if response.status_code != 200:
                ended.set_result((time.monotonic(), f"open {response.status_code}"))
                return
            parser = EventParser()
            async for chunk in response.aiter_raw():
                arrived = time.monotonic()
                for event in parser.feed(chunk):
                    if event.event == "end":
                        ended.set_result((arrived, str(json.loads(event.data).get("code"))))
                        return
            ended.set_result((time.monotonic(), "closed without an end event"))
    except httpx.HTTPError as error:
        opened.set()
        if not ended.done():
            ended.set_result((time.monotonic(), type(error).__name__))
