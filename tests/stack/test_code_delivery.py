"""Codes leave through the outbox and a real Celery worker: e-mail over an SMTP session to a local
server, SMS as JSON to a local gateway, and the broker taken away and back during a registration."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.stack.conftest import Gunicorn, StackDatabase, wait_until
from tests.stack.processes import running_celery_worker, running_gunicorn
from tests.stack.servers import CODE, RABBITMQ, Forwarder, SmsGateway, SmtpSink, delete_queue

pytestmark = pytest.mark.stack

PASSWORD = "a-long-and-unusual-passphrase"
PHONE = "+4915123456789"
SWEEP_SECONDS = 2


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
        delete_queue(queue)


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
    return stack.smtp.code_sent_to(address, timeout=timeout)


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
        assert enabled.json()["twoFactorEnabled"] is True
        assert len(enabled.json()["recoveryCodes"]) == 10

    # A security notice leaves through the same outbox and worker, over SMTP.
    def notified() -> bool:
        return any(
            message["Subject"] == "Two-factor sign-in was turned on"
            for message in stack.smtp.received_by(address)
        )

    wait_until(notified, timeout=20, what="the notice of two-factor sign-in turned on")


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
    # The worker hands the e-mail to SMTP, then records it sent: the mail can arrive first.
    wait_until(
        lambda: outbox_statuses(stack, address) != ["PENDING"], timeout=20, what="the row's status"
    )
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
