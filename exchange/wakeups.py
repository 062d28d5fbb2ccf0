"""Long polling: waiting receives sleep on an event that a LISTEN connection sets.

Each worker process keeps one connection that LISTENs on the exchange channel; a send NOTIFYs the
recipient's id when its transaction commits, and every receive of that recipient waiting in this
process wakes and claims again. Waiting holds no database connection and no transaction. If the
LISTEN connection is down (a database restart), waiters still poll every FALLBACK_POLL_SECONDS.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.conf import settings

from exchange.errors import TooManyWaiting
from exchange.queries import NOTIFY_CHANNEL
from platform_site.database import direct_connect

logger = logging.getLogger(__name__)

FALLBACK_POLL_SECONDS = 1.0
RECONNECT_SECONDS = 1.0
STOP_CHECK_SECONDS = 1.0


class Wakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[int, set[threading.Event]] = {}
        self._waiting = 0
        self._listener_pid: int | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()

    @contextmanager
    def expect(self, recipient_id: int) -> Iterator[threading.Event]:
        """An event set when a message for ``recipient_id`` may have arrived.

        Register it *before* looking for messages: a send that commits in between still wakes it.
        """
        self._ensure_listener()
        event = threading.Event()
        with self._lock:
            self._events.setdefault(recipient_id, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                events = self._events.get(recipient_id)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._events[recipient_id]

    @contextmanager
    def waiting_slot(self) -> Iterator[None]:
        """Count one waiting receive; TooManyWaiting above EXCHANGE_LONG_POLL_MAX_WAITING.

        A waiting receive occupies a server thread, so the bound keeps threads free for everyone
        else's ACKs and sends.
        """
        with self._lock:
            if self._waiting >= settings.EXCHANGE_LONG_POLL_MAX_WAITING:
                raise TooManyWaiting()
            self._waiting += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1

    def wake(self, recipient_id: int) -> None:
        with self._lock:
            for event in self._events.get(recipient_id, ()):
                event.set()

    def _ensure_listener(self) -> None:
        # A forked gunicorn worker inherits the flag but not the thread, hence the pid.
        if self._listener_pid == os.getpid():
            return
        with self._lock:
            if self._listener_pid == os.getpid():
                return
            self._listener_pid = os.getpid()
            self._stopping.clear()
            self.listening.clear()
            self._thread = threading.Thread(
                target=self._listen, name="exchange-listener", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """End the listener and close its connection (tests that drop their database need it)."""
        with self._lock:
            thread, self._thread, self._listener_pid = self._thread, None, None
            self._stopping.set()
        if thread is not None:
            thread.join(timeout=STOP_CHECK_SECONDS * 5)

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                with direct_connect(autocommit=True) as connection:
                    connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening.set()
                    while not self._stopping.is_set():
                        for notice in connection.notifies(timeout=STOP_CHECK_SECONDS):
                            try:
                                self.wake(int(notice.payload))
                            except ValueError:
                                logger.warning(
                                    "Ignored a notification with payload %r", notice.payload
                                )
            except psycopg.Error as error:
                self.listening.clear()
                logger.warning("Exchange listener lost its connection (%s); reconnecting", error)
                self._stopping.wait(RECONNECT_SECONDS)
        self.listening.clear()


wakeups = Wakeups()
