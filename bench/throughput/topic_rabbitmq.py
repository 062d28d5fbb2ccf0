"""RabbitMQ's side of (m): a fanout exchange bound to one durable queue per subscriber, with
py-amqp as (g) to (j) use it (``rabbitmq``).

- The publisher publishes persistent messages (delivery_mode 2) to the exchange, 100 at a time,
  then waits for their publisher confirms, as the API's publisher waits for a batch's answer.
- Each subscriber has a connection of its own, consumes its queue with a prefetch of 100 and
  acknowledges what has arrived with one multiple ack once nothing more is waiting on its socket
  (at most 100), as ``rabbitmq._consume`` does. A process runs several subscribers, waiting on
  all their sockets at once (selectors), so that it runs as many as the API's side does.
"""

from __future__ import annotations

import json
import selectors
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import amqp
from amqp import spec

from bench.throughput.rabbitmq import CONFIRM_TIMEOUT, PREFETCH, QUEUE_EXPIRES_MS, Broker
from bench.throughput.topic_runs import BATCH, STALL_SECONDS, Part, topic_payload


@dataclass(frozen=True)
class Fanout:
    exchange: str
    queues: list[str]


@contextmanager
def fanout_declared(broker: Broker, subscribers: int) -> Iterator[Fanout]:
    """A durable fanout exchange of the bench's own bound to ``subscribers`` durable queues,
    deleted on the way out; the queues expire after an hour unused should the run be killed
    first, and the exchange (auto-delete) goes with its last queue."""
    exchange = f"{broker.queue}-m{subscribers}"
    fanout = Fanout(exchange, [f"{exchange}-{n}" for n in range(subscribers)])
    connection = broker.connect()
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, "fanout", durable=True, auto_delete=True)
        for queue in fanout.queues:
            channel.queue_declare(
                queue, durable=True, auto_delete=False, arguments={"x-expires": QUEUE_EXPIRES_MS}
            )
            channel.queue_bind(queue, exchange)
    finally:
        connection.close()
    try:
        yield fanout
    finally:
        connection = broker.connect()
        try:
            channel = connection.channel()
            for queue in fanout.queues:
                channel.queue_delete(queue)
            channel.exchange_delete(exchange)
        finally:
            connection.close()


def fanout_purge(broker: Broker, fanout: Fanout) -> int:
    """Empty the queues before a turn; how many messages they held (0 after a whole turn)."""
    connection = broker.connect()
    try:
        channel = connection.channel()
        return sum(int(channel.queue_purge(queue) or 0) for queue in fanout.queues)
    finally:
        connection.close()


def rabbitmq_publisher(broker: Broker, fanout: Fanout, publications: int, start: float) -> Part:
    """Publish ``publications`` messages to the exchange, BATCH at a time, each batch's confirms
    awaited before the next; each payload stamped with the time its batch began."""
    part = Part(expected=publications)
    connection = broker.connect()
    channel = connection.channel()
    channel.confirm_select()
    published = settled = nacked = 0

    def confirmed(method: tuple[int, int], delivery_tag: int, multiple: bool) -> None:
        nonlocal settled, nacked
        if method == spec.Basic.Nack:
            nacked += delivery_tag - settled if multiple else 1
        settled = max(settled, delivery_tag)

    time.sleep(max(0.0, start - time.monotonic()))
    cpu_from = time.process_time()
    part.first = time.monotonic()
    for first in range(0, publications, BATCH):
        now = time.monotonic()
        size = min(BATCH, publications - first)
        for number in range(first, first + size):
            message = amqp.Message(
                topic_payload(now, number),
                delivery_mode=2,
                content_type="application/json",
                type="bench",
            )
            channel.basic_publish(message, exchange=fanout.exchange, routing_key="")
        published += size
        while settled < published:
            channel.wait(
                [spec.Basic.Ack, spec.Basic.Nack], callback=confirmed, timeout=CONFIRM_TIMEOUT
            )
        part.requests += 1
        part.last = time.monotonic()
    part.count = published - nacked
    if nacked:
        part.errors["nack"] += nacked
    part.cpu = time.process_time() - cpu_from
    connection.close()
    return part


@dataclass
class _Subscriber:
    connection: amqp.Connection
    channel: amqp.Channel
    arrived: list[amqp.Message] = field(default_factory=list)
    acked: int = 0


def rabbitmq_subscribers(broker: Broker, queues: list[str], expected: int, start: float) -> Part:
    """Consume ``queues``, a subscriber (connection) each, until each has acknowledged
    ``expected`` messages or nothing has come for STALL_SECONDS; the latency of each message is
    from its payload's time to its ack's sending (an ack has no answer in AMQP)."""
    part = Part(expected=expected * len(queues))
    chooser = selectors.DefaultSelector()
    subscribers = []
    for queue in queues:
        connection = broker.connect()
        channel = connection.channel()
        subscriber = _Subscriber(connection, channel)
        channel.basic_qos(0, PREFETCH, False)
        channel.basic_consume(queue, no_ack=False, callback=subscriber.arrived.append)
        chooser.register(connection.transport.sock, selectors.EVENT_READ, subscriber)
        subscribers.append(subscriber)
    time.sleep(max(0.0, start - time.monotonic()))
    cpu_from = time.process_time()
    waiting, progress_at = len(subscribers), time.monotonic()
    while waiting and time.monotonic() - progress_at < STALL_SECONDS:
        for key, _ in chooser.select(timeout=1.0):
            subscriber = key.data
            _drain(subscriber)
            if not subscriber.arrived:
                continue
            sent = [json.loads(message.body)["sentAt"] for message in subscriber.arrived]
            subscriber.channel.basic_ack(subscriber.arrived[-1].delivery_tag, multiple=True)
            acked_at = time.monotonic()
            part.latencies_ms.extend(1000.0 * (acked_at - sent_at) for sent_at in sent)
            part.count += len(sent)
            part.requests += 1
            part.last = progress_at = acked_at
            subscriber.acked += len(sent)
            subscriber.arrived.clear()
            if subscriber.acked >= expected:
                chooser.unregister(key.fileobj)
                waiting -= 1
    part.cpu = time.process_time() - cpu_from
    for subscriber in subscribers:
        subscriber.connection.close()
    return part


def _drain(subscriber: _Subscriber) -> None:
    """Read the frames already on the socket, without waiting for more, up to PREFETCH
    messages."""
    try:
        while len(subscriber.arrived) < PREFETCH:
            subscriber.connection.drain_events(timeout=0)
    except TimeoutError:
        pass
