"""The platform's own series: queue depth by state, oldest age, dead letters, redeliveries,
sign-ins by outcome and lockouts."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from exchange.metrics import QueueCollector
from exchange.models import DeadLetter, Message
from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


def scrape(client, settings) -> str:
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ["health", "prometheus"]
    return client.get("/actuator/prometheus").content.decode()


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert match, series
    return float(match.group(1))


def test_queue_depth_oldest_age_and_dead_letters_are_read_from_the_database(
    adapter, client, settings, monkeypatch
):
    monkeypatch.setattr("exchange.metrics.CACHE_SECONDS", 0.0)
    Message.objects.create(recipient=adapter, type="t", payload={})
    Message.objects.create(recipient=adapter, type="t", payload={})
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE exchange_message SET visible_at = statement_timestamp() + interval '1 hour', "
            "lease_token = gen_random_uuid() WHERE seq = (SELECT min(seq) FROM exchange_message)"
        )
    DeadLetter.objects.create(
        message_id="00000000-0000-0000-0000-0000000000bb",
        recipient=adapter,
        type="t",
        payload={},
        enqueued_at="2026-11-21T09:00:00Z",
        receive_count=10,
        reason="MAX_DELIVERIES",
    )

    text = scrape(client, settings)

    assert value(text, 'platform_exchange_queue_depth{state="available"}') == 1
    assert value(text, 'platform_exchange_queue_depth{state="in_flight"}') == 1
    assert value(text, 'platform_exchange_queue_depth{state="delayed"}') == 0
    assert value(text, "platform_exchange_dead_letters") == 1
    assert value(text, "platform_exchange_oldest_message_age_seconds") >= 0


def test_queue_figures_are_cached_between_scrapes(adapter):
    collector = QueueCollector()
    first = {m.name: m.samples for m in collector.collect()}
    Message.objects.create(recipient=adapter, type="t", payload={})

    second = {m.name: m.samples for m in collector.collect()}

    assert first == second


def test_sign_ins_are_counted_by_outcome_and_lockouts_counted(adapter, client, settings):
    before = scrape(client, settings)
    for _ in range(5):
        ApiClient().sign_in("erp", "wrong")
    ApiClient().sign_in("erp")

    after = scrape(client, settings)

    def delta(series: str) -> float:
        return value(after, series) - (value(before, series) if series in before else 0.0)

    assert delta('platform_sign_ins_total{outcome="bad_credentials"}') == 5
    assert delta('platform_sign_ins_total{outcome="locked"}') == 1
    assert delta("platform_account_lockouts_total") == 1


def test_redeliveries_are_counted(consumer, adapter, client, settings):
    before = scrape(client, settings)
    Message.objects.create(recipient=adapter, type="t", payload={})
    consumer.call("get", "/api/exchange/messages")
    consumer.call("get", "/api/exchange/messages")

    after = scrape(client, settings)

    previous = (
        value(before, "platform_exchange_redeliveries_total")
        if "platform_exchange_redeliveries_total " in before
        else 0
    )
    assert value(after, "platform_exchange_redeliveries_total") - previous == 1
