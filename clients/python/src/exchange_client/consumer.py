"""The at-least-once consume loop: receive, handle, acknowledge, in that order, until stopped.

It runs on the push stream (exchange_client.stream_consumer) unless told to long-poll, or
``until_empty`` asks for a receive that can come back empty, or the platform has no stream.
Long polling:

- Each receive leases a batch; the handler is called once per message, in order.
- A message whose handler returned is acknowledged, in one ACK per batch, before the next
  receive (a device id's unacknowledged messages would come back on it). When the whole batch
  was handled, that ACK also receives the next batch: one request per batch.
- A message whose handler raised is released (after ``release_delay`` seconds): it comes back,
  one delivery later, and after the platform's maximum deliveries it goes to the dead letters.
- While a slow handler runs, a thread extends the leases of the messages still held, so that no
  other instance receives them meanwhile.
- SIGTERM and SIGINT (or ExchangeClient.stop()) let the message in hand finish, give back the
  rest of the batch at once (to this device id's next receive, or any instance's), and return.
  A second signal is the default one (Ctrl-C twice interrupts).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Literal

from exchange_client.errors import ExchangeError
from exchange_client.messages import Message

if TYPE_CHECKING:
    from exchange_client.client import ExchangeClient

logger = logging.getLogger("exchange_client")

Handler = Callable[[Message], object]


class Release(Exception):
    """Raised by a handler to give its message back, to come again later, without a traceback
    in the log (any other exception releases it too, logged with its traceback)."""


# A long poll is made of slices of at most this many seconds: a stop waits no longer than that.
IDLE_POLL_SECONDS = 5


@dataclass
class Summary:
    """What a consume() did: messages handled (and acknowledged), failed (released to come
    back), and given back unhandled when it stopped."""

    handled: int = 0
    failed: int = 0
    given_back: int = 0


class LeaseKeeper:
    """A thread that extends the leases of the messages the loop holds and has not yet
    acknowledged or released: those with less than half a lease left, every quarter of a lease."""

    def __init__(self, client: ExchangeClient, lease: int) -> None:
        self.client = client
        self.lease = lease
        self._held: dict[str, tuple[Message, float]] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="exchange-lease-keeper", daemon=True)
        self._thread.start()

    def hold(self, messages: Sequence[Message]) -> None:
        expires = time.monotonic() + self.lease
        with self._lock:
            self._held.update((m.message_id, (m, expires)) for m in messages)

    def let_go(self, message: Message) -> None:
        with self._lock:
            self._held.pop(message.message_id, None)

    def close(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.lease / 4):
            now = time.monotonic()
            with self._lock:
                due = [m for m, expires in self._held.values() if expires - now < self.lease / 2]
            if not due:
                continue
            try:
                results = self.client.extend(due, self.lease)
            except Exception:
                logger.warning("Extending %d leases failed", len(due), exc_info=True)
                continue
            expires = time.monotonic() + self.lease
            with self._lock:
                for message in due:
                    if results.get(message.message_id) == "extended" and (
                        message.message_id in self._held
                    ):
                        self._held[message.message_id] = (message, expires)
            lost = [mid for mid, status in results.items() if status != "extended"]
            if lost:
                logger.warning("Leases lost while handling: %s", ", ".join(lost))


def log_failure(message: Message, error: Exception) -> None:
    logger.warning(
        "Handler failed on %s (delivery %d): %s; releasing it",
        message.message_id,
        message.delivery_count,
        error,
        exc_info=not isinstance(error, Release),
    )


def stop_on_signals(client: ExchangeClient) -> Callable[[], None]:
    """SIGTERM and SIGINT stop the loop (main thread only); returns what puts them back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {number: signal.getsignal(number) for number in signals}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    def stop(number: int, frame: FrameType | None) -> None:
        logger.info("Signal %d: finishing the message in hand, then stopping", number)
        client.stop()
        restore()  # a second signal acts as it did before

    for number in signals:
        signal.signal(number, stop)
    return restore


