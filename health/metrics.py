"""``platform_database_up``: the health check's db component as a number, asked when Prometheus
scrapes, for the dashboard and the "database down" alert of deploy/observability (the pool's
gauges cannot say it: a pool waits for a server that is gone)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from health import indicators

NAME = "platform_database_up"
HELP = (
    "1 when PostgreSQL accepts a new connection and answers SELECT 1 (the health check's db "
    "component), 0 when not; asked at each scrape"
)


class DatabaseCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(NAME, HELP)

    def collect(self) -> Iterator[Metric]:
        up = indicators.db_health().status == indicators.UP
        yield GaugeMetricFamily(NAME, HELP, value=1 if up else 0)
