"""consume() on the push stream: handle each message as it comes, acknowledge in batches.

- A thread reads the stream (exchange_client.stream): each message it delivers is held, its
  lease kept by the lease keeper, and queued for the handler. A message delivered again while
  held (after a reconnection the platform hands back what the last connection left unsettled)
  is not queued twice: the held copy takes the new receipt handle.
- The handler is called in the consume() thread, once per message, in order.
- A message whose handler returned is acknowledged by a third thread, never before: once
  ``ack_batch`` messages wait for their ACK, or half the stream's credits (``batch``) are held
  by them (the next messages then come while the other half is handled), or ``ack_interval``
  seconds after the first of them waited. Each ACK frees as many credits on the stream.
- A message whose handler raised is released at once (after ``release_delay`` seconds).
- Stopping finishes the message in hand, closes the stream (no more come, and what is given back
  is not pushed again to this stream), acknowledges what waits, and gives back what was
  delivered and not handled. A stream that another one replaced (StreamReplaced) stops the same
  way, then raises. A failure (refused sign-in, the platform unreachable) closes the stream and
  raises without more requests: what was not acknowledged comes back.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from exchange_client.consumer import (
    IDLE_POLL_SECONDS,
    Handler,
    LeaseKeeper,
    Summary,
    log_failure,
)
from exchange_client.errors import StreamReplaced, StreamUnsupported
from exchange_client.messages import Message

if TYPE_CHECKING:
    from exchange_client.client import ExchangeClient

MAX_ACK = 100  # ids per ACK request
# consume()'s defaults (README): an ACK per 50 handled messages at most, half an ACK's 100 ids,
# so that a busy consumer sends one request where it handled 50; and within 20 ms, so that with
# little traffic a handled message holds its credit, and waits to be acknowledged, no longer
# than a short delay next to a request's own round trip.
ACK_BATCH = 50
ACK_INTERVAL_MS = 20


def ack_threshold(ack_batch: int, max_outstanding: int) -> int:
    """How many handled messages an ACK waits for: ``ack_batch``, or half the stream's credits
    when that is fewer, so that the next messages come while the other half is handled."""
    return max(1, min(ack_batch, max_outstanding // 2, MAX_ACK))


class Acknowledger:
    """A thread that acknowledges handled messages in batches: once ``batch`` of them wait, or
    ``interval`` seconds after the first one waited; ``on_acked`` is told which were."""

    def __init__(
        self,
        client: ExchangeClient,
        *,
        batch: int,
        interval: float,
        on_acked: Callable[[list[Message]], None] = lambda messages: None,
        on_error: Callable[[Exception], None] = lambda error: None,
    ) -> None:
        self.client = client
        self.batch = max(1, min(batch, MAX_ACK))
        self.interval = interval
        self.error: Exception | None = None
        self._on_acked = on_acked
        self._on_error = on_error
        self._waiting: list[Message] = []
        self._since = 0.0  # when the oldest waiting message began to wait
        self._closing = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="exchange-acknowledger", daemon=True)
        self._thread.start()

    def add(self, message: Message) -> None:
        with self._changed:
            if not self._waiting:
                self._since = time.monotonic()
            self._waiting.append(message)
            if len(self._waiting) in (1, self.batch):  # a timer to start, or a batch due
                self._changed.notify()

    def close(self, *, flush: bool) -> None:
        """With ``flush``, acknowledge what waits, then return (raising what the ACKs met);
        without, drop it and return at once (a request under way ends by itself)."""
        with self._changed:
            self._closing = True
            if not flush:
                self._waiting.clear()
            self._changed.notify()
        if flush:
            self._thread.join()
            if self.error is not None:
                raise self.error

    def _due(self) -> list[Message] | None:
        """The next ACK's messages, once due; None once closed with nothing left."""
        with self._changed:
            while True:
                now = time.monotonic()
                waited = now - self._since
                if self._waiting and (
                    self._closing or len(self._waiting) >= self.batch or waited >= self.interval
                ):
                    due, self._waiting = self._waiting[:MAX_ACK], self._waiting[MAX_ACK:]
                    self._since = now
                    return due
                if self._closing:
                    return None
                self._changed.wait(self.interval - waited if self._waiting else None)

    def _run(self) -> None:
        while (due := self._due()) is not None:
            try:
                self.client.ack(due)
            except Exception as error:
                self.error = error
                self._on_error(error)
                return
            self._on_acked(due)


