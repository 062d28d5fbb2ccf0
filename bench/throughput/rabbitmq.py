"""RabbitMQ's side of (g) and (h): the same work against the machine's RabbitMQ, made fair.

The broker is RABBITMQ_URL's (``amqp://guest:guest@127.0.0.1:5672//`` when unset), the client
py-amqp (Celery's, pure Python as the API's side is). The bench declares a durable queue of its
own with a unique name, deletes it when the run ends, failed or not, and lets RabbitMQ delete it
after an hour unused (``x-expires``) should the run be killed before. Each message is the API's
payload bytes (``flow.payload``), persistent (delivery_mode 2), with its type as a property.

- Producers wait for the publisher confirm of every message (single) or of every 100 (batch):
  RabbitMQ confirms a persistent message once it is written to disk, as the API answers a send
  once PostgreSQL has committed it.
- Consumers acknowledge by hand: basic_get and basic_ack for each message (single); or
  basic_consume with a prefetch of 100, acknowledging with one multiple ack the messages it has
  when nothing more is waiting on the socket, at most 100 (batch), as the API's consumer
  acknowledges with one call the up to 100 messages a receive brought.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import amqp
from amqp import spec

from bench.throughput.flow import EMPTY_PAUSE, Clock, Tally, payload

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672//"
QUEUE_EXPIRES_MS = 3_600_000
PREFETCH = 100
CONFIRM_TIMEOUT = 30.0


@dataclass(frozen=True)
class Broker:
    host: str
    port: int
    userid: str
    password: str
    virtual_host: str
    queue: str

    def connect(self) -> amqp.Connection:
        connection = amqp.Connection(
            host=f"{self.host}:{self.port}",
            userid=self.userid,
            password=self.password,
            virtual_host=self.virtual_host,
            connect_timeout=10,
        )
        connection.connect()
        return connection

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}, vhost {self.virtual_host}, queue {self.queue}"


def broker_of(url: str, queue: str) -> Broker:
    """An AMQP URL as RabbitMQ reads it: the path's one segment is the virtual host, URL-encoded
    (``//`` and ``/%2F`` are ``/``), and an empty one the default ``/``."""
    parts = urlsplit(url)
    return Broker(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5672,
        userid=unquote(parts.username or "guest"),
        password=unquote(parts.password or "guest"),
        virtual_host=unquote(parts.path[1:]) or "/",
        queue=queue,
    )


@contextmanager
def bench_queue() -> Iterator[tuple[Broker, str]]:
    """The bench's queue on RABBITMQ_URL's broker, and the broker's name and version; deleted
    on the way out. Raises OSError or an AMQP error when the broker cannot be reached."""
    url = os.environ.get("RABBITMQ_URL", DEFAULT_URL)
    broker = broker_of(url, f"bench-throughput-{uuid.uuid4().hex[:12]}")
    connection = broker.connect()
    try:
        properties: dict[str, Any] = connection.server_properties  # type: ignore[attr-defined]
        version = f"{properties.get('product', 'RabbitMQ')} {properties.get('version', '?')}"
    finally:
        connection.close()
    queue_reset(broker)
    try:
        yield broker, version
    finally:
        connection = broker.connect()
        try:
            connection.channel().queue_delete(broker.queue)
        finally:
            connection.close()


def queue_reset(broker: Broker) -> None:
    """Declare the queue (again: that also restarts its x-expires clock) and empty it."""
    connection = broker.connect()
    try:
        channel = connection.channel()
        channel.queue_declare(
            broker.queue,
            durable=True,
            auto_delete=False,
            arguments={"x-expires": QUEUE_EXPIRES_MS},
        )
        channel.queue_purge(broker.queue)
    finally:
        connection.close()


def producer(broker: Broker, batch: int, clock: Clock) -> Tally:
    """Publishes ``batch`` messages, then waits for their confirms, as fast as RabbitMQ
    confirms; each message's payload is stamped with the time its batch began."""
    tally = Tally()
    connection = broker.connect()
    channel = connection.channel()
    channel.confirm_select()
    published = settled = nacked = 0

    def confirmed(method: tuple[int, int], delivery_tag: int, multiple: bool) -> None:
        nonlocal settled, nacked
        if method == spec.Basic.Nack:
            nacked += delivery_tag - settled if multiple else 1
        settled = max(settled, delivery_tag)

    number = 0
    clock.wait_start()
    while (now := clock.hold()) is not None:
        failed_before = nacked
        for n in range(batch):
            message = amqp.Message(
                payload(now, number + n),
                delivery_mode=2,
                content_type="application/json",
                type="bench",
            )
            channel.basic_publish(message, exchange="", routing_key=broker.queue)
        number += batch
        published += batch
        while settled < published:
            channel.wait(
                [spec.Basic.Ack, spec.Basic.Nack], callback=confirmed, timeout=CONFIRM_TIMEOUT
            )
        failed = nacked - failed_before
        clock.sent(batch - failed)
        if clock.window.counts(time.monotonic()):
            tally.sent += batch - failed
            tally.failed += failed
            tally.sends += 1
            tally.held += clock.held
    connection.close()
    return tally


def consumer(broker: Broker, batch: int, clock: Clock) -> Tally:
    """basic_get and basic_ack for each message (``batch`` 1), or basic_consume with a prefetch
    of 100 and one multiple ack for what has arrived; the latency of each message is from its
    payload's send time to the moment the client had read it."""
    connection = broker.connect()
    channel = connection.channel()
    tally = Tally()
    if batch == 1:
        _get_each(connection, channel, broker.queue, clock, tally)
    else:
        _consume(connection, channel, broker.queue, clock, tally)
    connection.close()
    return tally


def _get_each(
    connection: amqp.Connection, channel: Any, queue: str, clock: Clock, tally: Tally
) -> None:
    clock.wait_start()
    while clock.now() is not None:
        message = channel.basic_get(queue, no_ack=False)
        arrived = time.monotonic()
        if message is None:
            tally.empty += clock.window.counts(arrived)
            time.sleep(EMPTY_PAUSE)
            continue
        sent_at = json.loads(message.body)["sentAt"]
        channel.basic_ack(message.delivery_tag)
        clock.acked(1)
        if clock.window.counts(arrived):
            tally.received += 1
            tally.receives += 1
            tally.latencies_ms.append(1000.0 * (arrived - sent_at))
        if clock.window.counts(time.monotonic()):
            tally.acked += 1
            tally.acks += 1


def _consume(
    connection: amqp.Connection, channel: Any, queue: str, clock: Clock, tally: Tally
) -> None:
    arrived: list[amqp.Message] = []
    channel.basic_qos(0, PREFETCH, False)
    channel.basic_consume(queue, no_ack=False, callback=arrived.append)
    clock.wait_start()
    while (now := clock.now()) is not None:
        try:
            # Wait for the first message, at most until the window ends ...
            connection.drain_events(timeout=max(0.001, clock.window.end - now))
            # ... then take what is already waiting, without waiting for more.
            while len(arrived) < PREFETCH:
                connection.drain_events(timeout=0)
        except TimeoutError:
            pass
        if not arrived:
            continue
        read = time.monotonic()
        sent = [json.loads(message.body)["sentAt"] for message in arrived]
        channel.basic_ack(arrived[-1].delivery_tag, multiple=True)
        clock.acked(len(arrived))
        if clock.window.counts(read):
            tally.received += len(arrived)
            tally.receives += 1
            tally.latencies_ms.extend(1000.0 * (read - sent_at) for sent_at in sent)
        if clock.window.counts(time.monotonic()):
            tally.acked += len(arrived)
            tally.acks += 1
        arrived.clear()
