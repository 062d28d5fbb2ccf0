"""docs/adapters.md works as printed: its curl walkthrough, its Python consumer and its examples of
the client (topics too), run verbatim against a live server with only BASE, LOGIN, PASSWORD and
the example's own settings set."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer
from time_machine import TimeMachineFixture

from accounts.models import Session, User
from accounts.services.adapters import AdapterCredentials, adapter_create
from exchange.models import DeliveryLog, Message, Publication
from exchange.services.sending import message_send
from exchange.services.topics import subscription_put, topic_create
from tests.conftest import ROOT, LongPolls
from tests.factories import UserFactory

GUIDE = ROOT / "docs/adapters.md"
# A block the tests run carries an HTML comment with its name on the line before its fence;
# blocks of one name run together, in order. Other blocks are illustrations.
RUNNABLE = re.compile(
    r"^<!-- run: (?P<name>[\w-]+) -->\n```(?P<language>\w+)\n(?P<code>.*?)^```$", re.M | re.S
)

# The live server's long polls run in this process: tests see them wait (tests/conftest.py).
# Slow: the guide's clients and command lines run whole against the live server.
pytestmark = [pytest.mark.usefixtures("long_polls"), pytest.mark.slow]


def runnable(name: str, language: str) -> str:
    blocks = [block for block in RUNNABLE.finditer(GUIDE.read_text()) if block["name"] == name]
    assert blocks, f"docs/adapters.md has no block marked <!-- run: {name} -->"
    assert {block["language"] for block in blocks} == {language}
    return "\n".join(block["code"] for block in blocks)


def environment(
    server: LiveServer, credentials: AdapterCredentials, **extra: str
) -> dict[str, str]:
    """What a reader sets, and nothing of the test's own (no proxies, no DJANGO_SETTINGS_MODULE)."""
    return {
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        "BASE": server.url,
        "LOGIN": credentials.login,
        "PASSWORD": credentials.password,
        **extra,
    }


def send(*, sender: User, to: int, count: int) -> list[str]:
    return [
        str(
            message_send(
                sender=sender,
                to=to,
                type="order.created",
                payload={"orderId": number},
                headers={"trace-id": f"t{number}"},
                idempotency_key=None,
            ).message_id
        )
        for number in range(count)
    ]


def acked_ids(adapter_id: int) -> set[str]:
    return {
        str(message_id)
        for message_id in DeliveryLog.objects.filter(recipient_id=adapter_id).values_list(
            "message_id", flat=True
        )
    }


def in_order(text: str, *parts: str) -> bool:
    position = 0
    for part in parts:
        position = text.find(part, position)
        if position < 0:
            return False
    return True


@dataclass(frozen=True)
class ConsumerRun:
    returncode: int
    handled: list[dict[str, Any]]  # the JSON lines it printed, one a message handled
    log: str


class Consumer:
    """The guide's consumer.py in a process of its own."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def finished(self, timeout: float = 30) -> ConsumerRun:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, stderr = self.process.communicate()
            raise AssertionError(f"the consumer did not stop:\n{stderr}") from None
        return ConsumerRun(
            returncode=self.process.returncode,
            handled=[json.loads(line) for line in stdout.splitlines()],
            log=stderr,
        )


StartConsumer = Callable[..., Consumer]


@pytest.fixture
def cabinet_user() -> User:
    return UserFactory.create()


@pytest.fixture
def credentials(cabinet_user: User) -> AdapterCredentials:
    """The adapter the reader has a login and password for."""
    return adapter_create(owner=cabinet_user, login="erp-bridge")


@pytest.fixture
def partner(cabinet_user: User) -> User:
    """Another adapter of the same owner: it may send to the reader's adapter."""
    return User.objects.get(pk=adapter_create(owner=cabinet_user, login="crm").adapter_id)


