"""The client on the platform's push stream (gunicorn over a PostgreSQL of this module's own):
stream() in queue order and within its credits, reconnecting when its connection drops, raising
StreamReplaced when a stream of the same device id takes its place; consume() on the stream,
acknowledging in batches and never a message whose handler has not returned, releasing what
failed, giving back what it holds when stopped; and consume() long-polling through a proxy that
answers the stream's path as a platform without it would (404 or 405)."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from exchange_client import (
    Conflict,
    ExchangeClient,
    Message,
    MessageStream,
    Release,
    StreamEvent,
    StreamReplaced,
    Summary,
)

from tests.clients.conftest import query, stock
from tests.clients.test_cli import MESSAGE_MEMBERS
from tests.clients.test_library import (
    ACK,
    RECEIVE,
    SHORT_LEASE,
    CountingTransport,
    RecordingClient,
    acked_once_each,
    alive,
    client_for,
    consuming,
    delivery_log,
    waiting,
)
from tests.stack.conftest import Gunicorn, Owner, StackDatabase, wait_until
from tests.stack.servers import Forwarder

pytestmark = pytest.mark.stack

STREAM = ("GET", "/api/exchange/messages/stream")
LONG_LEASE = 3600  # no lease runs out during a test: whatever comes back was given back


class Reading:
    """A stream iterated in a thread of its own: its events as they come, and what it raised."""

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self.events: list[StreamEvent] = []
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for event in self.stream.events():
                self.events.append(event)
        except Exception as error:
            self.error = error

    @property
    def messages(self) -> list[Message]:
        return [event.message for event in list(self.events) if event.message is not None]

    def wait_for(self, count: int, what: str) -> None:
        def arrived() -> bool:
            assert self.error is None, self.error
            return len(self.messages) >= count

        wait_until(arrived, timeout=30, what=what)


def statuses(database: StackDatabase, ids: list[str]) -> dict[str, int]:
    """The delivery log's receive counts of the acknowledged ones among ``ids``."""
    rows = query(
        database,
        "SELECT message_id::text, receive_count FROM exchange_delivery_log "
        "WHERE message_id::text = ANY(%s)",
        ids,
    )
    return dict(rows)


