"""The delivery log's day partitions and the exchange's periodic tasks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from exchange.models import IdempotencyKey
from exchange.services.history import delivery_log_partitions_maintain
from exchange.tasks import delivery_log_partitions_maintain_task, idempotency_keys_expire_task
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db


def partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'exchange_delivery_log'"
        )
        return {row[0] for row in cursor.fetchall()}


def test_partitions_exist_for_today_and_a_week_ahead():
    today = timezone.now().date()

    delivery_log_partitions_maintain()

    assert {
        f"exchange_delivery_log_{today + timedelta(days=d):%Y%m%d}" for d in range(8)
    } <= partitions()


def test_running_again_changes_nothing():
    delivery_log_partitions_maintain()

    changes = delivery_log_partitions_maintain()

    assert (changes.created, changes.dropped) == ([], [])


def test_partitions_older_than_the_history_are_dropped_whole(settings):
    settings.EXCHANGE_HISTORY_DAYS = 7
    today = timezone.now().date()
    delivery_log_partitions_maintain()
    later = today + timedelta(days=10)
    oldest_kept = later - timedelta(days=7)
    # Every partition there is, not only today's week: a database made before midnight also
    # holds yesterday's.
    expired = sorted(
        name for name in partitions() if name < f"exchange_delivery_log_{oldest_kept:%Y%m%d}"
    )

    changes = delivery_log_partitions_maintain(today=later)

    assert expired
    assert changes.dropped == expired
    assert f"exchange_delivery_log_{oldest_kept:%Y%m%d}" in partitions()
    assert f"exchange_delivery_log_{later + timedelta(days=7):%Y%m%d}" in partitions()


def test_an_acked_message_lands_in_its_days_partition(consumer, adapter):
    from exchange.services.messages import messages_ack
    from exchange.services.sending import message_send

    sent = message_send(
        sender=adapter, to=adapter.pk, type="t", payload={}, headers={}, idempotency_key=None
    )
    messages_ack(adapter=adapter, device_key="d:x", message_ids=[sent.message_id])

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM exchange_delivery_log WHERE message_id = %s",
            [sent.message_id],
        )
        [(partition,)] = cursor.fetchall()
    assert partition == f"exchange_delivery_log_{timezone.now().date():%Y%m%d}"


def test_the_beat_schedule_runs_both_upkeep_tasks_hourly():
    schedule = {
        entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }

    assert schedule["exchange.delivery_log_partitions_maintain"] == timedelta(hours=1)
    assert schedule["exchange.idempotency_keys_expire"] == timedelta(hours=1)


def test_the_partition_task_reports_its_changes():
    result = delivery_log_partitions_maintain_task.apply().get()

    assert set(result) == {"created", "dropped"}


def test_idempotency_keys_are_forgotten_after_a_day():
    sender = AdapterFactory.create()
    IdempotencyKey.objects.create(
        sender=sender, key="old", message_id="00000000-0000-0000-0000-000000000001", body_hash="h"
    )
    IdempotencyKey.objects.create(
        sender=sender, key="new", message_id="00000000-0000-0000-0000-000000000002", body_hash="h"
    )
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))

    assert idempotency_keys_expire_task.apply().get() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
