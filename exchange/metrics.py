"""The exchange's Prometheus series.

Counters are recorded by the workers (and add up across them); queue depth, oldest age and dead
letters are read from PostgreSQL when Prometheus scrapes, at most every CACHE_SECONDS, because
every worker would report the same shared numbers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from django.db import DatabaseError
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exchange.selectors import QueueStats, queue_totals

sent = Counter(
    "platform_exchange_messages_sent",
    "Messages accepted by the exchange API (a publication's copies, one each)",
)
published = Counter(
    "platform_exchange_publications", "Publications to topics accepted by the exchange API"
)
redeliveries = Counter(
    "platform_exchange_redeliveries", "Deliveries of messages that had been delivered before"
)
sends_refused = Counter(
    "platform_exchange_sends_refused",
    "Sends refused for the recipient's sake, by reason (queue_full)",
    ["reason"],
)
sends_refused.labels("queue_full")
expired = Counter(
    "platform_exchange_messages_expired",
    "Messages moved to the dead letters unreceived after EXCHANGE_MESSAGE_RETENTION_DAYS",
)
purged = Counter("platform_exchange_messages_purged", "Messages deleted by their owners' purges")
dead_letters_dropped = Counter(
    "platform_exchange_dead_letters_dropped",
    "Dead letters dropped after EXCHANGE_DEAD_LETTER_DAYS",
)

CACHE_SECONDS = 10.0


def _families(totals: QueueStats | None) -> list[Metric]:
    depth = GaugeMetricFamily(
        "platform_exchange_queue_depth", "Messages in the queues by state", labels=["state"]
    )
    oldest = GaugeMetricFamily(
        "platform_exchange_oldest_message_age_seconds", "Age of the oldest undelivered message"
    )
    dead = GaugeMetricFamily("platform_exchange_dead_letters", "Messages in the dead letters")
    if totals is not None:
        depth.add_metric(["available"], totals.available)
        depth.add_metric(["in_flight"], totals.in_flight)
        depth.add_metric(["delayed"], totals.delayed)
        oldest.add_metric([], totals.oldest_age_seconds or 0)
        dead.add_metric([], totals.dead_lettered)
    return [depth, oldest, dead]


class QueueCollector(Collector):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> Iterator[Metric]:
        yield from _families(None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] > CACHE_SECONDS:
                try:
                    totals = queue_totals()
                except DatabaseError:
                    return  # no database, no queue figures: health says why
                self._cached = (time.monotonic(), _families(totals))
            families = self._cached[1]
        yield from families


# Push streams (exchange/streams.py).
STREAM_END_CODES = (
    "REPLACED",
    "TOKEN_EXPIRED",
    "TOKEN_REVOKED",
    "SHUTDOWN",
    "WEBHOOK_ACTIVE",
    "CLIENT_GONE",
)
streams_open = Gauge(
    "platform_exchange_streams_open",
    "Push streams open in the server processes (at EXCHANGE_STREAM_MAX_CONNECTIONS a process "
    "answers 503 SERVER_BUSY)",
    multiprocess_mode="livesum",
)
stream_ends = Counter(
    "platform_exchange_stream_ends",
    "Push streams ended, by why: the end event's code, or CLIENT_GONE when the client went away",
    ["code"],
)
for _code in STREAM_END_CODES:
    stream_ends.labels(_code)
streamed = Counter(
    "platform_exchange_messages_streamed", "Messages delivered on push streams (each delivery)"
)


# Webhooks (exchange/webhooks/delivery.py), counted by the process that delivers.
WEBHOOK_OUTCOMES = ("delivered", "failed", "timeout", "refused")
webhook_deliveries = Counter(
    "platform_exchange_webhook_deliveries",
    "Webhook delivery attempts, by outcome: delivered (a 2xx), failed (another answer or a broken "
    "connection), timeout, refused (a refused connection, or an address a webhook may not reach)",
    ["outcome"],
)
for _outcome in WEBHOOK_OUTCOMES:
    webhook_deliveries.labels(_outcome)
webhook_delivery_seconds = Histogram(
    "platform_exchange_webhook_delivery_seconds",
    "Time from a webhook POST's start to its answer (or its failure)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30),
)
