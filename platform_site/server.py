"""The platform's ASGI application: Django in threads, waiting on the event loop.

Each request is read in full on the event loop, so a client that sends half a body holds a
coroutine, never a thread. Django then handles it in one of ``threads`` threads through its WSGI
handler, the same code path and middleware as under a threaded WSGI server, one thread hop per
request (docs/deployment.md, "The server", has the measurements behind this choice).

A view that has nothing to answer yet and may wait for it (a long poll that found no message)
calls ``defer()`` (platform_site/deferral.py): the answer it returns is only what it would
answer if the wait were over. The server drops it, frees the thread and the database
connection, awaits the view's ``wake`` on the event loop (until the deadline, or until the client
goes away) and then hands the same request to Django again: authentication, limits and the view
run anew (a session revoked meanwhile answers 401), and ``resumed()`` gives the view what it left
for itself. A pass that answers without deferring, or that fails, is the answer.

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
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from django.http import StreamingHttpResponse

from platform_site.deferral import PASS_KEY, Deferral, Pass, Places, waiting_requests

logger = logging.getLogger(__name__)


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
        self.waiting = Places(waiting_requests, place="long_poll")
        # Set when the process begins to stop (stop_serving): waiting requests answer at once,
        # streams end.
        self.stopping = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop it serves on, once started
        _servers.add(self)

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
                # What the views hand to a thread from the loop (a stream's database work) runs in
                # Django's threads, as the requests do: asyncio.to_thread uses them.
                self.loop = asyncio.get_running_loop()
                self.loop.set_default_executor(self.executor)
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
        current = Pass(waiting=self.waiting, stopping=self.stopping)
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
                if not await _woken(deferral, gone, self.stopping):
                    return  # the client went away: nobody to answer
                if self.stopping.is_set():
                    current.until = time.monotonic()  # the next pass answers what it has
        finally:
            if gone is not None:
                gone.cancel()
            if current.holding:
                self.waiting.give_back()
        start = {"type": "http.response.start", "status": answer.status, "headers": answer.headers}
        if answer.stream is not None:
            await self._stream(answer.stream, start, receive, send)
            return
        await send(start)
        if scope["method"] == "HEAD":
            answer.body = []
        for chunk in answer.body[:-1]:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": answer.body[-1] if answer.body else b""})

    async def _stream(
        self, response: StreamingHttpResponse, start: dict[str, Any], receive: Any, send: Any
    ) -> None:
        """An async streaming response's chunks as its iterator yields them, until it ends or the
        client goes away (then the iterator is closed: its ``finally`` runs at once). The response
        is closed in every case, also when the client was gone before the first byte."""
        chunks = aiter(response.streaming_content)  # type: ignore[arg-type]
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await send(start)
            while True:
                following = asyncio.ensure_future(anext(chunks))
                await asyncio.wait({following, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    # The client went away: the iterator stops where it waits (its finally
                    # runs), before it is closed.
                    following.cancel()
                    await asyncio.wait({following})
                    return
                try:
                    chunk = following.result()
                except StopAsyncIteration:
                    await send({"type": "http.response.body", "body": b""})
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            gone.cancel()
            try:
                closing = getattr(chunks, "aclose", None)
                if closing is not None:
                    await closing()
            finally:
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


_servers: weakref.WeakSet[Server] = weakref.WeakSet()


def stop_serving() -> None:
    """The server on this event loop begins to stop (before it waits for its connections to end):
    every deferred request answers now and every stream ends (platform_site.worker calls it)."""
    loop = asyncio.get_running_loop()
    for server in _servers:
        if server.loop is loop:
            server.stopping.set()


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


async def _woken(deferral: Deferral, gone: asyncio.Future[Any], stopping: asyncio.Event) -> bool:
    """Await the deferral's wake (at most until its deadline, or until the process begins to
    stop: the request then answers what it has): False if the client went first."""
    woken = asyncio.ensure_future(deferral.wake(max(deferral.until - time.monotonic(), 0)))
    stopped = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({woken, gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if stopping.is_set() and not gone.done():
        woken.cancel()
        return True
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
