"""An adapter's webhook, as its owner configures it (docs/exchange.md, "Webhooks"); the delivery
is exchange/webhooks/delivery.py.

Enabling a webhook (creating it, turning it on again, pointing it elsewhere) starts afresh: the
endpoint's health is forgotten, and every message waiting unleased gets a new schedule and is
pushed at once. Whatever changes tells the adapter's streams and the deliverers (the ``w``
notification, exchange/wakeups.py): a stream of an adapter whose webhook is enabled ends with
WEBHOOK_ACTIVE, and the deliverers read the enabled webhooks again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.factor_secrets import secret_encrypt
from accounts.models import User
from accounts.services.notices import Notice, notice_send
from exchange import queries
from exchange.errors import WebhookDisabled, WebhookNotFound
from exchange.models import Message, Webhook, WebhookAttempt
from exchange.services.traffic import traffic_add
from exchange.webhooks.signing import secret_new
from exchange.webhooks.targets import url_problem
from platform_site.errors import ValidationFailed

TEST_EVENT_TYPE = "webhook.test"
ATTEMPTS_SHOWN = 100

# The adapter's unleased messages start their schedule afresh, pushed at once.
_RESTART = """
UPDATE exchange_message
SET push_attempts = 0, visible_at = least(visible_at, statement_timestamp())
WHERE recipient_id = %(recipient)s AND lease_token IS NULL
"""
_CHANGED = "SELECT pg_notify('exchange_message', 'w' || %(recipient)s)"


@dataclass(frozen=True)
class WebhookSet:
    webhook: Webhook
    secret: str | None  # shown when the webhook was created, only then


def webhook_url_validate(url: str) -> str:
    problem = url_problem(url, allow_private=settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE)
    if problem is not None:
        raise ValidationFailed({"url": [problem]})
    return url


def webhook_get(*, adapter: User) -> Webhook:
    try:
        return Webhook.objects.get(adapter=adapter)
    except Webhook.DoesNotExist:
        raise WebhookNotFound() from None


@transaction.atomic
def webhook_put(
    *, adapter: User, url: str | None = None, enabled: bool | None = None
) -> WebhookSet:
    """Create the adapter's webhook (at ``url``, enabled unless ``enabled`` is False), or change
    its URL, whether it is enabled, or both: what is None stays as it is, read under the row's
    lock (a toggle never undoes a URL changed meanwhile). WebhookNotFound for a change of a
    webhook that does not exist."""
    if url is not None:
        webhook_url_validate(url)
    webhook = Webhook.objects.select_for_update().filter(adapter=adapter).first()
    secret = None
    if webhook is None:
        if url is None:
            raise WebhookNotFound()
        secret = secret_new()
        enabled = enabled is not False
        webhook = Webhook(
            adapter=adapter, url=url, enabled=enabled, secret=_sealed(adapter, secret)
        )
        restart = enabled
    else:
        url = webhook.url if url is None else url
        enabled = webhook.enabled if enabled is None else enabled
        restart = enabled and (not webhook.enabled or webhook.url != url)
        webhook.url, webhook.enabled = url, enabled
    if restart:
        webhook.disabled_reason = None
        webhook.failing_since = webhook.paused_until = None
        webhook.consecutive_failures = 0
    webhook.save()
    with connection.cursor() as cursor:
        if restart:
            cursor.execute(_RESTART, {"recipient": adapter.pk})
        cursor.execute(_CHANGED, {"recipient": adapter.pk})
        if not enabled:  # long polls may take the messages now
            cursor.execute(queries.NOTIFY, {"recipients": [adapter.pk]})
    return WebhookSet(webhook=webhook, secret=secret)


@transaction.atomic
def webhook_delete(*, adapter: User) -> None:
    """Delete the webhook with its log; the messages are received as before it."""
    deleted, _ = Webhook.objects.filter(adapter=adapter).delete()
    if not deleted:
        raise WebhookNotFound()
    WebhookAttempt.objects.filter(adapter=adapter).delete()
    with connection.cursor() as cursor:
        cursor.execute(_CHANGED, {"recipient": adapter.pk})
        cursor.execute(queries.NOTIFY, {"recipients": [adapter.pk]})


@transaction.atomic
def webhook_secret_rotate(*, adapter: User) -> str:
    """A new secret; the current one stays valid, and signs beside it, for the overlap."""
    webhook = Webhook.objects.select_for_update().filter(adapter=adapter).first()
    if webhook is None:
        raise WebhookNotFound()
    secret = secret_new()
    webhook.previous_secret = webhook.secret
    webhook.previous_secret_until = timezone.now() + timedelta(
        seconds=settings.EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS
    )
    webhook.secret = _sealed(adapter, secret)
    webhook.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return secret


@transaction.atomic
def webhook_test_send(*, adapter: User) -> Message:
    """Queue a test event for the adapter (type ``webhook.test``, from no adapter): pushed,
    retried and logged as any message is. WebhookDisabled unless it is enabled."""
    if not webhook_get(adapter=adapter).enabled:
        raise WebhookDisabled()
    message = Message.objects.create(
        recipient=adapter,
        sender=None,
        type=TEST_EVENT_TYPE,
        payload={"test": True, "sentAt": timezone.now().isoformat()},
    )
    traffic_add(adapter_id=adapter.pk, counted="queued", n=1)
    with connection.cursor() as cursor:
        cursor.execute(queries.NOTIFY, {"recipients": [adapter.pk]})
    return message


def webhook_attempts(*, adapter: User, limit: int = ATTEMPTS_SHOWN) -> list[WebhookAttempt]:
    """The newest attempts first (the log keeps EXCHANGE_WEBHOOK_LOG_DAYS)."""
    webhook_get(adapter=adapter)
    return list(WebhookAttempt.objects.filter(adapter=adapter).order_by("-at", "-id")[:limit])


def webhook_attempts_expire() -> int:
    cutoff = timezone.now() - timedelta(days=settings.EXCHANGE_WEBHOOK_LOG_DAYS)
    deleted, _ = WebhookAttempt.objects.filter(at__lt=cutoff).delete()
    return deleted


def webhook_disabled_notify(*, adapter_id: int, reason: str) -> None:
    """Tell the owner that the deliverer disabled their adapter's webhook (GONE or FAILING)."""
    adapter = User.objects.select_related("owner").filter(pk=adapter_id).first()
    if adapter is None or adapter.owner is None:
        return
    notice_send(
        Notice.ADAPTER_WEBHOOK_DISABLED,
        user=adapter.owner,
        adapter=adapter.username,
        reason=reason,
    )


def _sealed(adapter: User, secret: str) -> str:
    return secret_encrypt(user_id=adapter.pk, secret=secret, purpose="webhook")
