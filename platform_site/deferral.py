"""Deferred answers: what a view that may wait (a long poll) and the layers around it see of
the server's passes (platform_site/server.py).

A view calls ``defer()`` with the answer it would give if its wait ran out; under the platform's
server the request then waits on the event loop and comes back through Django, where
``resumed()`` gives the view what it left, ``kept()`` what the first pass kept (its rate-limit
usage) and ``arrived_at()`` when the request arrived. Under a server that cannot wait (Django's
test client) there is no Pass: ``defer()`` answers at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import Counter, Gauge
from rest_framework.request import Request

from platform_site.errors import ServerBusy

# The request's Pass in the WSGI environ (request.META); only this server puts one there.
PASS_KEY = "platform.pass"  # noqa: S105 (a key, not a password)

waiting_requests = Gauge(
    "platform_http_requests_waiting",
    "Requests the server holds on its event loop until they can be answered (long polls)",
    multiprocess_mode="livesum",
)
# What a process refuses with 503 SERVER_BUSY because it holds as many as it may: the alert
# "out of room for waiting consumers" (deploy/observability) reads it.
busy_refusals = Counter(
    "platform_server_busy_refusals",
    "Requests refused with 503 SERVER_BUSY because their server process held as many as it may, "
    "by place: long_poll (EXCHANGE_LONG_POLL_MAX_WAITING) or stream "
    "(EXCHANGE_STREAM_MAX_CONNECTIONS)",
    ["place"],
)
PLACES = ("long_poll", "stream")
for _place in PLACES:
    busy_refusals.labels(_place)

Wake = Callable[[float], Awaitable[object]]


@dataclass
class Deferral:
    wake: Wake  # awaited with the seconds left; returns when the answer may have changed
    until: float  # time.monotonic() at which the last pass answers whatever it has
    state: Any


@dataclass
class Pass:
    """One request's passes through Django, as the views and middleware see it."""

    waiting: Places
    stopping: asyncio.Event  # set when the process begins to stop (platform_site.server)
    arrived: datetime = field(default_factory=timezone.now)
    number: int = 0
    deferral: Deferral | None = None  # set by this pass's view when it defers
    until: float | None = None  # the first deferral's deadline, which later passes keep
    state: Any = None
    holding: bool = False
    # What a pass keeps for the later ones (the rate-limit usage the first counted).
    kept: dict[str, Any] = field(default_factory=dict)
    # The first pass's request id and start, so that a deferred request is logged once, whole.
    request_id: str | None = None
    started: float | None = None


def defer(
    request: HttpRequest,
    answer: HttpResponse,
    *,
    seconds: float,
    wake: Wake,
    limit: int,
    state: Any = None,
) -> HttpResponse:
    """``answer`` now, or after waiting up to ``seconds`` from the first pass for ``wake``.

    ``limit`` is how many requests this process may hold waiting at once; beyond it, ServerBusy
    (503). Under a server that cannot wait (Django's test client) ``answer`` is the answer.
    """
    current: Pass | None = request.META.get(PASS_KEY)
    if current is None:
        return answer
    if current.until is None:
        current.until = time.monotonic() + seconds
    until = current.until
    if until <= time.monotonic():
        return answer
    if not current.holding:
        current.waiting.take(limit)
        current.holding = True
    current.deferral = Deferral(wake=wake, until=until, state=state)
    return answer


def resumed(request: HttpRequest | Request | None) -> tuple[bool, Any]:
    """Whether this pass resumes a deferred request, and the state its last pass left (a view
    outside a request, as drf-spectacular builds one, resumes nothing)."""
    current: Pass | None = request.META.get(PASS_KEY) if request is not None else None
    if current is None or current.number == 1:
        return False, None
    return True, current.state


def kept(request: HttpRequest | Request) -> dict[str, Any] | None:
    """What this request's passes keep for the later ones (None outside this server)."""
    current: Pass | None = request.META.get(PASS_KEY)
    return current.kept if current is not None else None


def stopping(request: HttpRequest | Request) -> asyncio.Event | None:
    """Set when this request's server process begins to stop (None outside this server)."""
    current: Pass | None = request.META.get(PASS_KEY)
    return current.stopping if current is not None else None


def arrived_at(request: HttpRequest | Request) -> datetime | None:
    """When a resumed request arrived (None on a first pass: now)."""
    current: Pass | None = request.META.get(PASS_KEY)
    return current.arrived if current is not None and current.number > 1 else None


class Places:
    """What this process holds at once (waiting requests, open streams), bounded by the ``limit``
    each taker names, and counted in ``gauge``; refusals counted under ``place`` (PLACES)."""

    def __init__(self, gauge: Gauge, *, place: str) -> None:
        self._lock = threading.Lock()
        self.gauge = gauge
        self.refused = busy_refusals.labels(place)
        self.count = 0

    def take(self, limit: int) -> None:
        """One more place, or ServerBusy (503) when ``limit`` are taken."""
        with self._lock:
            if self.count >= limit:
                self.refused.inc()
                raise ServerBusy()
            self.count += 1
        self.gauge.inc()

    def give_back(self) -> None:
        with self._lock:
            self.count -= 1
        self.gauge.dec()
