"""Webhook deliveries against real HTTP(S) endpoints on loopback (docs/exchange.md, "Webhooks"):
signatures (also checked by the standardwebhooks package), retries with the clock moved rather
than waited, Retry-After, 410, the circuit breaker, the address checks, the log and the rooms."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
from django.core import mail
from django.db import connection, connections
from django.utils import timezone
from exchange_client import webhooks

from accounts.models import OutboxMessage, User
from exchange.models import (
    DeadLetter,
    DeliveryLog,
    Message,
    Subscription,
    Topic,
    Webhook,
    WebhookAttempt,
)
from exchange.services.publishing import Publishing, topic_publish
from exchange.services.sending import message_send
from exchange.services.webhooks import webhook_put, webhook_secret_rotate
from exchange.webhooks.delivery import Deliverer
from exchange.webhooks.outcomes import Outcome
from platform_site.database import direct_connect_async
from platform_site.embedded import free_port
from tests.clients.test_cli import MESSAGE_MEMBERS
from tests.conftest import ApiClient
from tests.exchange.test_adapters_guide import runnable, with_the_client_installed
from tests.factories import AdapterFactory
from tests.receivers import Answer, Receiver, receiver, tls_for_localhost
from tests.stack.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)


@pytest.fixture(autouse=True)
def _webhook_settings(settings: Any) -> None:
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = True
    settings.EXCHANGE_WEBHOOK_RETRY_SCHEDULE = SCHEDULE
    settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS = 5


@pytest.fixture
def endpoint() -> Iterator[Receiver]:
    with receiver() as running:
        yield running


@pytest.fixture
def crm(owner: User) -> User:
    return AdapterFactory.create(username="crm", owner=owner)


def hooked(adapter: User, url: str) -> str:
    """Give ``adapter`` an enabled webhook at ``url``: its secret."""
    secret = webhook_put(adapter=adapter, url=url, enabled=True).secret
    assert secret is not None
    return secret


def send(sender: User, recipient: User, count: int = 1, **payload: Any) -> list[str]:
    return [
        str(
            message_send(
                sender=sender,
                to=recipient.pk,
                type="order.created",
                payload={"n": n, **payload},
                headers={"trace": "t-1"},
                idempotency_key=None,
            ).message_id
        )
        for n in range(count)
    ]


def deliver() -> list[Outcome]:
    return asyncio.run(Deliverer().deliver_once())


def clock_forward(seconds: float) -> None:
    """Move the platform's clock on by moving every stored moment back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE exchange_message SET visible_at = visible_at - make_interval(secs => %s)",
            [seconds],
        )
        cursor.execute(
            """UPDATE exchange_webhook
               SET paused_until = paused_until - make_interval(secs => %(s)s),
                   failing_since = failing_since - make_interval(secs => %(s)s),
                   previous_secret_until = previous_secret_until - make_interval(secs => %(s)s)""",
            {"s": seconds},
        )


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def paused(adapter: User) -> bool:
    """Whether the circuit breaker of the adapter's endpoint is open now."""
    until = Webhook.objects.get(adapter=adapter).paused_until
    return until is not None and until > timezone.now()


def seconds_until_visible(message_id: str) -> float:
    message = Message.objects.get(message_id=message_id)
    return (message.visible_at - timezone.now()).total_seconds()


def test_a_message_is_posted_signed_and_a_2xx_acknowledges_it(
    endpoint: Receiver, adapter: User, crm: User, consumer: ApiClient
) -> None:
    secret = hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)

    [outcome] = deliver()

    assert outcome.outcome == "delivered"
    assert outcome.status == 200
    [request] = endpoint.received
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == message_id
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 30
    body = request.json
    assert list(body) == MESSAGE_MEMBERS  # a received message's, in the same order
    assert (body["messageId"], body["deliveryCount"], body["redelivered"]) == (message_id, 1, False)
    assert (body["sender"], body["type"], body["payload"]) == (crm.pk, "order.created", {"n": 0})
    assert body["headers"] == {"trace": "t-1"}
    # The signature, by the specification's own verifier and by hand.
    assert standardwebhooks.Webhook(secret).verify(request.body, request.headers) == body
    signed = f"{message_id}.{request.headers['webhook-timestamp']}.".encode() + request.body
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert request.headers["webhook-signature"] == f"v1,{expected}"
    # Acknowledged: gone from the queue, logged, alreadyAcked to the adapter.
    assert not Message.objects.exists()
    assert DeliveryLog.objects.get(message_id=message_id).acked_by == "webhook"
    acked = consumer.call("post", f"/api/exchange/messages/{message_id}/ack")
    assert acked.json()["status"] == "alreadyAcked"
    [attempt] = WebhookAttempt.objects.all()
    assert (attempt.attempt, attempt.status, attempt.outcome, attempt.error) == (
        1,
        200,
        "delivered",
        "",
    )