def test_stream_yields_the_queued_messages_in_order_as_a_receive_answers_them(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-order")
    ids = stock(stack_database, adapter, 20)

    with (
        client_for(gunicorn.base_url, adapter, "stream-order-1") as client,
        client.stream(max_outstanding=100, lease=60) as stream,
    ):
        reading = Reading(stream)
        reading.wait_for(20, "the 20 queued messages")
        received = reading.messages
        results = client.ack(received)

    assert [m.message_id for m in received] == ids
    assert [m.payload for m in received] == [{"n": n} for n in range(1, 21)]
    assert [(m.delivery_count, m.redelivered) for m in received] == [(1, False)] * 20
    assert all(list(m.raw) == MESSAGE_MEMBERS for m in received)
    assert all(m.lease_expires_at - m.enqueued_at >= timedelta(seconds=59) for m in received)
    assert [(e.event, e.id) for e in reading.events] == [("message", m) for m in ids]
    assert results == dict.fromkeys(ids, "acked")
    assert waiting(stack_database, adapter) == (0, 0)


def test_a_stream_holds_at_most_max_outstanding_unsettled_and_each_settled_one_lets_one_more_come(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-credits")
    ids = stock(stack_database, adapter, 6)

    with (
        client_for(gunicorn.base_url, adapter, "stream-credits-1") as client,
        client.stream(max_outstanding=2, lease=LONG_LEASE) as stream,
    ):
        reading = Reading(stream)
        reading.wait_for(2, "two messages, the stream's credits")
        at_two = client.stats()
        client.ack(reading.messages[:1])
        reading.wait_for(3, "a third once the first was acknowledged")
        client.release(reading.messages[1:2], delay_seconds=LONG_LEASE)
        reading.wait_for(4, "a fourth once the second was released")
        at_four = client.stats()

    assert [m.message_id for m in reading.messages] == ids[:4]
    assert (at_two["inFlight"], at_two["available"]) == (2, 4)
    assert (at_four["inFlight"], at_four["available"], at_four["delayed"]) == (2, 2, 1)


def test_a_stream_reconnects_when_its_connection_drops_and_gets_what_it_left_unsettled_again(
    gunicorn: Gunicorn,
    stack_database: StackDatabase,
    owner: Owner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="exchange_client")
    adapter = owner.create_adapter("stream-dropped")
    ids = stock(stack_database, adapter, 3)
    port = int(gunicorn.base_url.rsplit(":", 1)[1])
    forwarder = Forwarder(("127.0.0.1", port))
    forwarder.start()
    try:
        with (
            client_for(f"http://127.0.0.1:{forwarder.port}", adapter, "stream-dropped-1") as client,
            client.stream(max_outstanding=10, lease=LONG_LEASE) as stream,
        ):
            reading = Reading(stream)
            reading.wait_for(3, "the three messages")
            assert client.ack(reading.messages[:1]) == {ids[0]: "acked"}
            forwarder.stop()  # every connection through it cut, as a network outage does
            forwarder.start()
            reading.wait_for(5, "the two unsettled ones again, on a new connection")
            results = client.ack(reading.messages[3:])
    finally:
        forwarder.stop()

    assert [(m.message_id, m.delivery_count, m.redelivered) for m in reading.messages] == [
        (ids[0], 1, False),
        (ids[1], 1, False),
        (ids[2], 1, False),
        (ids[1], 2, True),
        (ids[2], 2, True),
    ]
    assert results == {ids[1]: "acked", ids[2]: "acked"}
    assert any(r.getMessage().startswith("Stream dropped") for r in caplog.records)
    assert statuses(stack_database, ids) == {ids[0]: 1, ids[1]: 2, ids[2]: 2}


def test_a_stream_raises_stream_replaced_once_another_opens_with_its_device_id_which_gets_its_messages(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-replaced")
    ids = stock(stack_database, adapter, 2)
    device = "stream-replaced-1"

    with (
        client_for(gunicorn.base_url, adapter, device) as first_client,
        client_for(gunicorn.base_url, adapter, device) as second_client,
        first_client.stream(lease=LONG_LEASE) as first,
    ):
        replaced = Reading(first)
        replaced.wait_for(2, "the first stream's messages")
        with second_client.stream(lease=LONG_LEASE) as second:
            taking = Reading(second)
            wait_until(
                lambda: not replaced.thread.is_alive() and len(taking.messages) >= 2,
                timeout=30,
                what="the first stream to end and the second to get its messages",
            )
            second_client.ack(taking.messages)

    assert isinstance(replaced.error, StreamReplaced)
    assert (replaced.error.status, replaced.error.code) == (None, "REPLACED")
    assert (replaced.events[-1].event, replaced.events[-1].code) == ("end", "REPLACED")
    assert [(m.message_id, m.redelivered) for m in taking.messages] == [
        (ids[0], True),
        (ids[1], True),
    ]
    assert waiting(stack_database, adapter) == (0, 0)


def test_a_stream_ends_with_conflict_when_the_owner_turns_a_webhook_on_and_receives_refuse(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-webhook")
    stock(stack_database, adapter, 1)
    hook = f"/api/users/adapters/{adapter.adapter_id}/webhook"

    with (
        client_for(gunicorn.base_url, adapter, "stream-webhook-1") as client,
        client.stream(lease=LONG_LEASE) as opened,
    ):
        reading = Reading(opened)
        reading.wait_for(1, "the queued message")
        client.release(reading.messages)
        # A public name that resolves nowhere: the server's deliverer fails and retries later.
        answer = owner.http.put(hook, json={"url": "https://hooks.example.invalid/exchange"})
        assert answer.status_code == 200, answer.text
        wait_until(lambda: not reading.thread.is_alive(), timeout=30, what="the stream's end")
        with pytest.raises(Conflict) as refused:
            client.receive()

    assert isinstance(reading.error, Conflict)
    assert (reading.error.status, reading.error.code) == (None, "WEBHOOK_ACTIVE")
    assert (reading.events[-1].event, reading.events[-1].code) == ("end", "WEBHOOK_ACTIVE")
    assert (refused.value.status, refused.value.code) == (409, "WEBHOOK_ACTIVE")
    assert owner.http.delete(hook).status_code == 200


def test_consume_on_the_stream_handles_and_acks_every_message_once_without_a_receive(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-consumer")
    ids = stock(stack_database, adapter, 300)
    transport = CountingTransport()
    handled: list[Message] = []
    client = ExchangeClient(
        gunicorn.base_url,
        adapter.login,
        adapter.password,
        device_id="stream-consumer-1",
        transport=transport,
    )
    with client, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, client, handled.append, batch=50)
        try:
            wait_until(
                lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
                timeout=60,
                what="every message to be acknowledged",
            )
        finally:
            client.stop()
        summary = run.result(timeout=30)

    assert [m.message_id for m in handled] == ids
    assert summary == Summary(handled=300, failed=0, given_back=0)
    logged = delivery_log(stack_database, adapter)
    assert set(logged) == set(ids)
    assert set(logged.values()) == {1}
    assert (transport.requests[STREAM], transport.requests[RECEIVE]) == (1, 0)
    assert 1 <= transport.requests[ACK] <= 300


class AckSizes(RecordingClient):
    """A RecordingClient that keeps how many messages each of its ACKs carried, once answered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ack_sizes: list[int] = []

    def ack(self, messages: Iterable[Message | str]) -> dict[str, str]:
        messages = list(messages)
        results = super().ack(messages)
        self.ack_sizes.append(len(messages))
        return results


def test_consume_on_the_stream_acks_by_ack_batch_and_what_is_left_when_it_stops(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-ack-batch")
    ids = stock(stack_database, adapter, 35)
    handled: list[Message] = []
    consumer = AckSizes(
        gunicorn.base_url, adapter.login, adapter.password, device_id="stream-ack-batch-1"
    )
    with consumer, ThreadPoolExecutor(max_workers=1) as pool:
        # An interval no test outlasts: only the count (or stopping) sends an ACK.
        run = consuming(
            pool, consumer, handled.append, batch=100, ack_batch=10, ack_interval_ms=3_600_000
        )
        try:
            wait_until(
                # Fewer than ten wait for their ACK: none is under way.
                lambda: alive(run) and len(handled) == 35 and 35 - sum(consumer.ack_sizes) < 10,
                timeout=30,
                what="35 handled and all but fewer than ten of them acknowledged",
            )
            sizes_while_running = list(consumer.ack_sizes)
            acked_while_running = set(delivery_log(stack_database, adapter))
        finally:
            consumer.stop()
        summary = run.result(timeout=30)

    assert [m.message_id for m in handled] == ids
    assert summary == Summary(handled=35, failed=0, given_back=0)
    # While it ran, each ACK waited for ten handled messages or more; stopping sent the rest.
    assert all(size >= 10 for size in sizes_while_running), consumer.ack_sizes
    assert len(acked_while_running) == sum(sizes_while_running)
    assert sum(consumer.ack_sizes[len(sizes_while_running) :]) == 35 - sum(sizes_while_running)
    acked_once_each([consumer], set(ids))


def test_consume_on_the_stream_never_acks_a_message_before_its_handler_returned(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-in-hand")
    first, second, third = stock(stack_database, adapter, 3)
    handled: list[Message] = []
    in_hand = threading.Event()
    go_on = threading.Event()

    def handle(message: Message) -> None:
        handled.append(message)
        if message.message_id == second:
            in_hand.set()
            go_on.wait(timeout=120)

    consumer = client_for(gunicorn.base_url, adapter, "stream-in-hand-1")
    other = client_for(gunicorn.base_url, adapter, "stream-in-hand-2")
    with consumer, other, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, consumer, handle, batch=10, lease=SHORT_LEASE)
        try:
            wait_until(
                lambda: (
                    alive(run)
                    and in_hand.is_set()
                    and first in delivery_log(stack_database, adapter)
                ),
                timeout=30,
                what="the first message acknowledged while the second is in hand",
            )
            # The leases the second (in hand) and the third (held, not handled) came with run out
            # by the platform's clock (leaseExpiresAt is cut to the second)...
            lease_ended = handled[1].lease_expires_at + timedelta(seconds=2)
            wait_until(
                lambda: (
                    alive(run)
                    and query(stack_database, "SELECT statement_timestamp()")[0][0] > lease_ended
                ),
                timeout=30,
                what="the second's first lease to end",
            )
            taken = other.receive(max_messages=10)  # ...and another instance gets neither
            acked_meanwhile = set(delivery_log(stack_database, adapter))
        finally:
            go_on.set()
        wait_until(
            lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
            timeout=30,
            what="the rest to be acknowledged",
        )
        consumer.stop()
        summary = run.result(timeout=30)

    assert acked_meanwhile == {first}
    assert taken == []
    assert [m.message_id for m in handled] == [first, second, third]
    assert summary == Summary(handled=3, failed=0, given_back=0)
    acked_once_each([consumer], {first, second, third})


def test_a_handler_that_raises_on_the_stream_leaves_its_message_unacked_and_released_to_come_again(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-flaky")
    first, second = stock(stack_database, adapter, 2)
    seen: list[tuple[str, int]] = []

    def handle(message: Message) -> None:
        seen.append((message.message_id, message.delivery_count))
        if (message.message_id, message.delivery_count) == (first, 1):
            raise Release("not yet")

    consumer = client_for(gunicorn.base_url, adapter, "stream-flaky-1")
    with consumer, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, consumer, handle, lease=LONG_LEASE)
        try:
            wait_until(
                lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
                timeout=30,
                what="both to be acknowledged",
            )
        finally:
            consumer.stop()
        summary = run.result(timeout=30)

    assert sorted(seen) == sorted([(first, 1), (second, 1), (first, 2)])
    assert summary == Summary(handled=2, failed=1, given_back=0)
    # Released at once (not left to a lease of an hour), acknowledged on its second delivery.
    assert statuses(stack_database, [first, second]) == {first: 2, second: 1}
    acked_once_each([consumer], {first, second})


def test_stopping_consume_on_the_stream_acks_the_message_in_hand_and_gives_back_the_rest_at_once(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-stop")
    ids = stock(stack_database, adapter, 5)
    handled: list[Message] = []
    in_hand = threading.Event()
    go_on = threading.Event()

    def handle(message: Message) -> None:
        handled.append(message)
        in_hand.set()
        go_on.wait(timeout=60)

    consumer = client_for(gunicorn.base_url, adapter, "stream-stop-1")
    other = client_for(gunicorn.base_url, adapter, "stream-stop-2")
    with consumer, other, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, consumer, handle, batch=5, lease=LONG_LEASE)
        try:
            wait_until(
                lambda: alive(run) and in_hand.is_set() and other.stats()["inFlight"] == 5,
                timeout=30,
                what="the first message in hand and the other four held",
            )
            consumer.stop()
        finally:
            go_on.set()
        summary = run.result(timeout=30)
        again = other.receive(max_messages=10)  # given back: another instance has them at once
        other.ack(again)

    assert [m.message_id for m in handled] == ids[:1]
    assert summary == Summary(handled=1, failed=0, given_back=4)
    assert [m.message_id for m in again] == ids[1:]
    assert statuses(stack_database, ids[:1]) == {ids[0]: 1}
    assert consumer.ack_results == [(ids[0], "acked")]


def test_consume_raises_stream_replaced_once_a_stream_with_its_device_id_takes_its_place(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stream-consume-replaced")
    ids = stock(stack_database, adapter, 2)
    device = "stream-consume-replaced-1"
    handled: list[Message] = []
    consumer = client_for(gunicorn.base_url, adapter, device)
    newer = client_for(gunicorn.base_url, adapter, device)
    with consumer, newer, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, consumer, handled.append, lease=LONG_LEASE)
        wait_until(
            lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
            timeout=30,
            what="both messages to be acknowledged",
        )
        with newer.stream() as stream:
            Reading(stream)
            with pytest.raises(StreamReplaced) as replaced:
                run.result(timeout=30)

    assert replaced.value.code == "REPLACED"
    assert [m.message_id for m in handled] == ids
    acked_once_each([consumer], set(ids))


class NoStreamProxy:
    """A reverse proxy to the platform, on loopback, that answers the stream's path with
    ``status`` and problem+json, as a platform without the stream would, and passes every other
    request on."""

    HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}

    def __init__(self, upstream: str, status: int) -> None:
        self.upstream = httpx.Client(base_url=upstream, timeout=60)
        self.status = status
        self.requests: Counter[tuple[str, str]] = Counter()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy.answer(self)

            def do_POST(self) -> None:
                proxy.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?")[0]
        self.requests[(request.command, path)] += 1
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        if path == STREAM[1]:
            code = "NOT_FOUND" if self.status == 404 else "METHOD_NOT_ALLOWED"
            problem = {"type": "about:blank", "status": self.status, "code": code, "detail": ""}
            status, headers = self.status, {"Content-Type": "application/problem+json"}
            content = json.dumps(problem).encode()
        else:
            answer = self.upstream.request(
                request.command,
                request.path,
                content=body,
                headers={
                    name: value
                    for name, value in request.headers.items()
                    if name.lower() not in self.HOP_BY_HOP | {"accept-encoding"}
                },
            )
            status, content = answer.status_code, answer.content
            headers = {
                name: value
                for name, value in answer.headers.items()
                if name.lower() not in self.HOP_BY_HOP | {"content-encoding"}
            }
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        request.wfile.write(content)


@contextmanager
def no_stream_proxy(upstream: str, status: int) -> Iterator[NoStreamProxy]:
    proxy = NoStreamProxy(upstream, status)
    thread = threading.Thread(target=proxy.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
        proxy.upstream.close()


@pytest.mark.parametrize("status", [404, 405])
def test_consume_long_polls_where_the_platform_answers_the_streams_path_404_or_405(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, status: int
) -> None:
    adapter = owner.create_adapter(f"no-stream-{status}")
    ids = stock(stack_database, adapter, 25)
    handled: list[Message] = []

    with no_stream_proxy(gunicorn.base_url, status) as proxy:
        consumer = client_for(proxy.url, adapter, f"no-stream-{status}-1")
        with consumer, ThreadPoolExecutor(max_workers=1) as pool:
            run = consuming(pool, consumer, handled.append, batch=10, wait=1)
            try:
                wait_until(
                    lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
                    timeout=60,
                    what="every message to be acknowledged",
                )
            finally:
                consumer.stop()
            summary = run.result(timeout=30)

    assert [m.message_id for m in handled] == ids
    assert summary == Summary(handled=25, failed=0, given_back=0)
    acked_once_each([consumer], set(ids))
    # Asked for the stream once, then long-polled: each batch's ACK received the next.
    assert proxy.requests[STREAM] == 1
    assert proxy.requests[RECEIVE] >= 1
    assert proxy.requests[ACK] >= 3
