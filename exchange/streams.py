"""Push streams: an adapter's messages sent as they arrive, as Server-Sent Events, paced by
credits (GET /api/exchange/messages/stream; docs/exchange.md, "Push streams").

The view opens a stream in a thread (its row in exchange_stream, a place among
EXCHANGE_STREAM_MAX_CONNECTIONS) and answers with an ``EventStream``, whose events the server sends
from the event loop (platform_site/server.py). The stream then holds no thread and no database
connection: it waits on the loop for a notification about its recipient (exchange/wakeups.py: a
message arrived, messages were settled, its streams changed hands), a lease of its device to run
out, the heartbeat, the access token's expiry or the process's stop. Each wake runs a *round* in
one of Django's threads: one statement claims as many messages as the credits allow
(maxOutstanding less what the device holds unsettled), and only while the stream still owns its
row (a newer stream of the same device took it: REPLACED).

A session that ends stops deliveries at once: whatever a round claimed is checked against the
session before it is sent (and given back when the session has ended), and a sweep of all the
process's streams asks PostgreSQL every CHECK_SECONDS which of their sessions ended, so that an
idle stream ends within that too. Once a heartbeat the same sweep keeps the rows of the process's
streams alive (a row whose process died stops counting ROW_HEARTBEATS heartbeats later), in the
statement that names their recipients with a message available now: messages that became so
without a notification (a release's delay, another device's lease that ran out) wake their streams
within a heartbeat, one statement per process rather than a claim per stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.http import StreamingHttpResponse
from django.utils import timezone

from accounts import liveness
from accounts.authentication import AuthenticatedRequest
from accounts.selectors import session_authenticate, sessions_ended
from exchange import metrics
from exchange.errors import StreamsBusy
from exchange.services.messages import Delivery
from exchange.services.streams import (
    stream_claim,
    stream_close,
    stream_give_back,
    stream_open,
    streams_hold,
)
from exchange.wakeups import wakeups
from platform_site.deferral import Places
from platform_site.deferral import stopping as stopping_of
from platform_site.errors import ApplicationError, ServerBusy

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # how often a process asks which of its streams' sessions ended
ROW_HEARTBEATS = 3  # a stream's row outlives its last renewal by this many heartbeats

END_DETAILS = {
    "TOKEN_EXPIRED": "The access token expired: refresh it and open the stream again.",
    "TOKEN_REVOKED": "The session ended (a logout, a password change, an administrator): sign in "
    "again.",
    "REPLACED": "Another stream opened for this adapter and X-Device-ID.",
    "SHUTDOWN": "The server is stopping: open the stream again (another server will answer).",
    "WEBHOOK_ACTIVE": "This adapter's webhook is enabled: its messages are pushed there.",
}

places = Places(metrics.streams_open, place="stream")


class Stream:
    """One open stream: its credits, its wakes and its events (an async iterator of bytes)."""

    def __init__(
        self,
        request: AuthenticatedRequest,
        *,
        max_outstanding: int,
        lease_seconds: int,
        stopping: asyncio.Event,
    ) -> None:
        self.stream_id = uuid.uuid4()
        self.adapter_id: int = request.user.pk
        self.claims = request.auth.claims
        self.device = request.auth.device
        self.session_id = request.auth.session.pk
        self.max_outstanding = max_outstanding
        self.lease_seconds = lease_seconds
        self.stopping = stopping
        self.first = True  # the first claim takes what the device held first, as a receive
        self.check_session = False  # the sweep saw the session end: the next round ends it
        self.woken = asyncio.Event()
        self.rounds = 0  # how many times it has looked for messages (each claim done)
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.events()

    async def events(self) -> AsyncIterator[bytes]:
        self.loop = asyncio.get_running_loop()
        registry.enter(self)
        on_stop = asyncio.ensure_future(self._wake_on_stop())
        code: str | None = None
        try:
            heartbeat = settings.EXCHANGE_STREAM_HEARTBEAT_SECONDS
            now = time.monotonic()
            beat_at = now + heartbeat
            token_ends_at = now + (self.claims.expires_at - timezone.now()).total_seconds()
            while True:
                self.woken.clear()
                try:
                    outcome = await asyncio.to_thread(self._round)
                except Exception:
                    # The database is away: the stream closes without an end, as a lost
                    # connection would, and the client opens it again.
                    logger.warning("A stream's round failed; closing it", exc_info=True)
                    return
                self.rounds += 1
                if isinstance(outcome, str):
                    code = outcome
                    break
                deliveries, lease_ends_at = outcome
                if deliveries:
                    metrics.streamed.inc(len(deliveries))
                    yield b"".join(map(_message_event, deliveries))
                while True:  # until something calls for another round
                    now = time.monotonic()
                    woken = await self._woken(min(beat_at, token_ends_at, lease_ends_at) - now)
                    now = time.monotonic()
                    if self.stopping.is_set():
                        code = "SHUTDOWN"
                    elif now >= token_ends_at:
                        code = "TOKEN_EXPIRED"
                    if code is not None:
                        break
                    if now >= beat_at:
                        beat_at = now + heartbeat
                        yield b": keep-alive\n\n"
                        continue
                    if woken or now >= lease_ends_at:
                        break
                if code is not None:
                    break
            metrics.stream_ends.labels(code).inc()
            yield _end_event(code)
        finally:
            if code is None:
                metrics.stream_ends.labels("CLIENT_GONE").inc()
            on_stop.cancel()
            registry.leave(self)

    async def _woken(self, seconds: float) -> bool:
        """Wait for a wake at most ``seconds``: whether one came."""
        try:
            async with asyncio.timeout(max(seconds, 0)):
                await self.woken.wait()
        except TimeoutError:
            return False
        return True

    async def _wake_on_stop(self) -> None:
        await self.stopping.wait()
        self.woken.set()

    def wake(self, kind: str, device_key: str | None) -> None:
        """A notification for the stream's recipient (exchange.wakeups): look again, unless it
        settled another device's messages (they free none of this stream's credits)."""
        if kind == "s" and device_key != self.device.key:
            return
        self.woken.set()

    def _round(self) -> str | tuple[list[Delivery], float]:
        """In a thread: claim what the credits allow and check the session; the deliveries and
        when the earliest lease the device holds runs out, or the end code."""
        try:
            claimed = stream_claim(
                stream_id=self.stream_id,
                adapter_id=self.adapter_id,
                device_key=self.device.key,
                max_outstanding=self.max_outstanding,
                lease_seconds=self.lease_seconds,
                first=self.first,
            )
            if claimed.pushed:
                return "WEBHOOK_ACTIVE"
            if not claimed.owned:
                return "REPLACED"
            self.first = False
            if claimed.deliveries or self.check_session:
                refusal = self._refusal()
                if refusal is not None:
                    if claimed.deliveries:
                        stream_give_back(
                            adapter_id=self.adapter_id,
                            device_key=self.device.key,
                            deliveries=claimed.deliveries,
                        )
                    return refusal
            expiries = [claimed.next_expiry] if claimed.next_expiry is not None else []
            if claimed.deliveries:
                expiries.append(self.lease_seconds)
            lease_ends_at = time.monotonic() + min(expiries) if expiries else float("inf")
            return claimed.deliveries, lease_ends_at
        finally:
            close_old_connections()

    def _refusal(self) -> str | None:
        """Why the stream may deliver no more (an end code), or None: the request's own rules,
        applied now."""
        if self.check_session:
            # PostgreSQL said the session ended (the sweep): read it from there, not from a copy
            # this process remembers (accounts.liveness).
            liveness.forget(self.session_id)
            self.check_session = False
        if self.claims.expires_at <= timezone.now():
            return "TOKEN_EXPIRED"
        try:
            session_authenticate(claims=self.claims, device=self.device)
        except ApplicationError as error:
            return "TOKEN_EXPIRED" if error.code == "TOKEN_EXPIRED" else "TOKEN_REVOKED"
        return None

    def close(self) -> None:
        """The response is closed (in a thread, once the stream ended or its client went away):
        its row and its place go back."""
        if self.closed:
            return
        self.closed = True
        try:
            stream_close(stream_id=self.stream_id)
        finally:
            places.give_back()
            if self.loop is not None and not self.loop.is_closed():
                # In case the events never reached their end (nothing else removes it then).
                self.loop.call_soon_threadsafe(registry.leave, self)


class EventStream(StreamingHttpResponse):
    def __init__(self, stream: Stream) -> None:
        super().__init__(stream, content_type="text/event-stream")
        self["Cache-Control"] = "no-store"
        self["X-Accel-Buffering"] = "no"  # nginx sends each event as it comes


def stream_response(
    request: AuthenticatedRequest, *, max_outstanding: int, lease_seconds: int
) -> EventStream:
    """Open a stream for the request's adapter and device (in the view's thread). StreamsBusy
    (503 SERVER_BUSY) when this process holds EXCHANGE_STREAM_MAX_CONNECTIONS streams, or cannot
    hold any (a server without an event loop, as Django's test client)."""
    stopping = stopping_of(request)
    if stopping is None:
        raise StreamsBusy()
    try:
        places.take(settings.EXCHANGE_STREAM_MAX_CONNECTIONS)
    except ServerBusy:
        raise StreamsBusy() from None
    stream = Stream(
        request, max_outstanding=max_outstanding, lease_seconds=lease_seconds, stopping=stopping
    )
    try:
        stream_open(
            stream_id=stream.stream_id,
            adapter_id=stream.adapter_id,
            device_key=stream.device.key,
            ttl=_row_seconds(),
        )
    except BaseException:
        places.give_back()
        raise
    return EventStream(stream)


def _row_seconds() -> int:
    return int(settings.EXCHANGE_STREAM_HEARTBEAT_SECONDS * ROW_HEARTBEATS)


def _message_event(delivery: Delivery) -> bytes:
    # The delivery's JSON is one line (PostgreSQL writes jsonb and to_json without line breaks).
    return f"event: message\nid: {delivery.message_id}\ndata: {delivery.json}\n\n".encode()


def _end_event(code: str) -> bytes:
    data = json.dumps({"code": code, "detail": END_DETAILS[code]}, separators=(",", ":"))
    return f"event: end\ndata: {data}\n\n".encode()


class Registry:
    """The streams this process holds, and the sweep that keeps their rows and checks their
    sessions (one task per event loop, while there are streams)."""

    def __init__(self) -> None:
        self.streams: set[Stream] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def enter(self, stream: Stream) -> None:
        self.streams.add(stream)
        wakeups.watch(stream.adapter_id, stream.wake)
        loop = asyncio.get_running_loop()
        if self._sweeper is None or self._sweeper.done() or self._sweeper.get_loop() is not loop:
            self._sweeper = loop.create_task(self._sweep(), name="exchange-stream-sweep")

    def leave(self, stream: Stream) -> None:
        if stream in self.streams:
            self.streams.discard(stream)
            wakeups.unwatch(stream.adapter_id, stream.wake)

    async def _sweep(self) -> None:
        held_at = time.monotonic()
        while self.streams:
            await asyncio.sleep(CHECK_SECONDS)
            streams = list(self.streams)
            try:
                ended = await asyncio.to_thread(
                    _in_thread, sessions_ended, {stream.session_id for stream in streams}
                )
                for stream in streams:
                    if stream.session_id in ended:
                        stream.check_session = True
                        stream.woken.set()
                if time.monotonic() - held_at >= settings.EXCHANGE_STREAM_HEARTBEAT_SECONDS:
                    held_at = time.monotonic()
                    ids = [stream.stream_id for stream in streams]
                    available = await asyncio.to_thread(
                        _in_thread, streams_hold, stream_ids=ids, ttl=_row_seconds()
                    )
                    for stream in streams:
                        if stream.adapter_id in available:
                            stream.woken.set()
            except Exception:
                # The database is away: the streams' own rounds fail and end them; try again.
                logger.warning("The streams' sweep failed", exc_info=True)


def _in_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


registry = Registry()
