"""The platform's server (platform_site/server.py) as a client meets it: bodies read whole before
Django sees them, headers as a WSGI server passes them, and a deferred request answered and logged
as one request."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.http import StreamingHttpResponse

from accounts.models import User
from platform_site.server import Server
from tests.live import LiveClient, LiveServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{live_server.port}", timeout=30) as client:
        yield client


def test_a_header_spelled_with_underscores_does_not_pass_for_the_hyphenated_one(
    live_server: LiveServer, adapter: User
):
    """X_Device_ID and X-Device-ID would both be HTTP_X_DEVICE_ID to Django: as gunicorn and
    nginx do, the server drops the spelling with underscores (X_Forwarded_For likewise)."""
    client = LiveClient(live_server)
    signed_in = client.http.post(
        "/api/auth/login/username",
        json={"username": adapter.username, "password": "correct-horse-battery-staple"},
        headers={"X_Device_ID": "spoofed"},
    )
    token = signed_in.json()["accessToken"]

    whoami = client.http.get(
        "/api/exchange/whoami",
        headers={"Authorization": f"Bearer {token}", "X_Device_ID": "spoofed"},
    )

    assert (signed_in.status_code, whoami.status_code) == (200, 200)
    assert whoami.json()["deviceId"] is None  # bound to the fingerprint, not to "spoofed"
    client.close()


def test_a_chunked_body_beyond_every_limit_is_refused_with_413_unread(http: httpx.Client):
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        for _ in range(size // 65536 + 1):
            yield b" " * 65536

    answer = http.post(
        "/api/exchange/messages/batch",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )

    assert answer.status_code == 413
    assert answer.json()["code"] == "PAYLOAD_TOO_LARGE"


def test_a_declared_length_beyond_every_limit_is_refused_before_the_body_is_sent(
    live_server: LiveServer,
):
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=10) as connection:
        connection.sendall(
            b"POST /api/exchange/messages/batch HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        )
        head = connection.recv(4096).split(b"\r\n", 1)[0]

    assert head == b"HTTP/1.1 413 Request Entity Too Large"


def test_head_answers_the_headers_of_get_without_a_body(http: httpx.Client):
    get = http.get("/api/actuator/health/liveness")
    head = http.head("/api/actuator/health/liveness")

    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["Content-Type"] == get.headers["Content-Type"]


def test_a_deferred_long_poll_is_one_request_in_the_log_with_one_id(
    live_server: LiveServer, adapter: User, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="platform.request")
    client = LiveClient(live_server, device_id="erp-1")
    client.sign_in(adapter.username)

    answer = client.call(
        "get", "/api/exchange/messages?waitSeconds=1", **{"X-Request-ID": "poll-one"}
    )

    assert (answer.status_code, answer.json()) == (200, {"messages": []})
    assert answer.headers["X-Request-ID"] == "poll-one"
    logged = [r for r in caplog.records if getattr(r, "requestId", None) == "poll-one"]
    assert [(r.getMessage(), r.status) for r in logged] == [  # type: ignore[attr-defined]
        ("GET /api/exchange/messages 200", 200)
    ]
    client.close()


def test_a_deferred_long_poll_is_counted_once_and_answers_with_its_usage(
    live_server: LiveServer, adapter: User
):
    """However often it is woken, a long poll is one request against EXCHANGE_RATE_LIMIT, and its
    answer carries the usage its first pass counted."""
    client = LiveClient(live_server, device_id="erp-1")
    client.sign_in(adapter.username)

    waited = client.call("get", "/api/exchange/messages?waitSeconds=1")
    after = client.call("get", "/api/exchange/messages")

    assert waited.status_code == after.status_code == 200
    assert waited.headers["X-Rate-Limit-Limit"] == after.headers["X-Rate-Limit-Limit"]
    remaining = int(waited.headers["X-Rate-Limit-Remaining"])
    assert int(after.headers["X-Rate-Limit-Remaining"]) == remaining - 1
    client.close()


def streaming(content: Callable[[], AsyncIterator[bytes]]) -> Callable[..., Any]:
    """A WSGI handler that answers every request with ``content()`` as an async stream."""

    def handler(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        response = StreamingHttpResponse(content(), content_type="text/plain")
        start_response("200 OK", list(response.items()))
        return response

    return handler


def test_an_async_stream_is_sent_as_its_iterator_yields_it():
    async def content() -> AsyncIterator[bytes]:
        for word in (b"one\n", b"two\n", b"three\n"):
            yield word

    server = LiveServer(app=Server(streaming(content), threads=2))
    try:
        with httpx.stream("GET", f"http://127.0.0.1:{server.port}/") as answer:
            lines = list(answer.iter_lines())
    finally:
        server.stop()

    assert (answer.status_code, lines) == (200, ["one", "two", "three"])


def test_a_client_that_goes_away_ends_its_stream_at_once():
    sent, closed = threading.Event(), threading.Event()

    async def content() -> AsyncIterator[bytes]:
        try:
            yield b"first\n"
            sent.set()
            await asyncio.Event().wait()  # nothing more, ever: only the client can end it
        finally:
            closed.set()

    server = LiveServer(app=Server(streaming(content), threads=2))
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            received = b""
            while b"first" not in received:  # the head and the first chunk may come apart
                chunk = connection.recv(4096)
                assert chunk, received
                received += chunk
            assert sent.wait(10)
        ended = closed.wait(10)
    finally:
        server.stop()

    assert ended


@pytest.mark.django_db(transaction=True)
def test_make_run_s_server_serves_the_application_and_stops_on_sigterm(tmp_path):
    """platform_site.develop (what `make run` starts): uvicorn's reloader over the platform's
    application and the production worker's stopping server."""
    import os
    import signal
    import subprocess
    import sys

    from platform_site.embedded import free_port
    from tests.stack.conftest import wait_until

    database = settings.DATABASES["default"]
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}"
        f"/{database['NAME']}",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "platform_site.develop", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "log").open("w"),
        start_new_session=True,
    )
    liveness = f"http://127.0.0.1:{port}/api/actuator/health/liveness"

    def answering() -> bool:
        assert process.poll() is None, (tmp_path / "log").read_text()
        try:
            return httpx.get(liveness).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(answering, timeout=60, what="make run's server to answer")
        stream = httpx.get(
            f"http://127.0.0.1:{port}/api/exchange/messages/stream",
            headers={"Accept": "text/event-stream"},
        )
        assert (stream.status_code, stream.json()["code"]) == (401, "TOKEN_MISSING")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(timeout=30) == 0
