"""Long polling: waiting receives sleep on the event loop until a send may have reached them.

Each server process keeps one connection that LISTENs on the exchange channel, as a task on its
event loop; a send NOTIFYs the recipient's id when its transaction commits, and every receive of
that recipient waiting in this process wakes and is handed to Django again (platform_site.server).
Waiting holds no thread, no database connection and no transaction.

A receive takes a ticket *before* it looks for messages: a notification that arrives between that
look and the wait (it is processed on the event loop, the look runs in a thread) has moved the
ticket's counter on, and the wait returns at once. When the listener (re)connects, notifications
may have been missed: every waiting receive wakes and looks again. While it is down, waits look
every FALLBACK_POLL_SECONDS.

Push streams (exchange/streams.py) watch their recipient: they hear every notification for it,
kind by kind: "" a message may have arrived (a send, a release: payload "42"), "s" messages a
device held were settled (an ACK: credits came free for that device's stream: "s42:d:erp-1"), "x"
the recipient's streams changed hands (a stream opened: "x42"), "w" the recipient's webhook changed
(set up, turned on or off, deleted: "w42"; its streams look again, and the webhook deliverers
read the enabled webhooks again), and "*" anything may have happened (the listener reconnected).
Long polls hear only arrivals.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from prometheus_client import Counter

from exchange.queries import NOTIFY_CHANNEL
from platform_site.database import direct_connect_async

logger = logging.getLogger(__name__)

FALLBACK_POLL_SECONDS = 1.0
RECONNECT_SECONDS = 1.0
# Recipients share counters by id modulo this: a notification for another recipient of the same
# counter only makes a ticket's wait return early, and the receive look once more.
COUNTERS = 4096


waits = Counter(
    "platform_exchange_long_poll_waits",
    "Waits of long polls on the event loop, by how they ended: notified (a send to the recipient, "
    "or the listener's start), timed_out (waitSeconds, or the fallback poll, ran out)",
    ["ended"],
)
for _ended in ("notified", "timed_out"):
    waits.labels(_ended)


# Called with a notification's kind and, for "s", the device key whose messages were settled.
Watcher = Callable[[str, str | None], None]


@dataclass(frozen=True)
class Ticket:
    recipient_id: int
    epoch: int
    count: int


class Wakeups:
    """The process's listener and the receives waiting on it (one per process: ``wakeups``)."""

    def __init__(self) -> None:
        self._counts = [0] * COUNTERS
        self._epoch = 0  # moved on when the listener (re)connects
        self._waiting: dict[int, set[asyncio.Event]] = {}
        self._watchers: dict[int, set[Watcher]] = {}
        # Called with the recipient and kind of every notification (the webhook deliverer).
        self._watching_all: set[Callable[[int, str], None]] = set()
        self._listener: asyncio.Task[None] | None = None
        self.listening = threading.Event()

    def ticket(self, recipient_id: int) -> Ticket:
        """Taken before looking for ``recipient_id``'s messages, from any thread."""
        return Ticket(recipient_id, self._epoch, self._counts[recipient_id % COUNTERS])

    def _moved(self, ticket: Ticket) -> bool:
        return (self._epoch, self._counts[ticket.recipient_id % COUNTERS]) != (
            ticket.epoch,
            ticket.count,
        )

    async def arrival(self, ticket: Ticket, seconds: float) -> bool:
        """Return when a message for the ticket's recipient may have arrived since it was taken
        (True), or after ``seconds`` (False)."""
        self._ensure_listener()
        if self._moved(ticket):
            waits.labels("notified").inc()
            return True
        event = asyncio.Event()
        self._waiting.setdefault(ticket.recipient_id, set()).add(event)
        try:
            if not self.listening.is_set():
                seconds = min(seconds, FALLBACK_POLL_SECONDS)
            async with asyncio.timeout(seconds):
                await event.wait()
            waits.labels("notified").inc()
            return True
        except TimeoutError:
            waits.labels("timed_out").inc()
            return False
        finally:
            events = self._waiting.get(ticket.recipient_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiting[ticket.recipient_id]

    @property
    def waiting(self) -> int:
        """Receives waiting in this process now."""
        return sum(len(events) for events in self._waiting.values())

    def wake(self, recipient_id: int, kind: str = "", device_key: str | None = None) -> None:
        """Tell this process's waiters of ``recipient_id`` (on the event loop)."""
        if not kind:
            self._counts[recipient_id % COUNTERS] += 1
            for event in self._waiting.get(recipient_id, ()):
                event.set()
        for watcher in list(self._watchers.get(recipient_id, ())):
            watcher(kind, device_key)
        for watching in list(self._watching_all):
            watching(recipient_id, kind)

    def watch(self, recipient_id: int, watcher: Watcher) -> None:
        """Call ``watcher`` with the kind (and the device key, for "s") of every notification for
        ``recipient_id`` (on the event loop), until ``unwatch``."""
        self._ensure_listener()
        self._watchers.setdefault(recipient_id, set()).add(watcher)

    def unwatch(self, recipient_id: int, watcher: Watcher) -> None:
        watchers = self._watchers.get(recipient_id)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[recipient_id]

    def watch_all(self, watcher: Callable[[int, str], None]) -> None:
        """Call ``watcher`` with the recipient and kind of every notification (on the event loop;
        "*" with recipient 0 when the listener reconnected), until ``unwatch_all``."""
        self._ensure_listener()
        self._watching_all.add(watcher)

    def unwatch_all(self, watcher: Callable[[int, str], None]) -> None:
        self._watching_all.discard(watcher)

    def _wake_all(self) -> None:
        self._epoch += 1
        for events in self._waiting.values():
            for event in events:
                event.set()
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher("*", None)
        for watching in list(self._watching_all):
            watching(0, "*")

    def _dispatch(self, payload: str) -> None:
        kind = payload[:1] if payload[:1] in ("s", "x", "w") else ""
        recipient, _, device_key = payload[len(kind) :].partition(":")
        try:
            recipient_id = int(recipient)
        except ValueError:
            logger.warning("Ignored a notification with payload %r", payload)
            return
        self.wake(recipient_id, kind, device_key or None)

    def start(self) -> None:
        """Start listening on the running event loop (the server calls it as it starts)."""
        self._ensure_listener()

    def _ensure_listener(self) -> None:
        # One listener per event loop; a server (or a test's) that started a new loop starts anew.
        loop = asyncio.get_running_loop()
        if self._listener is None or self._listener.done() or self._listener.get_loop() is not loop:
            self._listener = loop.create_task(self._listen(), name="exchange-listener")

    async def _listen(self) -> None:
        failing = False  # logged once when the connection is lost, once when it is back
        while True:
            try:
                async with await direct_connect_async(autocommit=True) as connection:
                    await connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening.set()
                    if failing:
                        logger.warning("Exchange listener listens again")
                        failing = False
                    self._wake_all()  # what was sent before LISTEN took effect
                    async for notice in connection.notifies():
                        self._dispatch(notice.payload)
            except psycopg.Error as error:
                if not failing:
                    logger.warning("Exchange listener lost its connection (%s)", error)
                    failing = True
            finally:
                self.listening.clear()
            await asyncio.sleep(RECONNECT_SECONDS)


wakeups = Wakeups()
