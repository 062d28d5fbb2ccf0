"""(i): consumers that handle one message at a time, on queues filled before the turn starts.

The workers of each side, for ``flow.flow_turn``:

- The API: ``ExchangeClient.consume()`` of the adapters' client (clients/python) on a push stream
  (``maxOutstanding`` PREFETCH), a handler that does nothing, the client's ACK batching as it
  comes (an ACK once 50 handled messages wait, or 20 ms after the first of them): what an adapter
  written with the client does. The bench counts what the client's ACK calls answered
  ``acked`` (a subclass that overrides ``ack``). Each turn the worker signs in (the client signs
  in lazily; a session cannot be handed to a forked process), before the turn starts.
- RabbitMQ: ``basic_consume`` with ``basic_qos`` prefetch PREFETCH, the same handler, and a
  ``basic_ack`` per message (py-amqp, as ``rabbitmq`` uses).

The queues are filled before each turn with the same payload bytes on both sides
(``flow.payload``): the API's by SQL, RabbitMQ's by publishing persistent messages with confirms,
so that neither side's producers are measured.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from typing import Any

import amqp
import psycopg
from amqp import spec
from exchange_client import ExchangeClient, Message

from bench.throughput.flow import BODY, Clock, Tally, payload
from bench.throughput.rabbitmq import CONFIRM_TIMEOUT, PREFETCH, Broker, queue_reset
from bench.throughput.servers import Principal, database_settle

LEASE_SECONDS = 30
STOP_POLL = 0.02  # how often the API's worker looks whether its turn is over
PUBLISH_CONFIRMS = 1000  # RabbitMQ's fill: messages published between two waits for confirms

# The queue of one recipient, emptied then filled with ``count`` messages, each with the payload
# bytes flow.payload writes (as jsonb: the API keeps its payloads so), numbered in queue order.
FILL = (
    "INSERT INTO exchange_message (message_id, recipient_id, sender_id, type, payload, headers, "
    "enqueued_at, visible_at, receive_count) "
    "SELECT gen_random_uuid(), %(recipient)s, %(sender)s, 'bench', "
    "jsonb_build_object('sentAt', extract(epoch FROM clock_timestamp()), 'n', n, "
    "'body', %(body)s::text), '{}'::jsonb, now(), now(), 0 "
    "FROM generate_series(1, %(count)s) AS n"
)
AVAILABLE = (
    "SELECT count(*) FROM exchange_message "
    "WHERE recipient_id = %s AND visible_at <= statement_timestamp()"
)


def api_fill(database_url: str, recipient: int, sender: int, count: int) -> float:
    """The recipient's queue emptied and filled with ``count`` messages, the table vacuumed and
    analyzed (not checkpointed: the phase's one checkpoint comes before its first turn); the
    seconds it took."""
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM exchange_message WHERE recipient_id = %s", [recipient])
        params = {"recipient": recipient, "sender": sender, "body": BODY, "count": count}
        conn.execute(FILL, params)
        database_settle(conn, checkpoint=False)
    return time.monotonic() - started


def api_available(database_url: str, recipient: int) -> int:
    """Messages of the recipient's queue that a consumer could take now."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(AVAILABLE, [recipient]).fetchone()
    return int(row[0]) if row else 0


def rabbitmq_fill(broker: Broker, count: int) -> float:
    """The bench's queue purged and filled with ``count`` persistent messages, every one
    confirmed; the seconds it took."""
    started = time.monotonic()
    queue_reset(broker)
    connection = broker.connect()
    try:
        channel = connection.channel()
        channel.confirm_select()
        settled = 0

        def confirmed(method: tuple[int, int], delivery_tag: int, multiple: bool) -> None:
            nonlocal settled
            if method == spec.Basic.Nack:
                raise SystemExit(f"RabbitMQ refused message {delivery_tag} of the fill")
            settled = max(settled, delivery_tag)

        for number in range(count):
            message = amqp.Message(
                payload(time.time(), number),
                delivery_mode=2,
                content_type="application/json",
                type="bench",
            )
            channel.basic_publish(message, exchange="", routing_key=broker.queue)
            if (number + 1) % PUBLISH_CONFIRMS == 0 or number + 1 == count:
                while settled < number + 1:
                    channel.wait(
                        [spec.Basic.Ack, spec.Basic.Nack],
                        callback=confirmed,
                        timeout=CONFIRM_TIMEOUT,
                    )
    finally:
        connection.close()
    return time.monotonic() - started


def rabbitmq_ready(broker: Broker) -> int:
    """Messages waiting in the bench's queue, not delivered to a consumer."""
    connection = broker.connect()
    try:
        declared = connection.channel().queue_declare(broker.queue, passive=True)
        return int(declared[1]) if declared else 0  # (queue, message_count, consumer_count)
    finally:
        connection.close()


def handle(message: Any) -> None:
    """The handler of both sides: nothing to do, so that what is measured is the delivery."""


def api_handler(base_url: str, principal: Principal, device_id: str, clock: Clock) -> Tally:
    """``consume()`` on a stream until the turn ends; what its ACKs answered in the window."""
    tally = Tally()

    class Counted(ExchangeClient):
        def ack(self, messages: Iterable[Message | str]) -> dict[str, str]:
            answer = super().ack(messages)
            clock.acked(len(answer))
            if clock.window.counts(time.monotonic()):
                tally.acked += sum(status == "acked" for status in answer.values())
                tally.acks += 1
            return answer

    def handled(message: Message) -> None:
        handle(message)
        if clock.window.counts(time.monotonic()):
            tally.received += 1

    def stop_at_the_end() -> None:
        while clock.now() is not None:
            time.sleep(STOP_POLL)
        client.stop()

    client = Counted(base_url, principal.login, principal.password, device_id=device_id)
    try:
        client.whoami()  # signs in, before the turn starts
        clock.wait_start()
        stopper = threading.Thread(target=stop_at_the_end, daemon=True)
        stopper.start()
        summary = client.consume(
            handled, batch=PREFETCH, lease=LEASE_SECONDS, handle_signals=False, transport="stream"
        )
        stopper.join()
        tally.failed += summary.failed
    finally:
        client.close()
    return tally


def rabbitmq_handler(broker: Broker, clock: Clock) -> Tally:
    """``basic_consume`` until the turn ends, each message handled then acknowledged alone."""
    tally = Tally()
    connection = broker.connect()
    channel = connection.channel()

    def on_message(message: amqp.Message) -> None:
        handle(message)
        assert message.delivery_tag is not None
        channel.basic_ack(message.delivery_tag)
        clock.acked(1)
        if clock.window.counts(time.monotonic()):
            tally.received += 1
            tally.acked += 1
            tally.acks += 1

    try:
        clock.wait_start()
        channel.basic_qos(0, PREFETCH, False)
        channel.basic_consume(broker.queue, no_ack=False, callback=on_message)
        while (now := clock.now()) is not None:
            with contextlib.suppress(TimeoutError):
                connection.drain_events(timeout=max(0.001, min(0.1, clock.window.end - now)))
    finally:
        connection.close()
    return tally