def test_a_topics_copy_is_pushed_with_its_payload_topic_and_publication(
    endpoint: Receiver, adapter: User, crm: User, owner: User
) -> None:
    hooked(adapter, endpoint.url)
    topic = Topic.objects.create(owner=owner, name="prices")
    Subscription.objects.create(topic=topic, adapter=adapter)
    publication = Publishing(type="price.changed", payload={"p": 2}, headers={})
    published = topic_publish(publisher=crm, topic_id=topic.pk, publication=publication)

    [outcome] = deliver()

    assert outcome.outcome == "delivered"
    [request] = endpoint.received
    assert list(request.json) == MESSAGE_MEMBERS
    assert request.json["payload"] == {"p": 2}
    assert request.json["topicId"] == topic.pk
    assert request.json["publicationId"] == str(published.publication_id)
    logged = DeliveryLog.objects.get(message_id=request.headers["webhook-id"])
    assert (logged.payload, logged.publication_id) == (None, published.publication_id)


def test_a_forged_or_stale_delivery_fails_verification(
    endpoint: Receiver, adapter: User, crm: User
):
    secret = hooked(adapter, endpoint.url)
    send(crm, adapter)
    deliver()
    [request] = endpoint.received
    verifier = standardwebhooks.Webhook(secret)

    with pytest.raises(standardwebhooks.WebhookVerificationError):
        verifier.verify(request.body.replace(b"created", b"deleted"), request.headers)
    stale = {**request.headers, "webhook-timestamp": str(int(time.time()) - 3600)}
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        verifier.verify(request.body, stale)
    other = standardwebhooks.Webhook("whsec_" + base64.b64encode(b"k" * 32).decode())
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        other.verify(request.body, request.headers)


def test_both_secrets_sign_during_the_overlap_and_only_the_new_one_after(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS = 3600
    old = hooked(adapter, endpoint.url)
    new = webhook_secret_rotate(adapter=adapter)
    send(crm, adapter)
    deliver()

    first = endpoint.received[0]
    assert len(first.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        standardwebhooks.Webhook(secret).verify(first.body, first.headers)

    clock_forward(3601)
    send(crm, adapter)
    deliver()
    second = endpoint.received[1]
    assert len(second.headers["webhook-signature"].split(" ")) == 1
    standardwebhooks.Webhook(new).verify(second.body, second.headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(second.body, second.headers)


def test_failures_are_retried_on_the_schedule_then_dead_lettered(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_BREAKER_FAILURES = 100  # the breaker is another test's
    endpoint.answer = lambda _: Answer(status=500, body=b"x" * 300)
    hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)

    for attempt, delay in enumerate(SCHEDULE, start=1):
        [outcome] = deliver()
        assert (outcome.push.attempt, outcome.outcome, outcome.status) == (attempt, "failed", 500)
        assert delay - 5 < seconds_until_visible(message_id) <= delay
        assert deliver() == []  # not before its time
        clock_forward(delay)
    [last] = deliver()

    assert last.push.attempt == len(SCHEDULE) + 1
    assert not Message.objects.exists()
    dead = DeadLetter.objects.get(message_id=message_id)
    assert (dead.reason, dead.receive_count) == ("WEBHOOK_FAILED", 0)
    attempts = list(WebhookAttempt.objects.order_by("attempt"))
    assert [a.attempt for a in attempts] == list(range(1, len(SCHEDULE) + 2))
    assert all(a.error == "x" * 200 and a.outcome == "failed" for a in attempts)
    assert len(endpoint.received) == len(SCHEDULE) + 1
    assert {r.headers["webhook-id"] for r in endpoint.received} == {message_id}
    assert [r.json["deliveryCount"] for r in endpoint.received] == list(range(1, 9))


@pytest.mark.parametrize(
    ("status", "retry_after", "expected"),
    [(503, "120", 120), (429, "99999", 3600), (503, "soon", 5), (500, "120", 5)],
)
def test_429_and_503_honour_retry_after_capped_at_an_hour(
    endpoint: Receiver, adapter: User, crm: User, status: int, retry_after: str, expected: int
) -> None:
    endpoint.answer = lambda _: Answer(status=status, headers={"Retry-After": retry_after})
    hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)

    deliver()

    assert expected - 5 < seconds_until_visible(message_id) <= expected


def test_retry_after_as_a_date(endpoint: Receiver, adapter: User, crm: User) -> None:
    when = timezone.now() + timedelta(minutes=10)
    date = when.strftime("%a, %d %b %Y %H:%M:%S GMT")
    endpoint.answer = lambda _: Answer(status=429, headers={"Retry-After": date})
    hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)

    deliver()

    assert 590 < seconds_until_visible(message_id) <= 601


def test_a_redirect_is_a_failure_and_is_not_followed(
    endpoint: Receiver, adapter: User, crm: User
) -> None:
    endpoint.answer = lambda _: Answer(status=307, headers={"Location": endpoint.url + "/else"})
    hooked(adapter, endpoint.url)
    send(crm, adapter)

    [outcome] = deliver()

    assert (outcome.outcome, outcome.status) == ("failed", 307)
    assert [r.path for r in endpoint.received] == ["/hook"]


def test_a_410_disables_the_webhook_and_tells_the_owner(
    endpoint: Receiver, adapter: User, crm: User, cabinet: ApiClient, consumer: ApiClient
) -> None:
    endpoint.answer = lambda _: Answer(status=410)
    hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)

    deliver()

    shown = cabinet.call("get", f"/api/users/adapters/{adapter.pk}/webhook").json()
    assert (shown["enabled"], shown["disabledReason"]) == (False, "GONE")
    [notice] = [m for m in mail.outbox if m.subject == "An adapter's webhook was turned off"]
    assert notice.to == ["owner@example.com"]
    assert "erp" in notice.body
    assert "410" in notice.body
    assert "the platform's webhook delivery" in notice.body
    # The message waits, and nothing more is pushed: the adapter may receive it now.
    assert Message.objects.get(message_id=message_id).visible_at <= timezone.now()
    assert deliver() == []
    received = consumer.call("get", "/api/exchange/messages").json()["messages"]
    assert [m["messageId"] for m in received] == [message_id]


