"""platform_database_up, the series of the "database down" alert and the dashboard's
"PostgreSQL answers": the health check's db component, asked at each scrape."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.health.test_health import closed_port as closed_port
from tests.health.test_health import database_gone as database_gone

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def exposed(settings: Any) -> None:
    settings.MANAGEMENT_ENDPOINTS_EXPOSURE = ["health", "info", "metrics", "prometheus"]


def database_up(client: Client) -> list[float]:
    text = client.get("/actuator/prometheus").content.decode()
    return [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "platform_database_up"
    ]


def test_database_up_is_1_while_postgresql_answers(client: Client):
    assert database_up(client) == [1.0]


@pytest.mark.usefixtures("database_gone")
def test_database_up_is_0_in_the_scrape_while_postgresql_is_gone(client: Client):
    assert database_up(client) == [0.0]
