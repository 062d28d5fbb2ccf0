"""What the webhook deliverer posts and what came of it: the pushes, their outcomes, when each
is tried again (EXCHANGE_WEBHOOK_RETRY_SCHEDULE, Retry-After), and the parameters of the
statements that settle them (exchange/webhook_queries.py: SETTLE, HEALTH)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils.http import parse_http_date_safe

BREAKER_PAUSE_SECONDS = 5  # an open breaker's first pause; it doubles with each failed probe
BREAKER_MAX_PAUSE_SECONDS = 300
RETRY_AFTER_MAX_SECONDS = 3600


@dataclass(frozen=True)
class Push:
    """A claimed message and where it goes."""

    adapter_id: int
    url: str
    keys: tuple[bytes, ...]
    message_id: str
    lease_token: str
    attempt: int
    body: bytes


@dataclass(frozen=True)
class Outcome:
    push: Push
    at: datetime
    status: int | None
    outcome: str  # delivered, failed, timeout, refused
    latency_ms: int
    error: str
    delay: float  # seconds until the next attempt; negative: the schedule ran out
    gone: bool  # a 410: the endpoint asks to be disabled


def retry_delay(attempt: int, status: int | None, retry_after: str | None) -> float:
    """Seconds until attempt ``attempt`` + 1, or -1 when there is none (dead-lettered)."""
    schedule = settings.EXCHANGE_WEBHOOK_RETRY_SCHEDULE
    if attempt > len(schedule):
        return -1
    if status in (429, 503) and retry_after is not None:
        asked = retry_after_seconds(retry_after)
        if asked is not None:
            return min(asked, RETRY_AFTER_MAX_SECONDS)
    return schedule[attempt - 1]


def retry_after_seconds(value: str) -> float | None:
    """Retry-After as seconds: a number of them, or an HTTP date."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = parse_http_date_safe(value)  # RFC 9110's three date formats, as Unix seconds
    return None if when is None else max(when - time.time(), 0.0)


def settle_parameters(outcomes: Sequence[Outcome]) -> dict[str, list[Any]]:
    return {
        "ids": [o.push.message_id for o in outcomes],
        "tokens": [o.push.lease_token for o in outcomes],
        "delays": [o.delay for o in outcomes],
        "adapters": [o.push.adapter_id for o in outcomes],
        "attempts": [o.push.attempt for o in outcomes],
        "at": [o.at for o in outcomes],
        "statuses": [o.status for o in outcomes],
        "outcomes": [o.outcome for o in outcomes],
        "latencies": [o.latency_ms for o in outcomes],
        "errors": [o.error for o in outcomes],
    }


def health_parameters(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per endpoint, in the order of its outcomes: whether one succeeded, the failures after the
    last success (or all of them), whether one was a 410."""
    health: dict[int, list[Any]] = {}  # adapter: [succeeded, failures, gone]
    for outcome in sorted(outcomes, key=lambda o: o.at):
        entry = health.setdefault(outcome.push.adapter_id, [False, 0, False])
        if outcome.outcome == "delivered":
            entry[0], entry[1] = True, 0
        else:
            entry[1] += 1
        entry[2] = entry[2] or outcome.gone
    return {
        "adapters": list(health),
        "succeeded": [entry[0] for entry in health.values()],
        "failures": [entry[1] for entry in health.values()],
        "gone": [entry[2] for entry in health.values()],
        "breaker": settings.EXCHANGE_WEBHOOK_BREAKER_FAILURES,
        "pause": BREAKER_PAUSE_SECONDS,
        "max_pause": BREAKER_MAX_PAUSE_SECONDS,
        "disable_days": settings.EXCHANGE_WEBHOOK_DISABLE_AFTER_DAYS,
    }