def test_days_of_failures_without_a_success_disable_it_as_failing(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_BREAKER_FAILURES = 100
    endpoint.answer = lambda _: Answer(status=500)
    hooked(adapter, endpoint.url)
    send(crm, adapter)
    deliver()
    assert Webhook.objects.get(adapter=adapter).failing_since is not None

    clock_forward(4 * 86400)
    send(crm, adapter)
    deliver()
    assert Webhook.objects.get(adapter=adapter).enabled

    clock_forward(86400)
    deliver()
    webhook = Webhook.objects.get(adapter=adapter)
    assert (webhook.enabled, webhook.disabled_reason) == (False, "FAILING")
    assert OutboxMessage.objects.filter(template="notice_adapter_webhook_disabled").count() == 1


def test_a_success_forgets_the_failures(endpoint: Receiver, adapter: User, crm: User) -> None:
    answers = iter([500, 500, 200])
    endpoint.answer = lambda _: Answer(status=next(answers))
    hooked(adapter, endpoint.url)
    send(crm, adapter)
    for _ in range(3):
        deliver()
        clock_forward(300)

    webhook = Webhook.objects.get(adapter=adapter)
    assert (webhook.consecutive_failures, webhook.failing_since) == (0, None)


def test_the_breaker_pauses_a_failing_endpoint_then_probes_it_one_at_a_time(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_BREAKER_FAILURES = 5
    endpoint.answer = lambda _: Answer(status=500)
    hooked(adapter, endpoint.url)
    send(crm, adapter, count=12)

    assert len(deliver()) == 10  # the endpoint's room: EXCHANGE_WEBHOOK_CONCURRENCY
    webhook = Webhook.objects.get(adapter=adapter)
    assert webhook.consecutive_failures == 10
    assert paused(adapter)
    assert deliver() == []  # paused, though two messages wait untried

    clock_forward(3600)
    assert len(deliver()) == 1  # half-open: one probe
    assert paused(adapter)

    endpoint.answer = lambda _: Answer(status=204)
    clock_forward(3600)
    [probe] = deliver()
    assert probe.outcome == "delivered"
    assert Webhook.objects.get(adapter=adapter).paused_until is None
    assert len(deliver()) == 10  # closed: the whole room again


def test_a_paused_endpoint_delays_no_other(
    endpoint: Receiver, adapter: User, crm: User, owner: User
) -> None:
    other = AdapterFactory.create(username="billing", owner=owner)
    with receiver() as failing:
        failing.answer = lambda _: Answer(status=500)
        hooked(adapter, failing.url)
        hooked(other, endpoint.url)
        send(crm, adapter, count=10)
        deliver()
        assert paused(adapter)

        send(crm, adapter, count=5)
        send(crm, other, count=5)
        outcomes = deliver()

    assert [o.push.adapter_id for o in outcomes] == [other.pk] * 5
    assert all(o.outcome == "delivered" for o in outcomes)


def test_two_claims_together_take_no_more_than_an_endpoints_room(
    endpoint: Receiver, adapter: User, crm: User
) -> None:
    hooked(adapter, endpoint.url)
    send(crm, adapter, count=25)

    async def claim_twice() -> tuple[int, int]:
        async with (
            await direct_connect_async(autocommit=True) as first,
            await direct_connect_async(autocommit=True) as second,
        ):
            taken = await asyncio.gather(Deliverer().claim(first), Deliverer().claim(second))
        return len(taken[0]), len(taken[1])

    assert sum(asyncio.run(claim_twice())) == 10


def test_a_slow_endpoint_times_out(endpoint: Receiver, adapter: User, crm: User, settings: Any):
    settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS = 1
    endpoint.answer = lambda _: Answer(delay=3)
    hooked(adapter, endpoint.url)
    send(crm, adapter)

    [outcome] = deliver()

    assert (outcome.outcome, outcome.status) == ("timeout", None)
    assert WebhookAttempt.objects.get().outcome == "timeout"


def test_a_refused_connection(adapter: User, crm: User) -> None:
    with receiver() as closed:
        url = closed.url
    hooked(adapter, url)
    send(crm, adapter)

    [outcome] = deliver()

    assert outcome.outcome == "refused"
    assert outcome.status is None


def test_a_name_that_resolves_to_loopback_is_refused(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = False
    # A name passes the check at configuration: its addresses are checked at each delivery.
    url = endpoint.url.replace("http://127.0.0.1", "https://localhost")
    hooked(adapter, url)
    send(crm, adapter)

    [outcome] = deliver()

    assert outcome.outcome == "refused"
    assert "resolves to 127.0.0.1" in outcome.error or "resolves to ::1" in outcome.error
    assert endpoint.received == []
    assert WebhookAttempt.objects.get().outcome == "refused"


def test_https_with_a_ca_of_ones_own(
    tmp_path: Path, adapter: User, crm: User, settings: Any
) -> None:
    tls, ca_file = tls_for_localhost(tmp_path)
    with receiver(tls=tls, name="localhost") as secure:
        hooked(adapter, secure.url)
        send(crm, adapter)
        [untrusted] = deliver()
        assert untrusted.outcome == "failed"
        assert "certificate" in untrusted.error.lower()

        settings.EXCHANGE_WEBHOOK_CA_BUNDLE = str(ca_file)
        clock_forward(5)
        [trusted] = deliver()

    assert trusted.outcome == "delivered"
    assert len(secure.received) == 1  # the untrusted attempt sent nothing


def test_the_log_lists_the_attempts_newest_first(
    endpoint: Receiver, adapter: User, crm: User, cabinet: ApiClient
) -> None:
    answers = iter([Answer(status=502, body=b"bad gateway"), Answer(status=200)])
    endpoint.answer = lambda _: next(answers)
    hooked(adapter, endpoint.url)
    [message_id] = send(crm, adapter)
    deliver()
    clock_forward(5)
    deliver()

    attempts = cabinet.call("get", f"/api/users/adapters/{adapter.pk}/webhook/attempts").json()

    first, second = attempts["attempts"][1], attempts["attempts"][0]
    assert (second["attempt"], second["status"], second["outcome"]) == (2, 200, "delivered")
    assert (first["attempt"], first["status"], first["outcome"]) == (1, 502, "failed")
    assert first["error"] == "bad gateway"
    assert first["messageId"] == message_id
    assert isinstance(first["latencyMs"], int)
    assert first["at"].endswith("Z")


def test_the_outcomes_are_counted(
    endpoint: Receiver, adapter: User, crm: User, client: Any, settings: Any
) -> None:
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ["health", "prometheus"]

    def count(outcome: str) -> float:
        text = client.get("/actuator/prometheus").content.decode()
        prefix = f'platform_exchange_webhook_deliveries_total{{outcome="{outcome}"}} '
        [line] = [line for line in text.splitlines() if line.startswith(prefix)]
        return float(line.split()[-1])

    before = count("delivered")
    hooked(adapter, endpoint.url)
    send(crm, adapter, count=3)
    deliver()

    assert count("delivered") == before + 3


def test_deliverers_running_together_post_each_message_once(
    endpoint: Receiver, adapter: User, crm: User, owner: User
) -> None:
    other = AdapterFactory.create(username="billing", owner=owner)
    endpoint.answer = lambda _: Answer(delay=0.05)
    hooked(adapter, endpoint.url)
    hooked(other, endpoint.url)
    sent = set(send(crm, adapter, count=60) + send(crm, other, count=60))

    async def run_three() -> None:
        stopping = asyncio.Event()
        runs = [asyncio.create_task(Deliverer().run(stopping)) for _ in range(3)]
        async with await direct_connect_async(autocommit=True) as watching:
            for _ in range(300):
                cursor = await watching.execute("SELECT count(*) FROM exchange_message")
                if (await cursor.fetchone()) == (0,):
                    break
                await asyncio.sleep(0.1)
        stopping.set()
        await asyncio.gather(*runs)

    asyncio.run(run_three())

    ids = [r.headers["webhook-id"] for r in endpoint.received]
    assert sorted(ids) == sorted(sent)  # each once
    assert not Message.objects.exists()
    assert json.loads(endpoint.received[0].body)["type"] == "order.created"
    assert DeliveryLog.objects.filter(message_id__in=[uuid.UUID(i) for i in sent]).count() == 120


def test_the_clients_verifier_takes_a_delivery_and_refuses_what_is_not_one(
    endpoint: Receiver, adapter: User, crm: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS = 3600
    old = hooked(adapter, endpoint.url)
    new = webhook_secret_rotate(adapter=adapter)
    [message_id] = send(crm, adapter)
    deliver()
    [request] = endpoint.received

    for secret in (old, new):
        message = webhooks.verify(secret, request.headers, request.body)
        assert (message.message_id, message.type, message.sender) == (
            message_id,
            "order.created",
            crm.pk,
        )
    assert webhooks.verify(new, request.headers, request.body.decode()).payload == {"n": 0}
    other = "whsec_" + base64.b64encode(b"k" * 32).decode()
    stale = {**request.headers, "webhook-timestamp": str(int(time.time()) - 301)}
    missing = {k: v for k, v in request.headers.items() if k != "webhook-signature"}
    for secret, headers, body in [
        (other, request.headers, request.body),
        (new, request.headers, request.body.replace(b"created", b"deleted")),
        (new, stale, request.body),
        (new, missing, request.body),
        (new, {**request.headers, "webhook-timestamp": "soon"}, request.body),
        ("whsec_not base64!", request.headers, request.body),
    ]:
        with pytest.raises(webhooks.WebhookVerificationError):
            webhooks.verify(secret, headers, body)


def test_the_guides_receiver_takes_deliveries_and_refuses_forgeries(
    tmp_path: Path, adapter: User, crm: User
) -> None:
    script = tmp_path / "receiver.py"
    script.write_text(runnable("webhook-receiver", "python"))
    port = free_port()
    secret = hooked(adapter, f"http://127.0.0.1:{port}/exchange")
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "WEBHOOK_SECRET": secret}
    env = with_the_client_installed({**env, "PORT": str(port)})
    process = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: port_open(port), timeout=15, what="the guide's receiver")
        [message_id] = send(crm, adapter)
        [outcome] = deliver()
        forged = httpx.post(
            f"http://127.0.0.1:{port}/exchange",
            content=b"{}",
            headers={"webhook-id": "x", "webhook-timestamp": str(int(time.time()))},
        )
    finally:
        process.terminate()
        printed, _ = process.communicate(timeout=10)

    assert (outcome.outcome, outcome.status) == ("delivered", 204)
    assert forged.status_code == 400
    assert printed.splitlines() == [f"{message_id} order.created {{'n': 0}}"]


def test_a_running_deliverer_hears_a_webhook_set_up_and_pushes_at_once(
    endpoint: Receiver, adapter: User, crm: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the notification can make it read the webhooks again: not the periodic refresh.
    monkeypatch.setattr("exchange.webhooks.delivery.REFRESH_SECONDS", 3600.0)
    [message_id] = send(crm, adapter)

    async def run_then_set_up() -> None:
        stopping = asyncio.Event()
        deliverer = Deliverer()
        running = asyncio.create_task(deliverer.run(stopping))
        await asyncio.to_thread(
            lambda: wait_until(lambda: deliverer.refresh_at > 0, timeout=15, what="a first read")
        )
        assert deliverer.webhooks == set()  # nothing to push yet
        await asyncio.to_thread(_hooked_in_thread, adapter, endpoint.url)
        await asyncio.to_thread(endpoint.wait_for, 1, 30)
        stopping.set()
        await running

    asyncio.run(run_then_set_up())

    assert [r.headers["webhook-id"] for r in endpoint.received] == [message_id]


def _hooked_in_thread(adapter: User, url: str) -> None:
    try:
        hooked(adapter, url)
    finally:
        connections.close_all()
