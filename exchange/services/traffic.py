"""An adapter's traffic over time (docs/exchange.md, "Traffic over time"): what the statements
that move messages counted (exchange/traffic_queries.py), read as points over a range, and its
upkeep: minutes move to their hours after TRAFFIC_MINUTES_HOURS, hours go after
TRAFFIC_HOURS_DAYS (traffic_compact, run by Celery beat). Nothing here has to run for a minute's
figures to be seen: they are written as the messages move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.db import connection
from django.utils import timezone

from exchange import traffic_queries
from exchange.services.queues import in_batches

TRAFFIC_MINUTES_HOURS = 48
TRAFFIC_HOURS_DAYS = 90

Counted = Literal["refused", "queued"]


@dataclass(frozen=True)
class Range:
    steps: int
    step: int  # seconds


# The ranges the API and the charts show: the last hour and day by the minute, the last week by
# the hour. Each ends with the step now.
RANGES = {
    "1h": Range(steps=60, step=60),
    "24h": Range(steps=24 * 60, step=60),
    "7d": Range(steps=7 * 24, step=3600),
}


@dataclass(frozen=True)
class Point:
    at: datetime  # the start of the step
    sent: int
    received: int
    acked: int
    dead_lettered: int
    refused: int
    depth: int  # the queue's depth at the end of the step (now, for the step now)


@dataclass(frozen=True)
class Traffic:
    range: str
    step: int
    points: list[Point]


def traffic_points(*, adapter_ids: Sequence[int], range_name: str) -> dict[int, Traffic]:
    """Each adapter's points over one of RANGES, a point for every step, oldest first, in one
    statement whatever the number of adapters. KeyError for a range that is not one of them."""
    span = RANGES[range_name]
    points: dict[int, list[Point]] = {adapter_id: [] for adapter_id in adapter_ids}
    with connection.cursor() as cursor:
        cursor.execute(
            traffic_queries.POINTS,
            {"adapters": list(adapter_ids), "steps": span.steps, "step": span.step},
        )
        for adapter_id, *point in cursor.fetchall():
            points[adapter_id].append(Point(*point))
    return {
        adapter_id: Traffic(range=range_name, step=span.step, points=adapter_points)
        for adapter_id, adapter_points in points.items()
    }


def traffic_add(*, adapter_id: int, counted: Counted, n: int) -> None:
    """Count what no statement that moves messages counts: sends a full queue refused, a
    message queued by the ORM (a webhook's test event)."""
    with connection.cursor() as cursor:
        cursor.execute(traffic_queries.ADD, {"adapter": adapter_id, "counted": counted, "n": n})


@dataclass(frozen=True)
class Compacted:
    minutes: int
    hours: int


def traffic_compact(*, now: datetime | None = None) -> Compacted:
    """Minutes older than TRAFFIC_MINUTES_HOURS (whole hours of them) added to their hours, and
    hours older than TRAFFIC_HOURS_DAYS dropped, in batches of their own transactions. Safe to
    run any number of times, and late: until it runs, the minutes are read where they are."""
    now = now or timezone.now()
    cutoff = (now - timedelta(hours=TRAFFIC_MINUTES_HOURS)).replace(
        minute=0, second=0, microsecond=0
    )
    minutes = in_batches(traffic_queries.MINUTES_MOVE, {"cutoff": cutoff})
    hours = in_batches(
        traffic_queries.HOURS_DROP, {"cutoff": now - timedelta(days=TRAFFIC_HOURS_DAYS)}
    )
    return Compacted(minutes=minutes, hours=hours)