def consume(
    client: ExchangeClient,
    handler: Handler,
    *,
    batch: int = 10,
    wait: int = 20,
    lease: int = 30,
    until_empty: bool = False,
    release_delay: int = 0,
    handle_signals: bool = True,
    transport: Literal["stream", "poll"] = "stream",
    ack_batch: int = 50,
    ack_interval_ms: int = 20,
) -> Summary:
    """Call ``handler`` on each message of the queue, leased ``lease`` seconds, holding up to
    ``batch`` at a time, until stopped (or, with ``until_empty``, until a receive finds
    nothing), then sign out (ExchangeClient.logout: the session ends with the loop, so restarts
    leave none behind; a later call signs in again). The handler must be idempotent: delivery is
    at least once.

    ``transport="stream"``: on the push stream (``batch`` its maxOutstanding, 1..1000), ACKs
    sent by ``ack_batch`` or every ``ack_interval_ms``, whichever comes first (see
    exchange_client.stream_consumer); where the platform has no stream, and with
    ``until_empty`` (a stream never says the queue is empty), long polling.
    ``transport="poll"``: long polling, receives of up to ``batch`` (1..100) messages, one ACK
    per batch (which receives the next batch when the whole batch was handled).

    ``wait`` (0..20) is how long a receive waits for a message when the queue is empty, in
    requests of at most IDLE_POLL_SECONDS (5): the platform answers at once when a message
    comes, else after that; the loop asks again at once, so an idle consumer costs a request
    every 5 seconds, and a stop() is seen within 5. ``wait=0`` does not wait: with
    ``until_empty`` the first empty receive ends the loop; without it, an idle queue is asked as
    fast as it answers.
    """
    if transport not in ("stream", "poll"):
        raise ValueError(f"transport must be 'stream' or 'poll', not {transport!r}")
    try:
        return _consume(
            client,
            handler,
            batch=batch,
            wait=wait,
            lease=lease,
            until_empty=until_empty,
            release_delay=release_delay,
            handle_signals=handle_signals,
            transport=transport,
            ack_batch=ack_batch,
            ack_interval_ms=ack_interval_ms,
        )
    finally:
        try:
            client.logout()
        except ExchangeError as error:
            logger.info("Signing out failed: %s", error)


def _consume(
    client: ExchangeClient,
    handler: Handler,
    *,
    batch: int,
    wait: int,
    lease: int,
    until_empty: bool,
    release_delay: int,
    handle_signals: bool,
    transport: Literal["stream", "poll"],
    ack_batch: int,
    ack_interval_ms: int,
) -> Summary:
    summary = Summary()
    client.stopping.clear()
    with _running(client, lease, handle_signals) as keeper:
        if transport == "stream" and not until_empty:
            from exchange_client.stream_consumer import consume_stream

            supported = consume_stream(
                client,
                handler,
                keeper,
                summary,
                batch=batch,
                lease=lease,
                release_delay=release_delay,
                ack_batch=ack_batch,
                ack_interval=ack_interval_ms / 1000,
            )
            if supported:
                return summary
            logger.info("The platform has no push stream: long polling")
        _poll(
            client,
            handler,
            keeper,
            summary,
            (min(batch, 100), min(wait, IDLE_POLL_SECONDS), lease),
            until_empty,
            release_delay,
        )
    return summary


@contextmanager
def _running(client: ExchangeClient, lease: int, handle_signals: bool) -> Iterator[LeaseKeeper]:
    """What a consume holds while it runs: the thread that extends its leases, and (with
    ``handle_signals``) SIGTERM and SIGINT; both let go of however it ends."""
    keeper = LeaseKeeper(client, lease)
    restore = stop_on_signals(client) if handle_signals else (lambda: None)
    try:
        yield keeper
    finally:
        keeper.close()
        restore()


def _poll(
    client: ExchangeClient,
    handler: Handler,
    keeper: LeaseKeeper,
    summary: Summary,
    receiving: tuple[int, int, int],
    until_empty: bool,
    release_delay: int,
) -> None:
    """Receive, handle, ACK, until stopped or, with ``until_empty``, until a receive finds
    nothing. ``receiving``: each receive's max, wait and lease seconds."""
    following: list[Message] | None = None  # what the last batch's ACK received
    while not client.stopping.is_set():
        messages = following if following is not None else client.receive(*receiving)
        following = None
        if messages:
            following = _handle(
                client, handler, messages, keeper, summary, release_delay, receiving
            )
        elif until_empty:
            break
    if following:  # received by the last ACK as the loop was stopped: given back at once
        client.release(following)
        summary.given_back += len(following)


def _handle(
    client: ExchangeClient,
    handler: Handler,
    messages: list[Message],
    keeper: LeaseKeeper,
    summary: Summary,
    release_delay: int,
    receiving: tuple[int, int, int],
) -> list[Message] | None:
    """One batch: handled ones acknowledged, failed ones released, the rest given back. When
    every message was handled and the loop goes on, the ACK receives the next batch (``receiving``:
    max, wait and lease seconds), which this returns; otherwise None."""
    following: list[Message] | None = None
    keeper.hold(messages)
    done: list[Message] = []
    failed: list[Message] = []
    try:
        for message in messages:
            if client.stopping.is_set():
                break
            try:
                handler(message)
            except Exception as error:
                log_failure(message, error)
                failed.append(message)
            else:
                done.append(message)
    finally:
        finished = {m.message_id for m in done} | {m.message_id for m in failed}
        unhandled = [m for m in messages if m.message_id not in finished]
        # Handled messages stay held until the ACK below: let go earlier, their leases could run
        # out while the rest of the batch is handled, and another instance handle them again.
        for message in messages:
            keeper.let_go(message)
        if done and not failed and not unhandled and not client.stopping.is_set():
            _, following = client.ack_and_receive(done, *receiving)
        elif done:
            client.ack(done)
        if failed:
            client.release(failed, delay_seconds=release_delay)
        if unhandled:
            client.release(unhandled)
        summary.handled += len(done)
        summary.failed += len(failed)
        summary.given_back += len(unhandled)
    return following
