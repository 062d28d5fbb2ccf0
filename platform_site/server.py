"""The platform's ASGI application: Django in threads, waiting on the event loop.

Each request is read in full on the event loop, so a client that sends half a body holds a
coroutine, never a thread. Django then handles it in one of ``threads`` threads through its WSGI
handler, the same code path and middleware as under a threaded WSGI server, one thread hop per
request (docs/deployment.md, "The server", has the measurements behind this choice).

A view that has nothing to answer yet and may wait for it (a long poll that found no message)
calls ``defer()``: the answer it returns is only what it would answer if the wait were over. The
server drops it, frees the thread and the database connection, awaits the view's ``wake`` on the
event loop (until the deadline, or until the client goes away) and then hands the same request to
Django again: authentication, limits and the view run anew (a session revoked meanwhile answers
401), and ``resumed()`` gives the view what it left for itself. A pass that answers without
deferring, or that fails, is the answer.

A view may also answer with a StreamingHttpResponse over an async iterator (a push stream): its
thread and database connection go back at once, and the server sends each chunk on the loop as the
iterator yields it, until it ends or the client goes away, which closes the iterator at once.
"""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from prometheus_client import Gauge
from rest_framework.request import Request

from platform_site.errors import ServerBusy

logger = logging.getLogger(__name__)

# The request's Pass in the WSGI environ (request.META); only this server puts one there.
PASS_KEY = "platform.pass"  # noqa: S105 (a key, not a password)

waiting_requests = Gauge(
    "platform_http_requests_waiting",
    "Requests the server holds on its event loop until they can be answered (long polls)",
    multiprocess_mode="livesum",
)

Wake = Callable[[float], Awaitable[object]]


@dataclass
class Deferral:
    wake: Wake  # awaited with the seconds left; returns when the answer may have changed
    until: float  # time.monotonic() at which the last pass answers whatever it has
    state: Any


@dataclass
class Pass:
    """One request's passes through Django, as the views and middleware see it."""

    server: Server
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
        current.server.waiting.take(limit)
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


def arrived_at(request: HttpRequest | Request) -> datetime | None:
    """When a resumed request arrived (None on a first pass: now)."""
    current: Pass | None = request.META.get(PASS_KEY)
    return current.arrived if current is not None and current.number > 1 else None


class Waiting:
    """The requests this process holds waiting, bounded by each deferral's ``limit``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def take(self, limit: int) -> None:
        with self._lock:
            if self.count >= limit:
                raise ServerBusy()
            self.count += 1
        waiting_requests.inc()

    def give_back(self) -> None:
        with self._lock:
            self.count -= 1
        waiting_requests.dec()


@dataclass
class _Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: list[bytes] = field(default_factory=list)
    # A response whose content is an async iterator (a push stream): sent as it comes, on the loop.
    stream: StreamingHttpResponse | None = None


class Server:
    """The ASGI application (platform_site.asgi): Django's WSGI handler run in ``threads``
    threads, deferred requests awaited on the event loop."""

    def __init__(
        self,
        handler: Callable[..., Iterable[bytes]],
        *,
        threads: int,
        on_startup: Iterable[Callable[[], object]] = (),
    ) -> None:
        self.handler = handler
        self.on_startup = list(on_startup)  # called on the event loop before the first request
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="django")
        self.waiting = Waiting()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        # Nothing else is served: a WebSocket handshake the application does not accept is refused.

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                for start in self.on_startup:
                    start()
                _collector_for_serving()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.executor.shutdown(wait=False)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _body(scope, receive)
        if body is None:
            return  # the client went away before its body was complete
        loop = asyncio.get_running_loop()
        current = Pass(server=self)
        gone: asyncio.Future[Any] | None = None
        try:
            while True:
                environ = _environ(scope, body)
                environ[PASS_KEY] = current
                current.number += 1
                current.deferral = None
                answer = await loop.run_in_executor(self.executor, self._pass, environ)
                if isinstance(answer, _Answer):
                    break
                deferral = answer
                current.state = deferral.state
                if gone is None:
                    gone = asyncio.ensure_future(_disconnected(receive))
                if not await _woken(deferral, gone):
                    return  # the client went away: nobody to answer
        finally:
            if gone is not None:
                gone.cancel()
            if current.holding:
                self.waiting.give_back()
        await send(
            {"type": "http.response.start", "status": answer.status, "headers": answer.headers}
        )
        if answer.stream is not None:
            await self._stream(answer.stream, receive, send)
            return
        if scope["method"] == "HEAD":
            answer.body = []
        for chunk in answer.body[:-1]:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": answer.body[-1] if answer.body else b""})

    async def _stream(self, response: StreamingHttpResponse, receive: Any, send: Any) -> None:
        """An async streaming response's chunks as its iterator yields them, until it ends or the
        client goes away (then the iterator is closed: its ``finally`` runs at once)."""
        chunks = aiter(response.streaming_content)  # type: ignore[arg-type]
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            while True:
                following = asyncio.ensure_future(anext(chunks))
                await asyncio.wait({following, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    following.cancel()
                    return
                try:
                    chunk = following.result()
                except StopAsyncIteration:
                    await send({"type": "http.response.body", "body": b""})
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            gone.cancel()
            closing = getattr(chunks, "aclose", None)
            if closing is not None:
                await closing()
            # request_finished, in a thread as every other request's.
            await asyncio.get_running_loop().run_in_executor(self.executor, response.close)

    def _pass(self, environ: dict[str, Any]) -> _Answer | Deferral:
        """One pass through Django, in a thread: the answer, or the view's deferral."""
        current: Pass = environ[PASS_KEY]
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> None:
            started[:] = [status, headers]

        response = self.handler(environ, start_response)
        status = int(started[0].split(" ", 1)[0])
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in started[1]
        ]
        if isinstance(response, StreamingHttpResponse) and response.is_async:
            # Its iterator runs on the event loop (_stream); this thread's database connection
            # goes back to the pool now, not when the stream ends.
            current.deferral = None
            close_old_connections()
            return _Answer(status=status, headers=headers, stream=response)
        try:
            if current.deferral is not None and status < 300:
                return current.deferral
            current.deferral = None
            # The whole body, in this thread: Django's database connections are the thread's.
            body = [chunk for chunk in response if chunk]
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()  # request_finished: the database connection goes back to the pool
        return _Answer(status=status, headers=headers, body=body)


