"""Loopback stand-ins for the stack's outside services: an SMTP server that keeps what it is sent,
an SMS gateway that keeps what is POSTed to it, and a TCP forwarder (to RabbitMQ, to Redis) that can
be cut, or stalled: a server that accepts and never answers."""

from __future__ import annotations

import email
import email.policy
import json
import re
import socket
import threading
from contextlib import suppress
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from kombu import Connection, Queue

from platform_site.embedded import free_port
from tests.stack.conftest import wait_until

# The machine's RabbitMQ (CI's service): tests keep apart by queue names of their own.
RABBITMQ = ("127.0.0.1", 5672)
# A confirmation code in an e-mail or SMS text.
CODE = re.compile(r"\b(\d{6})\b")


class SmtpSink:
    """An aiosmtpd server on loopback that keeps every message it is sent."""

    def __init__(self, hostname: str = "127.0.0.1") -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self._lock = threading.Lock()
        self.port = free_port()
        self.controller = Controller(self, hostname=hostname, port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(([address.lower() for address in envelope.rcpt_tos], message))
        return "250 Message accepted for delivery"

    def received_by(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [message for rcpt, message in self.messages if address.lower() in rcpt]

    def code_sent_to(self, address: str, *, timeout: float) -> str:
        """The code in the first e-mail to ``address``, once it arrived over SMTP."""
        wait_until(
            lambda: bool(self.received_by(address)), timeout=timeout, what=f"an e-mail to {address}"
        )
        message = self.received_by(address)[0]
        body = message.get_body(("plain",))
        assert body is not None, message
        match = CODE.search(body.get_content())
        assert match is not None, body.get_content()
        return match.group(1)


class SmsGateway:
    """An HTTP gateway on loopback that keeps every JSON body POSTed to /sms."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path != "/sms" or self.headers["Content-Type"] != "application/json":
                    self.send_response(404)
                else:
                    gateway.received.append(json.loads(body))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sms"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def received_by(self, phone: str) -> list[dict[str, Any]]:
        return [body for body in list(self.received) if body.get("to") == phone]


class Forwarder:
    """A TCP forwarder to a server: stopping it closes the port and every forwarded connection,
    as a broker outage does; starting it again listens on the same port. Stalling it keeps every
    connection open and accepts new ones, but nothing passes either way until ``resume()``: a
    server that hangs."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.stalled = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener, self._stopping = listener, threading.Event()
        self._thread = threading.Thread(
            target=self._accept, args=(listener, self._stopping), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        assert self._listener is not None
        assert self._thread is not None
        self._stopping.set()
        self._thread.join()
        self._listener.close()
        self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def stall(self) -> None:
        self.stalled.set()

    def resume(self) -> None:
        self.stalled.clear()

    def _accept(self, listener: socket.socket, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink, self.stalled), daemon=True
                ).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, stalled: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                if not stalled.is_set():  # stalled: what is sent is swallowed, never answered
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def delete_queue(queue: str) -> None:
    """Remove a run's own Celery queue from the shared RabbitMQ (nothing if it is unreachable)."""
    with (
        suppress(Exception),
        Connection(f"amqp://guest:guest@{RABBITMQ[0]}:{RABBITMQ[1]}//") as conn,
    ):
        Queue(queue).bind(conn.default_channel).delete()
