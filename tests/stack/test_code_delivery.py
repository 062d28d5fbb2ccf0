"""Codes leave through the outbox and a real Celery worker: e-mail over an SMTP session to a local
server, SMS as JSON to a local gateway, and the broker taken away and back during a registration."""

from __future__ import annotations

import email
import email.policy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from aiosmtpd.controller import Controller
from kombu import Connection, Queue

from tests.stack.conftest import Gunicorn, StackDatabase, free_port, wait_until
from tests.stack.processes import running_celery_worker, running_gunicorn

pytestmark = pytest.mark.stack

RABBITMQ = ("127.0.0.1", 5672)
PASSWORD = "a-long-and-unusual-passphrase"
PHONE = "+4915123456789"
SWEEP_SECONDS = 2
CODE = re.compile(r"\b(\d{6})\b")


class SmtpSink:
    """An aiosmtpd server on loopback that keeps every message it is sent."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self._lock = threading.Lock()
        self.port = free_port()
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(([address.lower() for address in envelope.rcpt_tos], message))
        return "250 Message accepted for delivery"

    def received_by(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [message for rcpt, message in self.messages if address.lower() in rcpt]


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
    """A TCP forwarder to RabbitMQ: stopping it closes the port and every forwarded connection,
    as a broker outage does; starting it again listens on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
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
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@dataclass
class DeliveryStack:
    gunicorn: Gunicorn
    worker_alive: Callable[[], bool]
    worker_log: Path
    smtp: SmtpSink
    sms: SmsGateway
    broker: Forwarder
    database: StackDatabase


@pytest.fixture(scope="module")
def delivery_stack(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeliveryStack]:
    workdir = tmp_path_factory.mktemp("delivery")
    # A queue of this run's own on the shared RabbitMQ: no other run's worker takes its tasks.
    queue = f"test-code-delivery-{uuid.uuid4().hex[:12]}"
    smtp, sms, broker = SmtpSink(), SmsGateway(), Forwarder(RABBITMQ)
    smtp.controller.start()
    sms.thread.start()
    broker.start()
    env = {
        "CELERY_BROKER_URL": f"amqp://guest:guest@127.0.0.1:{broker.port}//",
        "CELERY_QUEUE": queue,
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
        "SMS_BACKEND": "http",
        "SMS_HTTP_URL": sms.url,
        "ACCOUNTS_OUTBOX_SWEEP_SECONDS": str(SWEEP_SECONDS),
        # The cache of each process (rate limits only; the requests all come from 127.0.0.1).
        "REDIS_URL": "",
        "ACCOUNTS_RATE_LIMIT_IP": "10000/m",
        "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m",
    }
    try:
        with (
            running_celery_worker(stack_database, workdir / "worker", env, queue=queue) as worker,
            # One worker process: its pooled broker connection is the one the broker restart
            # breaks, whichever request comes next.
            running_gunicorn(stack_database, workdir / "gunicorn", env, workers=1) as gunicorn,
        ):
            yield DeliveryStack(
                gunicorn=gunicorn,
                worker_alive=lambda: worker.poll() is None,
                worker_log=workdir / "worker" / "celery.log",
                smtp=smtp,
                sms=sms,
                broker=broker,
                database=stack_database,
            )
    finally:
        with suppress(AssertionError):
            broker.stop()
        smtp.controller.stop()
        sms.server.shutdown()
        sms.server.server_close()
        with (
            suppress(Exception),
            Connection(f"amqp://guest:guest@{RABBITMQ[0]}:{RABBITMQ[1]}//") as conn,
        ):
            Queue(queue).bind(conn.default_channel).delete()


def client(stack: DeliveryStack, device: str) -> httpx.Client:
    return httpx.Client(
        base_url=stack.gunicorn.base_url, headers={"X-Device-ID": device}, timeout=30
    )


def register(api: httpx.Client, address: str) -> httpx.Response:
    return api.post(
        "/api/auth/register",
        json={"email": address, "password": PASSWORD, "confirmPassword": PASSWORD},
    )


def code_in_email(stack: DeliveryStack, address: str, *, timeout: float) -> str:
    """The code in the first e-mail to ``address``, once it arrived over SMTP."""
    wait_until(
        lambda: bool(stack.smtp.received_by(address)),
        timeout=timeout,
        what=f"an e-mail to {address}",
    )
    message = stack.smtp.received_by(address)[0]
    body = message.get_body(("plain",))
    assert body is not None, message
    match = CODE.search(body.get_content())
    assert match is not None, body.get_content()
    return match.group(1)


def outbox_statuses(stack: DeliveryStack, address: str) -> list[str]:
    with psycopg.connect(stack.database.url) as conn:
        rows = conn.execute(
            'SELECT status FROM accounts_outboxmessage WHERE lower("to") = %s ORDER BY id',
            [address.lower()],
        ).fetchall()
    return [row[0] for row in rows]