def _collector_for_serving() -> None:
    """A full collection stops the process, event loop and threads, for as long as it walks the
    old objects. Everything imported by now lives as long as the process: frozen, out of the
    collector's sight. And full collections come ten times rarer than by default (after 100
    collections of the middle generation, not 10): with 2,000 long polls waiting, each took 60 to
    130 ms, 14 in 24 s, and made the p99 of bench (k) 79-137 ms; 40-47 ms without them, for the
    same memory (docs/deployment.md, "The server")."""
    gc.freeze()
    youngest, middle, _ = gc.get_threshold()
    gc.set_threshold(youngest, middle, 100)


async def _woken(deferral: Deferral, gone: asyncio.Future[Any]) -> bool:
    """Await the deferral's wake (at most until its deadline): False if the client went first."""
    woken = asyncio.ensure_future(deferral.wake(max(deferral.until - time.monotonic(), 0)))
    await asyncio.wait({woken, gone}, return_when=asyncio.FIRST_COMPLETED)
    if not woken.done():
        woken.cancel()
        return False
    if woken.exception() is not None:
        # The next pass answers all the same, from the database.
        logger.error("A deferred request's wake failed", exc_info=woken.exception())
    return True


@dataclass
class _Body:
    content: bytes
    # Set when reading stopped: more than this many bytes, past any view's limit.
    over: int | None = None


async def _body(scope: dict[str, Any], receive: Any) -> _Body | None:
    """The request's body, read on the event loop; None if the client went away first.

    Reading stops past the largest body any view takes (DATA_UPLOAD_MAX_MEMORY_SIZE): the view's
    body limit then refuses the request by its Content-Length, which _environ sets to more.
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return _Body(b"", over=int(declared))
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return _Body(b"", over=size)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return _Body(b"".join(chunks))


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _environ(scope: dict[str, Any], body: _Body) -> dict[str, Any]:
    """PEP 3333's environ for an ASGI HTTP scope (strings are bytes as latin-1)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode("utf-8").decode("latin-1"),
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": bytes(scope.get("query_string", b"")).decode("latin-1"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]) if server[1] is not None else "80",
        "REMOTE_ADDR": client[0] if client else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body.content),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        name = bytes(raw_name).decode("latin-1")
        # As gunicorn and Django's runserver: X_Forwarded_For must not pass for X-Forwarded-For.
        if "_" in name:
            continue
        value = bytes(raw_value).decode("latin-1")
        if name == "content-length":
            key = "CONTENT_LENGTH"
        elif name == "content-type":
            key = "CONTENT_TYPE"
        else:
            key = "HTTP_" + name.upper().replace("-", "_")
        if key in environ:
            value = environ[key] + ("; " if key == "HTTP_COOKIE" else ",") + value
        environ[key] = value
    if body.over is not None:
        environ["CONTENT_LENGTH"] = str(body.over)
    return environ


def application(
    *, threads: int, static: bool | None = None, on_startup: Iterable[Callable[[], object]] = ()
) -> Server:
    """The platform's server over Django's WSGI handler, with static files served as runserver
    serves them when ``static`` (by default when DEBUG is on; nginx serves them in production)."""
    handler: Callable[..., Iterable[bytes]] = WSGIHandler()
    if settings.DEBUG if static is None else static:
        from django.contrib.staticfiles.handlers import StaticFilesHandler

        handler = StaticFilesHandler(handler)  # type: ignore[arg-type]
    return Server(handler, threads=threads, on_startup=on_startup)