class _StreamConsumer:
    def __init__(
        self,
        client: ExchangeClient,
        handler: Handler,
        keeper: LeaseKeeper,
        summary: Summary,
        *,
        batch: int,
        lease: int,
        release_delay: int,
        ack_batch: int,
        ack_interval: float,
    ) -> None:
        self.client = client
        self.handler = handler
        self.keeper = keeper
        self.summary = summary
        self.release_delay = release_delay
        self.failure: Exception | None = None
        self._held: dict[str, Message] = {}  # delivered and not settled: the newest copy of each
        self._lock = threading.Lock()
        self._inbox: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # None: look up
        self._stream = client.stream(max_outstanding=batch, lease=lease)
        self._acks = Acknowledger(
            client,
            batch=ack_threshold(ack_batch, batch),
            interval=ack_interval,
            on_acked=self._settled,
            on_error=self._fail,
        )
        self._reader = threading.Thread(
            target=self._read, name="exchange-stream-reader", daemon=True
        )

    def run(self) -> bool:
        """Until stopped; False when the platform has no stream (then long-poll on)."""
        self._reader.start()
        try:
            self._loop()
        except BaseException:
            self._shut(clean=False)
            raise
        failure = self.failure
        self._shut(clean=failure is None or isinstance(failure, StreamReplaced | StreamUnsupported))
        if isinstance(failure, StreamUnsupported):
            return False
        if failure is not None:
            raise failure
        return True

    def _loop(self) -> None:
        while not self.client.stopping.is_set() and self.failure is None:
            try:
                message_id = self._inbox.get(timeout=IDLE_POLL_SECONDS)
            except queue.Empty:
                continue
            if message_id is None:
                break  # the stream ended (closed by stop()) or something failed
            with self._lock:
                message = self._held[message_id]  # the newest copy: its receipt handle is valid
            try:
                self.handler(message)
            except Exception as error:
                log_failure(message, error)
                self.summary.failed += 1
                with self._lock:
                    message = self._held.pop(message_id)
                self.keeper.let_go(message)
                self.client.release([message], delay_seconds=self.release_delay)
            else:
                self.summary.handled += 1
                if self.failure is None:  # a failed session would only fail its ACK again
                    self._acks.add(message)

    def _read(self) -> None:
        try:
            for message in self._stream:
                with self._lock:
                    again = message.message_id in self._held
                    self._held[message.message_id] = message
                self.keeper.hold([message])
                if not again:
                    self._inbox.put(message.message_id)
        except Exception as error:
            self._fail(error)
        finally:
            self._inbox.put(None)

    def _fail(self, error: Exception) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = error
        self._inbox.put(None)

    def _settled(self, messages: list[Message]) -> None:
        with self._lock:
            for message in messages:
                self._held.pop(message.message_id, None)
        for message in messages:
            self.keeper.let_go(message)

    def _shut(self, *, clean: bool) -> None:
        self._stream.close()
        if not clean:
            self._acks.close(flush=False)
            return
        self._reader.join()
        self._acks.close(flush=True)
        with self._lock:
            unhandled, self._held = list(self._held.values()), {}
        for message in unhandled:
            self.keeper.let_go(message)
        if unhandled:
            self.client.release(unhandled)
            self.summary.given_back += len(unhandled)


def consume_stream(
    client: ExchangeClient,
    handler: Handler,
    keeper: LeaseKeeper,
    summary: Summary,
    *,
    batch: int,
    lease: int,
    release_delay: int,
    ack_batch: int,
    ack_interval: float,
) -> bool:
    """Handle the stream's messages until ``client.stopping`` (see the module's docstring);
    False, having handled nothing, when the platform has no stream."""
    consumer = _StreamConsumer(
        client,
        handler,
        keeper,
        summary,
        batch=batch,
        lease=lease,
        release_delay=release_delay,
        ack_batch=ack_batch,
        ack_interval=ack_interval,
    )
    return consumer.run()
