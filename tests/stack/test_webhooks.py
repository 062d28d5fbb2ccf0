"""Webhooks on the production server (deploy/serve): its processes deliver by themselves, and the
deliverer run on its own (EXCHANGE_WEBHOOK_DELIVERY_SEPARATE, `manage.py deliver_webhooks`) loses
nothing when it is killed mid-request, while another one does not post the same message while
that request is in flight."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.receivers import Answer, Receiver, receiver
from tests.stack.conftest import ROOT, Gunicorn, StackDatabase, wait_until
from tests.stack.processes import base_env, running, running_gunicorn
from tests.stack.test_waiting import SERVER_ENV, Signed, adapters_signed_in

pytestmark = pytest.mark.stack

TIMEOUT = 2  # EXCHANGE_WEBHOOK_TIMEOUT_SECONDS: a claim's lease is twice that
ENV = {
    **SERVER_ENV,
    "EXCHANGE_WEBHOOK_ALLOW_PRIVATE": "true",
    "EXCHANGE_WEBHOOK_TIMEOUT_SECONDS": str(TIMEOUT),
}


def hook(database: StackDatabase, adapter: Signed, url: str) -> None:
    database.shell(
        "from django.conf import settings\n"
        "settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = True\n"
        "from accounts.models import User\n"
        "from exchange.services.webhooks import webhook_put\n"
        f"webhook_put(adapter=User.objects.get(pk={adapter.adapter_id}), url={url!r}, "
        "enabled=True)\n"
    )


def send(server: Gunicorn, sender: Signed, recipient: Signed, count: int) -> list[str]:
    batch = [{"to": recipient.adapter_id, "type": "t", "payload": n} for n in range(count)]
    answer = httpx.post(
        f"{server.base_url}/api/exchange/messages/batch",
        json={"messages": batch},
        headers={"Authorization": f"Bearer {sender.access}", "X-Device-ID": sender.device},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return [result["messageId"] for result in answer.json()["results"]]


def waiting(database: StackDatabase, adapter: Signed) -> int:
    code = (
        "from exchange.models import Message\n"
        f"print(Message.objects.filter(recipient_id={adapter.adapter_id}).count())"
    )
    return int(database.shell(code).strip().splitlines()[-1])


@contextmanager
def deliverer(database: StackDatabase, log: Path) -> Iterator[int]:
    """`manage.py deliver_webhooks`, ready once it says so: its pid."""
    env = base_env(database, ENV)
    with running(
        [sys.executable, "manage.py", "deliver_webhooks"],
        log_path=log,
        env=env,
        cwd=ROOT,
        ready=lambda: "Delivering webhooks." in log.read_text(),
        what="the deliverer to start",
    ) as process:
        yield process.pid


@pytest.fixture
def endpoint() -> Iterator[Receiver]:
    with receiver() as running_receiver:
        yield running_receiver


def test_the_server_delivers_by_itself(
    stack_database: StackDatabase, tmp_path: Path, endpoint: Receiver
) -> None:
    sender, recipient = adapters_signed_in(stack_database, "hook-serve", 2)
    hook(stack_database, recipient, endpoint.url)

    with running_gunicorn(stack_database, tmp_path, ENV, workers=2) as server:
        sent = send(server, sender, recipient, 50)
        received = endpoint.wait_for(50, timeout=30)

    assert sorted(r.headers["webhook-id"] for r in received) == sorted(sent)
    assert {json.loads(r.body)["payload"] for r in received} == set(range(50))
    wait_until(lambda: waiting(stack_database, recipient) == 0, timeout=20, what="the ACKs")


def test_a_deliverer_killed_mid_request_loses_nothing_and_none_posts_twice_meanwhile(
    stack_database: StackDatabase, tmp_path: Path, endpoint: Receiver
) -> None:
    sender, recipient = adapters_signed_in(stack_database, "hook-kill", 2)
    hook(stack_database, recipient, endpoint.url)
    release = threading.Event()
    endpoint.answer = lambda _: Answer(delay=0 if release.is_set() else 3 * TIMEOUT)

    separate = {**ENV, "EXCHANGE_WEBHOOK_DELIVERY_SEPARATE": "true"}
    with running_gunicorn(stack_database, tmp_path / "serve", separate, workers=1) as server:
        [message_id] = send(server, sender, recipient, 1)
        with deliverer(stack_database, tmp_path / "first.log") as first:
            endpoint.wait_for(1)
            with deliverer(stack_database, tmp_path / "second.log"):
                # The first one's POST is in flight, under its lease: the second one waits.
                assert len(endpoint.wait_for(2, timeout=TIMEOUT * 0.75)) == 1
                os.kill(first, signal.SIGKILL)
                release.set()
                # The lease runs out: the second one posts it again, and its 2xx ACKs it.
                received = endpoint.wait_for(2, timeout=30)
                wait_until(
                    lambda: waiting(stack_database, recipient) == 0, timeout=20, what="the ACK"
                )

    assert [r.headers["webhook-id"] for r in received] == [message_id, message_id]
    assert [json.loads(r.body)["deliveryCount"] for r in received] == [1, 2]
