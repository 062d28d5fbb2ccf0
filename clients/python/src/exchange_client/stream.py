"""The push stream: ``GET /api/exchange/messages/stream``, messages as Server-Sent Events.

- The platform pushes each message as an event ``message`` (its data: the JSON object a receive
  answers per message), up to ``maxOutstanding`` messages delivered and not settled (ACKed,
  released, or whose lease ran out): each settled message lets one more come.
- A comment (``: keep-alive``) comes every 15 seconds when nothing else does: a connection that
  carries nothing for ``idle_timeout`` seconds is taken for dead and opened again.
- Before it closes the stream, the platform says why in an event ``end``: ``TOKEN_EXPIRED``
  (refresh, reconnect), ``TOKEN_REVOKED`` (sign in again, reconnect), ``SHUTDOWN`` (reconnect
  after the retry policy's back-off), ``REPLACED`` (another stream opened with this device id:
  StreamReplaced, no reconnection), ``WEBHOOK_ACTIVE`` (the adapter's messages are pushed to its
  webhook: Conflict, no reconnection).
- A connection that drops is opened again under the retry policy (back-off, jitter); once
  connections have failed for the policy's ``give_up_after`` in a row, Unavailable.
- What a stream delivered and nobody settled comes back at once, ``redelivered``, to the same
  device id's next stream or receive.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Generator, Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx

from exchange_client.errors import (
    Conflict,
    ExchangeError,
    StreamReplaced,
    StreamUnsupported,
    Unavailable,
)
from exchange_client.messages import Message
from exchange_client.retries import Deadline
from exchange_client.session import Session, Tokens

logger = logging.getLogger("exchange_client")

STREAM_PATH = "/api/exchange/messages/stream"
# The platform's keep-alive comes every 15 s by default (EXCHANGE_STREAM_HEARTBEAT_SECONDS): three
# missed ones mean a dead connection. A platform set to a longer heartbeat needs a longer one.
IDLE_TIMEOUT = 45.0
_RENEWING_ENDS = {"TOKEN_EXPIRED": True, "TOKEN_REVOKED": False}  # code -> refresh (or sign in)
_LINE_END = re.compile(rb"\r\n|\r|\n")


class ServerSentEvent(NamedTuple):
    """An event as the wire carried it: its type (``message`` when it named none), its data
    lines joined with LF, and the id its own block carried (None when it had none)."""

    event: str
    data: str
    id: str | None


class EventParser:
    """Server-Sent Events (the WHATWG HTML standard's ``text/event-stream``) from bytes as they
    arrive, cut anywhere: lines end in CRLF, LF or CR; an empty line dispatches the event;
    ``data`` lines join with LF; comments (``:``), ``retry`` and unknown fields are skipped; an
    event without data is not dispatched."""

    def __init__(self) -> None:
        self._buffer = b""
        self._after_cr = False  # a CR ended the last chunk: an LF starting the next belongs to it
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if not chunk:
            return []
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        *lines, self._buffer = _LINE_END.split(self._buffer + chunk)
        events: list[ServerSentEvent] = []
        for raw in lines:
            line = raw.decode("utf-8", errors="replace")
            if not self._started:
                self._started = True
                line = line.removeprefix("\ufeff")
            if not line:
                if self._data:
                    events.append(
                        ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
                    )
                self._event, self._data, self._id = "", [], None
                continue
            field, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if field == "event":
                self._event = value
            elif field == "data":
                self._data.append(value)
            elif field == "id" and "\0" not in value:
                self._id = value
        return events


@dataclass(frozen=True)
class StreamEvent:
    """An event of the stream: ``event`` (``message``, ``end``...), ``id`` (a message's id),
    ``data`` (its JSON: a message's object, or an end's ``{"code", "detail"}``), and for a
    message event the ``message``."""

    event: str
    id: str | None
    data: Any
    message: Message | None = None

    @property
    def code(self) -> str | None:
        """An end event's code."""
        return str(self.data.get("code")) if isinstance(self.data, dict) else None

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, "id": self.id, "data": self.data}


def _parsed(sse: ServerSentEvent) -> StreamEvent:
    try:
        data = json.loads(sse.data)
        message = Message.from_json(data) if sse.event == "message" else None
    except (ValueError, KeyError, TypeError) as error:
        if sse.event not in ("message", "end"):
            return StreamEvent(sse.event, sse.id, sse.data)
        detail = f"event {sse.event!r} with data {sse.data[:200]!r}: {error!r}"
        raise ExchangeError(None, "STREAM_MALFORMED", detail) from error
    return StreamEvent(sse.event, sse.id, data, message)


def _is_event_stream(response: httpx.Response) -> bool:
    content_type = str(response.headers.get("Content-Type", ""))
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


def _shut_down(response: httpx.Response) -> None:
    """End a streaming answer's connection from any thread: a read blocked on it returns (a
    socket closed under a blocked read would wait for the next byte), and the platform sees
    the stream end at once."""
    network = response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class MessageStream:
    """The messages the platform pushes, as they come: iterate it for ``Message``s, or
    ``events()`` for every event (messages and ends). It reconnects by itself (see the module's
    docstring) and ends only once closed: ``close()`` or ``ExchangeClient.stop()``, from any
    thread (a signal handler too). Settle each message with ``ack``, ``release`` or ``extend``
    of the client: unsettled ones hold the stream's credits.

    Raises StreamReplaced (another stream took this device id's place), StreamUnsupported (the
    platform has none), AuthenticationError (signing in again was refused), Unavailable, or the
    ExchangeError that refused opening it (a 400 for a ``max_outstanding`` outside 1..1000).
    """

    def __init__(
        self,
        session: Session,
        *,
        max_outstanding: int = 100,
        lease: int = 30,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.max_outstanding = max_outstanding
        self.lease = lease
        self.path = f"{STREAM_PATH}?maxOutstanding={max_outstanding}&leaseSeconds={lease}"
        self._session = session
        self._timeout = httpx.Timeout(session.timeout, read=idle_timeout)
        self._closed = threading.Event()
        # Reentrant: close() may run in a signal handler that interrupted this very thread.
        self._lock = threading.RLock()
        self._response: httpx.Response | None = None
        self._delivered = False  # the connection carried something: failures count anew
        self._events = self._run()
        # Held while the events are advanced: close() closes them itself only when nobody is.
        self._advancing = threading.Lock()

    def __iter__(self) -> MessageStream:
        return self

    def __next__(self) -> Message:
        while True:
            event = self._next_event()
            if event.message is not None:
                return event.message

    def _next_event(self) -> StreamEvent:
        with self._advancing:
            return next(self._events)

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def events(self) -> Iterator[StreamEvent]:
        """Every event as it comes, ``end`` ones included (each before the reconnection or the
        error it leads to); keep-alives are not events. The same iteration as the messages'."""
        while True:
            try:
                yield self._next_event()
            except StopIteration:
                return

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            _shut_down(response)
        # Advanced right now (by another thread, or by the one a signal handler interrupted):
        # the closed flag and the connection shut down end it.
        if self._advancing.acquire(blocking=False):
            try:
                self._events.close()
            finally:
                self._advancing.release()

    def _run(self) -> Generator[StreamEvent, None, None]:
        policy = self._session.retry
        attempt = 0
        failing: Deadline | None = None  # since when connections fail in a row
        while not self._closed.is_set():
            try:
                response, tokens = self._open()
            except ExchangeError:
                if self._closed.is_set():
                    return  # a retry's wait cut short by close()
                raise
            try:
                end, why = yield from self._events_of(response)
            finally:
                response.close()
            if self._closed.is_set():
                return
            code = end.code if end is not None else None
            if code in _RENEWING_ENDS:
                logger.info("Stream ended (%s): renewing the tokens and reconnecting", code)
                self._session.renew(tokens, refresh=_RENEWING_ENDS[str(code)])
                continue
            if end is not None and code == "REPLACED":
                raise StreamReplaced(None, "REPLACED", str(end.data.get("detail") or ""), end.data)
            if end is not None and code == "WEBHOOK_ACTIVE":
                raise Conflict(None, "WEBHOOK_ACTIVE", str(end.data.get("detail") or ""), end.data)
            if self._delivered:  # the connection carried something: failures count anew
                attempt, failing, self._delivered = 0, None, False
            attempt += 1
            failing = failing or Deadline(policy.give_up_after)
            wait = policy.wait(attempt, None)
            if not failing.allows(wait):
                raise Unavailable(None, "CONNECTION_FAILED", f"the stream {why}")
            log = logger.warning if end is None else logger.info
            log("Stream %s: reconnecting in %.1f s", why, wait)
            if self._closed.wait(wait):
                return

    def _events_of(
        self, response: httpx.Response
    ) -> Generator[StreamEvent, None, tuple[StreamEvent | None, str]]:
        """One connection's events, up to its end event: that event (None when the connection
        dropped, or the stream was closed), and why it ended."""
        if not _is_event_stream(response):
            type_ = str(response.headers.get("Content-Type"))
            raise StreamUnsupported(response.status_code, "NOT_AN_EVENT_STREAM", type_)
        with self._lock:
            self._response = response
        try:
            if self._closed.is_set():
                return None, "closed"
            parser = EventParser()
            for chunk in response.iter_bytes():
                self._delivered = True
                for sse in parser.feed(chunk):
                    event = _parsed(sse)
                    yield event
                    if event.event == "end":
                        return event, f"ended ({event.code})"
        except httpx.TransportError as error:
            return None, f"dropped ({str(error) or repr(error)})"
        finally:
            with self._lock:
                self._response = None
        return None, "dropped (the connection closed)"

    def _open(self) -> tuple[httpx.Response, Tokens]:
        try:
            return self._session.open(
                "GET",
                self.path,
                headers={"Accept": "text/event-stream"},
                timeout=self._timeout,
                stream=True,
                interrupt=self._closed,
            )
        except ExchangeError as error:
            if error.status in (404, 405):
                raise StreamUnsupported(
                    error.status, error.code, error.detail, error.problem
                ) from error
            raise
