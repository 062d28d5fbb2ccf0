"""Whether PostgreSQL answers, as this process last saw it: while it does not, a request that
needs it fails at once; once it does again, the next request uses it.

The psycopg pool alone does neither (docs/operations.md, "When PostgreSQL goes away"). A request
waits for a pooled connection as long as the pool's checkout timeout, 10 s, before its 503; and
the pool reconnects with doubling waits, so after a restart requests kept failing for seconds.
So the backend (platform_site.db.base) waits for the pool in short slices, and when a slice runs
out it asks the server directly, with a connection of its own: refused means down, for every
thread, and then requests ask the server directly before they wait at all. The pool itself gives
up reconnecting at once (its reconnect_timeout is 0, settings.py), so the first request after the
server is back makes it connect again, without a back-off left over from the outage.

The health check's answers count too: health, readiness and the request path agree.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

logger = logging.getLogger(__name__)

# How long one probe's answer stands for every thread of the process.
PROBE_INTERVAL_SECONDS = 0.1


class Availability:
    def __init__(self) -> None:
        self._down = False
        self._checked_at = -PROBE_INTERVAL_SECONDS
        self._probing = threading.Lock()
        self._flipping = threading.Lock()  # one log line per change, though threads observe at once

    @property
    def down(self) -> bool:
        return self._down

    def observed(self, *, answers: bool) -> None:
        """A direct connection to the server worked, or failed (the health check's, a probe's)."""
        with self._flipping:
            if answers == self._down:
                if answers:
                    logger.warning("PostgreSQL answers again")
                else:
                    logger.warning("PostgreSQL does not answer: requests that need it get 503")
            self._down = not answers
            self._checked_at = time.monotonic()

    def answers(self, connect: dict[str, Any]) -> bool:
        """Whether the server accepts a connection now (``connect``: psycopg.connect's
        arguments). One thread at a time asks, once per PROBE_INTERVAL_SECONDS; the others take
        the last answer."""
        fresh = time.monotonic() - self._checked_at < PROBE_INTERVAL_SECONDS
        if fresh or not self._probing.acquire(blocking=False):
            return not self._down
        try:
            try:
                psycopg.connect(**connect).close()
            except psycopg.Error as error:
                logger.info("PostgreSQL probe failed: %s", error)
                self.observed(answers=False)
            else:
                self.observed(answers=True)
            return not self._down
        finally:
            self._probing.release()


availability = Availability()
