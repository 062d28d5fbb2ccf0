"""An adapter's webhook as its owner configures it, and what it changes for the adapter
(docs/exchange.md, "Webhooks"); the deliveries are tests/exchange/test_webhook_delivery.py's."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.factor_secrets import secret_decrypt
from accounts.models import User
from exchange.models import Message, Webhook, WebhookAttempt
from exchange.tasks import webhook_attempts_expire_task
from tests.conftest import ApiClient
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db

HOOK = "https://hooks.example.com/exchange"


def hook_path(adapter: User, tail: str = "") -> str:
    return f"/api/users/adapters/{adapter.pk}/webhook{tail}"


def test_creating_a_webhook_shows_its_secret_once(cabinet: ApiClient, adapter: User) -> None:
    created = cabinet.call("put", hook_path(adapter), {"url": HOOK})

    assert created.status_code == 200, created.content
    body = created.json()
    assert body["url"] == HOOK
    assert body["enabled"] is True
    assert body["secret"].startswith("whsec_")
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"))) == 32
    stored = Webhook.objects.get(adapter=adapter)
    assert body["secret"] not in stored.secret  # kept encrypted
    assert (
        secret_decrypt(user_id=adapter.pk, stored=stored.secret, purpose="webhook")
        == (body["secret"])
    )

    changed = cabinet.call("put", hook_path(adapter), {"url": HOOK + "/2", "enabled": False})
    assert changed.status_code == 200
    assert changed.json() == {"url": HOOK + "/2", "enabled": False}
    shown = cabinet.call("get", hook_path(adapter))
    assert shown.json() == {"url": HOOK + "/2", "enabled": False, "disabledReason": None}


def test_no_webhook_and_another_owners_adapter_are_not_found(
    cabinet: ApiClient, adapter: User
) -> None:
    stranger = AdapterFactory.create(username="theirs", owner=UserFactory.create(username="x"))
    Webhook.objects.create(adapter=stranger, url=HOOK, secret="v1:x")

    for path in (hook_path(adapter), hook_path(stranger)):
        for method in ("get", "delete"):
            answer = cabinet.call(method, path)
            assert (answer.status_code, answer.json()["code"]) == (404, "NOT_FOUND"), path
    for tail in ("/secret", "/test"):
        assert cabinet.call("post", hook_path(stranger, tail)).status_code == 404
    assert cabinet.call("get", hook_path(stranger, "/attempts")).status_code == 404
    assert cabinet.call("put", hook_path(stranger), {"url": HOOK}).status_code == 404
    assert Webhook.objects.get(adapter=stranger).url == HOOK


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",  # not https
        "ftp://hooks.example.com/x",
        "https:///x",
        "https://127.0.0.1/x",
        "https://10.1.2.3/x",
        "https://169.254.169.254/latest/meta-data",  # link-local: the cloud's metadata
        "https://[::1]/x",
        "https://[::ffff:127.0.0.1]/x",
        "https://[fe80::1]/x",
        "https://224.0.0.1/x",
        "https://0.0.0.0/x",
        "https://user:pw@hooks.example.com/x",
        "https://hooks.example.com:99999/x",
        "https://" + "a" * 2000 + ".example.com/",
    ],
)
def test_only_public_https_urls_are_accepted(
    cabinet: ApiClient, adapter: User, settings: Any, url: str
) -> None:
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = False

    answer = cabinet.call("put", hook_path(adapter), {"url": url})

    assert answer.status_code == 400, url
    assert answer.json()["code"] == "VALIDATION_FAILED"
    assert list(answer.json()["errors"]) == ["url"]
    assert not Webhook.objects.exists()


def test_allowing_private_targets_accepts_local_http(
    cabinet: ApiClient, adapter: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE = True

    answer = cabinet.call("put", hook_path(adapter), {"url": "http://127.0.0.1:9000/hook"})

    assert answer.status_code == 200


@pytest.mark.parametrize(
    "body",
    [{}, {"url": 5}, {"url": HOOK, "enabled": "yes"}, {"url": HOOK, "other": 1}, [HOOK]],
)
def test_a_malformed_body_is_refused(cabinet: ApiClient, adapter: User, body: Any) -> None:
    answer = cabinet.call("put", hook_path(adapter), body)

    assert answer.status_code == 400
    assert answer.json()["code"] in ("VALIDATION_FAILED", "UNKNOWN_FIELD")


def test_rotating_keeps_the_old_secret_for_the_overlap(
    cabinet: ApiClient, adapter: User, settings: Any
) -> None:
    settings.EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS = 3600
    first = cabinet.call("put", hook_path(adapter), {"url": HOOK}).json()["secret"]

    rotated = cabinet.call("post", hook_path(adapter, "/secret"))

    assert rotated.status_code == 200
    second = rotated.json()["secret"]
    assert second.startswith("whsec_")
    assert second != first
    webhook = Webhook.objects.get(adapter=adapter)
    assert secret_decrypt(user_id=adapter.pk, stored=webhook.secret, purpose="webhook") == second
    kept = secret_decrypt(user_id=adapter.pk, stored=webhook.previous_secret, purpose="webhook")
    assert kept == first
    assert webhook.previous_secret_until is not None
    expected = timezone.now() + timedelta(hours=1)
    assert abs((webhook.previous_secret_until - expected).total_seconds()) < 60


def test_an_enabled_webhook_stops_receives_and_a_disabled_one_does_not(
    cabinet: ApiClient, consumer: ApiClient, adapter: User
) -> None:
    Message.objects.create(recipient=adapter, type="t", payload={})
    cabinet.call("put", hook_path(adapter), {"url": HOOK})

    refused = consumer.call("get", "/api/exchange/messages")
    assert refused.status_code == 409
    assert refused.json()["code"] == "WEBHOOK_ACTIVE"
    acking = consumer.call(
        "post", "/api/exchange/messages/ack", {"messageIds": [str(uuid.uuid4())], "receive": {}}
    )
    assert acking.status_code == 409
    assert acking.json()["code"] == "WEBHOOK_ACTIVE"
    stats = consumer.call("get", "/api/exchange/stats")
    assert stats.status_code == 200
    assert stats.json()["available"] == 1

    cabinet.call("put", hook_path(adapter), {"url": HOOK, "enabled": False})
    received = consumer.call("get", "/api/exchange/messages")
    assert received.status_code == 200
    assert len(received.json()["messages"]) == 1

    cabinet.call("put", hook_path(adapter), {"url": HOOK})
    assert cabinet.call("delete", hook_path(adapter)).status_code == 200
    assert consumer.call("get", "/api/exchange/messages").status_code == 200
    assert cabinet.call("get", hook_path(adapter)).status_code == 404


def test_enabling_again_starts_the_waiting_messages_schedules_afresh(
    cabinet: ApiClient, adapter: User
) -> None:
    cabinet.call("put", hook_path(adapter), {"url": HOOK})
    later = timezone.now() + timedelta(hours=5)
    waiting = Message.objects.create(recipient=adapter, type="t", payload={})
    Message.objects.filter(pk=waiting.pk).update(push_attempts=6, visible_at=later)
    Webhook.objects.filter(adapter=adapter).update(
        enabled=False, disabled_reason="FAILING", consecutive_failures=40
    )
    assert cabinet.call("get", hook_path(adapter)).json()["disabledReason"] == "FAILING"

    cabinet.call("put", hook_path(adapter), {"url": HOOK, "enabled": True})

    waiting.refresh_from_db()
    assert waiting.push_attempts == 0
    assert waiting.visible_at <= timezone.now()
    webhook = Webhook.objects.get(adapter=adapter)
    assert (webhook.enabled, webhook.disabled_reason, webhook.consecutive_failures) == (
        True,
        None,
        0,
    )


def test_a_test_event_is_queued_for_an_enabled_webhook(cabinet: ApiClient, adapter: User) -> None:
    cabinet.call("put", hook_path(adapter), {"url": HOOK, "enabled": False})
    assert cabinet.call("post", hook_path(adapter, "/test")).json()["code"] == "WEBHOOK_DISABLED"

    cabinet.call("put", hook_path(adapter), {"url": HOOK})
    sent = cabinet.call("post", hook_path(adapter, "/test"))

    assert sent.status_code == 202
    message = Message.objects.get(message_id=sent.json()["messageId"])
    assert (message.recipient_id, message.sender_id, message.type) == (
        adapter.pk,
        None,
        "webhook.test",
    )


def test_the_attempts_log_starts_empty(cabinet: ApiClient, adapter: User) -> None:
    assert cabinet.call("get", hook_path(adapter, "/attempts")).status_code == 404
    cabinet.call("put", hook_path(adapter), {"url": HOOK})

    assert cabinet.call("get", hook_path(adapter, "/attempts")).json() == {"attempts": []}


def test_an_adapter_cannot_configure_webhooks(consumer: ApiClient, adapter: User) -> None:
    assert consumer.call("put", hook_path(adapter), {"url": HOOK}).status_code == 403


@pytest.mark.parametrize(
    "url",
    [
        "https://a\x00b.example.com/",
        "https://hooks.example.com/\x00",
        "https://[::1/x",
        "https://hooks.example.com:-1/",
        "https://%00/",
        "https://" + "\ud800" + ".example.com/",
        "https://hooks.example.com\\@10.0.0.1/",
        "https://пример.рф/",  # in punycode it passes: https://xn--e1afmkfd.xn--p1ai/
        "https://-hooks.example.com/",
    ],
)
def test_malformed_urls_are_refused_not_failed(cabinet: ApiClient, adapter: User, url: str):
    answer = cabinet.call_text(
        "put", hook_path(adapter), json.dumps({"url": url}), HTTP_ACCEPT="application/json"
    )

    assert answer.status_code == 400, answer.content


def test_the_log_forgets_attempts_after_its_days(adapter: User, settings: Any) -> None:
    settings.EXCHANGE_WEBHOOK_LOG_DAYS = 7
    Webhook.objects.create(adapter=adapter, url=HOOK, secret="v1:x")
    for days in (8, 6):
        WebhookAttempt.objects.create(
            adapter=adapter,
            message_id=uuid.uuid4(),
            attempt=1,
            at=timezone.now() - timedelta(days=days),
            outcome="delivered",
            latency_ms=3,
        )

    assert webhook_attempts_expire_task.delay().get() == 1

    [kept] = WebhookAttempt.objects.all()
    assert kept.at > timezone.now() - timedelta(days=7)