@pytest.fixture
def start_consumer(
    live_server: LiveServer, tmp_path: Path, credentials: AdapterCredentials
) -> Iterator[StartConsumer]:
    script = tmp_path / "consumer.py"
    script.write_text(runnable("consumer", "python"))
    started: list[subprocess.Popen[str]] = []

    def start(**extra: str) -> Consumer:
        process = subprocess.Popen(
            [sys.executable, "-I", str(script)],
            cwd=tmp_path,
            env=environment(live_server, credentials, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return Consumer(process)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_the_python_consumer_uses_only_the_standard_library():
    tree = ast.parse(runnable("consumer", "python"))

    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert {"json", "urllib"} <= imported <= sys.stdlib_module_names


@pytest.mark.django_db(transaction=True)
def test_the_curl_walkthrough_receives_and_acks_the_message_it_sent(
    live_server: LiveServer, credentials: AdapterCredentials
):
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", runnable("walkthrough", "sh")],
        env=environment(live_server, credentials),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    [sent] = re.findall(r"^sent: +(\S+)$", out, re.M)
    [received] = re.findall(r"^received: +(\S+)$", out, re.M)
    assert received == sent
    [pushed] = re.findall(r"^pushed: +(\S+)$", out, re.M)
    assert in_order(
        out,
        f'{{"messageId":"{sent}","duplicate":true}}',
        '"status":"extended"',
        '"status":"released"',
        f'{{"messageId":"{sent}","deliveryCount":2,"redelivered":true}}',
        f'{{"messageId":"{sent}","status":"acked"}}',
        f'{{"messageId":"{sent}","status":"alreadyAcked"}}',
        '{"available":0,"inFlight":0,"delayed":0,"deadLettered":0,"oldestAgeSeconds":null}',
        "event: message",
        f'{{"messageId":"{pushed}","type":"walkthrough.pushed","payload":{{"n":1}},'
        '"redelivered":false}',
        f'{{"messageId":"{pushed}","status":"acked"}}',
        '{"status":401,"code":"TOKEN_REVOKED"}',
    ), out
    assert Message.objects.count() == 0
    logged = DeliveryLog.objects.get(message_id=sent)
    assert (logged.recipient_id, logged.sender_id, logged.receive_count, logged.acked_by) == (
        credentials.adapter_id,
        credentials.adapter_id,
        2,
        "d:walkthrough-1",
    )
    assert (logged.type, logged.payload, logged.headers) == (
        "walkthrough.ping",
        {"hello": "world"},
        {"trace-id": "walkthrough"},
    )
    # The walkthrough signed out: no session of the adapter is alive.
    assert not Session.objects.filter(
        user_id=credentials.adapter_id, revoked_at__isnull=True
    ).exists()


@pytest.mark.django_db(transaction=True)
def test_the_python_consumer_in_the_guide_acks_every_message_sent(
    start_consumer: StartConsumer, credentials: AdapterCredentials, partner: User
):
    sent = send(sender=partner, to=credentials.adapter_id, count=3)

    run = start_consumer(DEVICE_ID="erp-consumer-1", STOP_AFTER="3").finished()

    assert run.returncode == 0, run.log
    assert [message["messageId"] for message in run.handled] == sent
    assert run.handled[0] == {
        "messageId": sent[0],
        "sender": partner.pk,
        "type": "order.created",
        "payload": {"orderId": 0},
    }
    assert Message.objects.count() == 0
    assert acked_ids(credentials.adapter_id) == set(sent)
    assert set(
        DeliveryLog.objects.filter(message_id__in=sent).values_list("acked_by", flat=True)
    ) == {"d:erp-consumer-1"}
    assert "signed out" in run.log
    assert not Session.objects.filter(
        user_id=credentials.adapter_id, revoked_at__isnull=True
    ).exists()


@pytest.mark.django_db(transaction=True)
def test_the_python_consumer_stops_after_one_empty_long_poll_when_idle_stopping_is_set(
    start_consumer: StartConsumer, credentials: AdapterCredentials, partner: User
):
    sent = send(sender=partner, to=credentials.adapter_id, count=2)
    started = time.monotonic()

    run = start_consumer(STOP_WHEN_IDLE="1", WAIT_SECONDS="1").finished()

    assert run.returncode == 0, run.log
    assert time.monotonic() - started < 10
    assert [message["messageId"] for message in run.handled] == sent
    assert "nothing arrived during the long poll: stopping" in run.log
    assert Message.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_python_consumer_gives_up_on_a_wrong_password_instead_of_retrying_into_a_lock(
    start_consumer: StartConsumer,
):
    run = start_consumer(PASSWORD="not-the-password").finished()

    assert run.returncode == 1
    assert run.log.count("BAD_CREDENTIALS") == 1, run.log
    assert "giving up: 401 BAD_CREDENTIALS" in run.log
    assert run.handled == []


@pytest.mark.django_db(transaction=True)
def test_two_consumers_with_their_own_device_ids_share_the_messages_without_duplicates(
    start_consumer: StartConsumer, credentials: AdapterCredentials, partner: User
):
    sent = send(sender=partner, to=credentials.adapter_id, count=30)

    first = start_consumer(DEVICE_ID="erp-consumer-1", STOP_WHEN_IDLE="1", WAIT_SECONDS="1")
    second = start_consumer(DEVICE_ID="erp-consumer-2", STOP_WHEN_IDLE="1", WAIT_SECONDS="1")
    runs = [first.finished(), second.finished()]

    assert [run.returncode for run in runs] == [0, 0], [run.log for run in runs]
    handled = [message["messageId"] for run in runs for message in run.handled]
    assert sorted(handled) == sorted(sent)  # each message once, by one of the two
    assert Message.objects.count() == 0
    assert acked_ids(credentials.adapter_id) == set(sent)


def later(time_machine: TimeMachineFixture, seconds: int) -> None:
    """The server's clock (this process's: the live server is a thread of it) ``seconds`` ahead,
    and running on; the consumer's own clock is not moved."""
    time_machine.move_to(timezone.now() + timedelta(seconds=seconds))


@pytest.mark.django_db(transaction=True)
def test_the_python_consumer_refreshes_an_expired_token_and_skips_the_message_whose_ack_failed(
    settings: Any,
    start_consumer: StartConsumer,
    credentials: AdapterCredentials,
    partner: User,
    long_polls: LongPolls,
    time_machine: TimeMachineFixture,
):
    # The receive succeeds, the ACK fails with 401 TOKEN_EXPIRED.
    settings.JWT_ACCESS_TTL_SECONDS = 60
    consumer = start_consumer(DEVICE_ID="erp-consumer-1", STOP_AFTER="1", WAIT_SECONDS="15")
    long_polls.waiting(1)
    later(time_machine, settings.JWT_ACCESS_TTL_SECONDS + 1)  # the token expires during the wait
    [message_id] = send(sender=partner, to=credentials.adapter_id, count=1)

    run = consumer.finished()

    assert run.returncode == 0, run.log
    assert in_order(
        run.log,
        "401 TOKEN_EXPIRED: refreshing",
        "refreshed the token pair",
        f"skipped {message_id}: already handled (redelivered: True)",
        f"ACK {message_id}: acked",
    ), run.log
    assert [message["messageId"] for message in run.handled] == [message_id]  # handled once
    assert Message.objects.count() == 0
    assert DeliveryLog.objects.get(message_id=message_id).receive_count == 2
    # Refreshing kept the one session.
    assert Session.objects.filter(user_id=credentials.adapter_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_python_consumer_signs_in_again_when_its_refresh_token_has_expired(
    settings: Any,
    start_consumer: StartConsumer,
    credentials: AdapterCredentials,
    partner: User,
    long_polls: LongPolls,
    time_machine: TimeMachineFixture,
):
    settings.JWT_ACCESS_TTL_SECONDS = 60
    settings.JWT_REFRESH_TTL_SECONDS = 120
    # The first long poll outlives both tokens (the clock moves as it starts to wait, so it cannot
    # end first); the next receive and the refresh answer 401, and the consumer signs in again.
    long_polls.before_waiting(1, lambda: later(time_machine, settings.JWT_REFRESH_TTL_SECONDS + 1))
    consumer = start_consumer(DEVICE_ID="erp-consumer-1", STOP_AFTER="1", WAIT_SECONDS="1")
    long_polls.waiting(2)
    assert Session.objects.filter(user_id=credentials.adapter_id).count() == 2
    [message_id] = send(sender=partner, to=credentials.adapter_id, count=1)

    run = consumer.finished()

    assert run.returncode == 0, run.log
    assert in_order(
        run.log,
        "401 TOKEN_EXPIRED: refreshing",
        "refresh failed with TOKEN_EXPIRED: signing in again",
        "signed in as erp-bridge",
        f"ACK {message_id}: acked",
    ), run.log
    assert [message["messageId"] for message in run.handled] == [message_id]
    assert Message.objects.count() == 0


def with_the_client_installed(env: dict[str, str]) -> dict[str, str]:
    """A reader's shell after `pip install ./clients/python`: exchange-client and the package
    on hand (this virtualenv's bin)."""
    return {**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}


@pytest.mark.django_db(transaction=True)
def test_the_ten_line_client_consumer_handles_and_acks_every_message(
    live_server: LiveServer, tmp_path: Path, credentials: AdapterCredentials, partner: User
):
    sent = send(sender=partner, to=credentials.adapter_id, count=3)
    script = tmp_path / "consumer.py"
    script.write_text(runnable("client-consumer", "python"))

    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=with_the_client_installed(environment(live_server, credentials)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    code = [line for line in runnable("client-consumer", "python").splitlines() if line.strip()]
    assert len(code) <= 10
    assert [line.split()[0] for line in result.stdout.splitlines()] == sent
    assert result.stdout.splitlines()[0] == f"{sent[0]} order.created {{'orderId': 0}}"
    assert Message.objects.count() == 0
    assert acked_ids(credentials.adapter_id) == set(sent)


@pytest.mark.django_db(transaction=True)
def test_the_client_command_lines_send_consume_and_count_as_printed(
    live_server: LiveServer, credentials: AdapterCredentials
):
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", runnable("client-cli", "sh")],
        env=with_the_client_installed(environment(live_server, credentials)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    [sent] = DeliveryLog.objects.filter(recipient_id=credentials.adapter_id)
    assert result.stdout.splitlines() == [
        f'{{"messageId":"{sent.message_id}","duplicate":false}}',
        f'{{"messageId":"{sent.message_id}","type":"demo.hello","payload":{{"hello":"world"}}}}',
        '{"available":0,"inFlight":0,"delayed":0,"deadLettered":0,"oldestAgeSeconds":null}',
    ]
    assert sent.acked_by == "d:demo-cli-1"


@pytest.mark.django_db(transaction=True)
def test_the_client_topics_example_publishes_once_and_each_subscriber_gets_a_copy(
    live_server: LiveServer,
    tmp_path: Path,
    cabinet_user: User,
    credentials: AdapterCredentials,
    partner: User,
):
    # What the reader's owner did on /bus: a topic, with the reader's adapter and another
    # subscribed to it.
    topic = topic_create(owner=cabinet_user, name="prices")
    for adapter_id in (credentials.adapter_id, partner.pk):
        subscription_put(user=cabinet_user, topic=topic, adapter_id=adapter_id, types=None)
    script = tmp_path / "topics.py"
    script.write_text(runnable("client-topics", "python"))

    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=with_the_client_installed(
            environment(live_server, credentials, TOPIC_ID=str(topic.pk))
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    me = credentials.adapter_id
    assert result.stdout.splitlines() == [
        "2 0 True",
        "2 0 False",
        "2 0 False",
        f"price.changed {{'sku': 'A-1', 'price': 10}} True {me}",
        f"price.changed {{'sku': 'B-2', 'price': 20}} True {me}",
        f"price.changed {{'sku': 'C-3', 'price': 30}} True {me}",
    ]
    by_sku = {
        publication.payload["sku"]: publication.publication_id
        for publication in Publication.objects.all()
    }
    publications = [by_sku["A-1"], by_sku["B-2"], by_sku["C-3"]]
    assert len(by_sku) == 3
    # The reader's copies were acknowledged; the other subscriber's wait, one per publication.
    acked = DeliveryLog.objects.filter(recipient_id=me)
    assert {logged.publication_id for logged in acked} == set(publications)
    assert acked.count() == 3
    waiting = Message.objects.filter(recipient=partner).order_by("seq")
    assert [(m.publication_id, m.topic_id, m.sender_id) for m in waiting] == [
        (publication_id, topic.pk, me) for publication_id in publications
    ]
