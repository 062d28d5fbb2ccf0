"""The two ways of counting a rate limit (platform_site.ratelimits) agree: django-ratelimit's, in
the shared cache, and the session check's, in its Redis round trip (accounts.liveness). Both
count in fixed windows that end at an offset of each key's own; here every second of two
windows is tried for several rates and keys, and the counts of one window are compared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import RequestFactory
from django_ratelimit.core import get_usage

from accounts import liveness
from platform_site.ratelimits import Limit, counter_key, rate_limit_count

RATES = ["5/m", "10/5m", "3/s", "100/h"]
KEYS = ["adapter:1", "adapter:2", "email:ada@example.com", "203.0.113.7"]
START = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def django_ratelimit_window_end(limit: Limit, now: int) -> int:
    """When django-ratelimit's current window for ``limit`` ends, as its public answer says."""
    request = RequestFactory().get("/")
    usage = get_usage(
        request, group=limit.group, key=lambda group, request: limit.key, rate=limit.rate
    )
    assert usage is not None
    return now + int(usage["time_left"])


def seconds_tried(limit: Limit, period: int) -> list[int]:
    """The seconds of two windows to try: every one of windows up to five minutes; of longer
    ones, the five around each end of a window (as ours counts it) and every minute between. A
    window end of django-ratelimit's elsewhere than ours differs from ours at one of them."""
    span = 2 * period
    if span <= 600:
        return list(range(span))
    first_end = counter_key(limit, int(START.timestamp()))[2] - int(START.timestamp())
    around = {end + d for end in range(first_end % period, span, period) for d in range(-2, 3)}
    return sorted(second for second in around | set(range(0, span, 60)) if 0 <= second < span)


@pytest.mark.slow  # every second tried of two windows, for each rate and key
@pytest.mark.parametrize("rate", RATES)
def test_both_paths_end_their_windows_in_the_same_second(rate: str) -> None:
    period = counter_key(Limit("g", "k", rate), 0)[1] - 1
    for key in KEYS:
        limit = Limit("g", key, rate)
        for second in seconds_tried(limit, period):
            moment = START + timedelta(seconds=second)
            with time_machine.travel(moment, tick=False):
                now = int(moment.timestamp())
                assert counter_key(limit, now)[2] == django_ratelimit_window_end(limit, now), (
                    key,
                    second,
                )


def test_both_paths_count_one_window_alike(sessions_remembered: Any, settings: Any) -> None:
    limit = Limit("exchange", "adapter:7", "3/m")
    request = RequestFactory().get("/")
    with time_machine.travel(START, tick=False):
        by_django_ratelimit = [rate_limit_count(request, [limit])[0] for _ in range(4)]
        counted = [liveness.checked(user_id=7, limits=[limit])[1] for _ in range(4)]

    assert [usages[0] if usages else None for usages in counted] == by_django_ratelimit
    assert [usage.exceeded for usage in by_django_ratelimit] == [False, False, False, True]