def outbox_ids(stack: DeliveryStack, address: str) -> set[int]:
    with psycopg.connect(stack.database.url) as conn:
        rows = conn.execute(
            'SELECT id FROM accounts_outboxmessage WHERE lower("to") = %s', [address.lower()]
        ).fetchall()
    return {row[0] for row in rows}


def not_queued(stack: DeliveryStack) -> set[int]:
    """The outbox messages whose task gunicorn could not publish, from its log."""
    found = re.findall(r"outbox message (\d+) not queued", stack.gunicorn.log.read_text())
    return {int(pk) for pk in found}


def test_registration_code_by_email_and_two_factor_code_by_sms(
    delivery_stack: DeliveryStack,
) -> None:
    stack = delivery_stack
    address = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    with client(stack, "laptop") as api:
        registered = register(api, address)
        assert registered.status_code == 200, registered.text
        assert registered.json()["confirmMethod"] == "EMAIL"

        code = code_in_email(stack, address, timeout=20)
        confirmed = api.post(
            "/api/auth/register/verify-email/confirm",
            json={"requestId": registered.json()["requestId"], "token": code},
        )
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["userDto"]["emailConfirmed"] is True
        api.headers["Authorization"] = f"Bearer {confirmed.json()['accessToken']}"

        profile = api.patch("/api/users/me", json={"phone": PHONE})
        assert profile.status_code == 200, profile.text
        assert profile.json()["phone"] == PHONE

        enabling = api.patch("/api/users/two-factor-authentication")
        assert enabling.status_code == 200, enabling.text
        assert enabling.json()["confirmMethod"] == "SMS"
        wait_until(lambda: bool(stack.sms.received_by(PHONE)), timeout=20, what="an SMS")
        [sms] = stack.sms.received_by(PHONE)
        assert set(sms) == {"to", "text"}
        match = CODE.search(sms["text"])
        assert match is not None, sms

        enabled = api.post(
            "/api/users/two-factor-authentication/confirm",
            json={"requestId": enabling.json()["requestId"], "token": match.group(1)},
        )
        assert enabled.status_code == 200, enabled.text
        assert enabled.json() == {"twoFactorEnabled": True}


def test_a_code_queued_while_the_broker_is_down_arrives_once_it_is_back(
    delivery_stack: DeliveryStack,
) -> None:
    stack = delivery_stack
    address = f"grace-{uuid.uuid4().hex[:8]}@example.com"
    stack.broker.stop()
    try:
        with client(stack, "phone") as api:
            started = time.monotonic()
            registered = register(api, address)
            took = time.monotonic() - started
        assert registered.status_code == 200, registered.text
        assert took < 5, f"registration took {took:.1f} s with the broker down"

        # Two sweep periods: nothing can leave while the worker cannot get a task.
        time.sleep(2 * SWEEP_SECONDS + 0.5)
        assert stack.smtp.received_by(address) == []
        assert outbox_statuses(stack, address) == ["PENDING"]
    finally:
        stack.broker.start()

    code = code_in_email(stack, address, timeout=40)
    assert stack.worker_alive(), stack.worker_log.read_text()
    assert outbox_statuses(stack, address) == ["SENT"]
    assert len(stack.smtp.received_by(address)) == 1
    with client(stack, "phone") as api:
        confirmed = api.post(
            "/api/auth/register/verify-email/confirm",
            json={"requestId": registered.json()["requestId"], "token": code},
        )
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["accessToken"]
    # gunicorn logged that it could not queue the task: the sweep sent this one.
    assert outbox_ids(stack, address) <= not_queued(stack)


def test_after_a_broker_restart_the_next_code_is_queued_at_once(
    delivery_stack: DeliveryStack,
) -> None:
    stack = delivery_stack
    before, after = (f"{name}-{uuid.uuid4().hex[:8]}@example.com" for name in ("before", "after"))
    with client(stack, "tablet") as api:
        # gunicorn keeps its broker connection in a pool, open after this.
        assert register(api, before).status_code == 200
        code_in_email(stack, before, timeout=20)

        # The broker restarts while nobody registers; the worker reconnects by itself.
        connected = connections_of_worker(stack)
        stack.broker.stop()
        stack.broker.start()
        wait_until(
            lambda: connections_of_worker(stack) > connected,
            timeout=30,
            what="the worker to reconnect",
        )

        assert register(api, after).status_code == 200
    code_in_email(stack, after, timeout=20)
    # Its task was published (on a new connection), not left to the sweep.
    assert not outbox_ids(stack, after) & not_queued(stack)


def connections_of_worker(stack: DeliveryStack) -> int:
    return stack.worker_log.read_text().count("Connected to amqp://")
