"""Periodic upkeep of the exchange, run by Celery beat (safe to run twice, or on every worker)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.utils import timezone

from exchange.models import IdempotencyKey
from exchange.services.history import delivery_log_partitions_maintain
from exchange.services.queues import IDEMPOTENCY_KEY_HOURS, queues_trim
from exchange.services.traffic import traffic_compact
from exchange.services.webhooks import webhook_attempts_expire


@shared_task(name="exchange.delivery_log_partitions_maintain")
def delivery_log_partitions_maintain_task() -> dict[str, list[str]]:
    changes = delivery_log_partitions_maintain()
    return {"created": changes.created, "dropped": changes.dropped}


@shared_task(name="exchange.idempotency_keys_expire")
def idempotency_keys_expire_task() -> int:
    """Forget Idempotency-Keys after a day: a replay later than that sends a new message."""
    cutoff = timezone.now() - timedelta(hours=IDEMPOTENCY_KEY_HOURS)
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted


@shared_task(name="exchange.queues_trim")
def queues_trim_task() -> dict[str, int]:
    trimmed = queues_trim()
    return {
        "expired": trimmed.expired,
        "dropped": trimmed.dropped,
        "publications": trimmed.publications,
    }


@shared_task(name="exchange.webhook_attempts_expire")
def webhook_attempts_expire_task() -> int:
    """Forget webhook attempts older than EXCHANGE_WEBHOOK_LOG_DAYS."""
    return webhook_attempts_expire()


@shared_task(name="exchange.traffic_compact")
def traffic_compact_task() -> dict[str, int]:
    """Traffic's old minutes to their hours, and its old hours dropped."""
    compacted = traffic_compact()
    return {"minutes": compacted.minutes, "hours": compacted.hours}
