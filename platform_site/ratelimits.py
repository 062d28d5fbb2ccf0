"""The rate-limit machinery: limits and their usages, their fixed windows, both ways of counting
them, and the X-Rate-Limit-* headers (docs/sessions.md, "Rate limits"). Which limits a request
counts against is its app's: accounts.ratelimits (the sign-in doors, the cabinet's API) and
exchange.api.views (the exchange API).

Two counting paths, one arithmetic: django-ratelimit counts in the shared cache
(``rate_limit_count``); with Redis, the exchange's and the API's session check counts in the same
Lua round trip that reads the session's revision (accounts.liveness), with the keys and windows
of ``counter_key``, which follows django-ratelimit's fixed windows (its window end, offset per
key). tests/accounts/test_rate_limits.py holds the two paths to the same counts and windows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django_ratelimit.core import get_usage
from django_redis import get_redis_connection
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.response import Response

from platform_site.deferral import kept
from platform_site.errors import RateLimited
from platform_site.internals import http_request_of, ratelimit_rate, ratelimit_window_end


@dataclass(frozen=True)
class Limit:
    group: str
    key: str
    rate: str


@dataclass(frozen=True)
class Usage:
    limit: int
    remaining: int
    retry_after_seconds: int
    exceeded: bool

    def headers(self) -> dict[str, str]:
        return {
            "X-Rate-Limit-Limit": str(self.limit),
            "X-Rate-Limit-Remaining": str(self.remaining),
        }


def counter_key(limit: Limit, now: int) -> tuple[str, int, int]:
    """For counting ``limit`` without django-ratelimit (accounts.liveness counts in the same
    Redis round trip as it reads the session's revision): the counter's key, its lifetime in
    seconds and the end of its window. Fixed windows, like django-ratelimit's, and like its
    windows they end at an offset of each key's own, so that not every counter starts over in the
    same second."""
    count, period = ratelimit_rate(limit.rate)
    window_end = ratelimit_window_end(limit.key, period, now)
    return f"rl:{limit.group}:{count}/{period}s:{limit.key}:{window_end}", period + 1, window_end


def usage_counted(limit: Limit, *, count: int, window_end: int, now: int) -> Usage:
    allowed, _ = ratelimit_rate(limit.rate)
    return Usage(
        limit=allowed,
        remaining=max(0, allowed - count),
        retry_after_seconds=max(1, window_end - now),
        exceeded=count > allowed,
    )


def rate_limit_count(request: HttpRequest, limits: Iterable[Limit]) -> list[Usage]:
    """Count this request against every limit with django-ratelimit; no usage for a counter that
    did not answer (limits disabled, or the cache is down and limits fail open)."""
    usages = []
    for limit in limits:
        usage = get_usage(
            request,
            group=limit.group,
            key=lambda group, request, value=limit.key: value,
            rate=limit.rate,
            increment=True,
        )
        if usage is not None:
            usages.append(
                Usage(
                    limit=usage["limit"],
                    remaining=max(0, usage["limit"] - usage["count"]),
                    retry_after_seconds=max(1, usage["time_left"]),
                    exceeded=usage["should_limit"],
                )
            )
    return usages


def rate_limit_enforce(usages: Iterable[Usage]) -> Usage | None:
    """RateLimited (429) if a counter is past its limit; else the tightest usage, for the
    response's headers (None when no counter answered)."""
    tightest: Usage | None = None
    for usage in usages:
        if usage.exceeded:
            error = RateLimited(retry_after_seconds=usage.retry_after_seconds)
            error.headers.update(usage.headers())
            raise error
        if tightest is None or usage.remaining < tightest.remaining:
            tightest = usage
    return tightest


def rate_limit_consume_once(request: HttpRequest, limits: Callable[[], Sequence[Limit]]) -> None:
    """Count a request against ``limits()`` once, however many parts of its handling ask (the
    first counts): RateLimited (429, with the usage's headers) if a limit is exceeded. The usage
    stays on the request for the response's X-Rate-Limit-* headers (:func:`rate_limit_usage_of`)."""
    if hasattr(request, _USAGES):
        return
    usages = rate_limit_count(request, limits())
    setattr(request, _USAGES, usages)
    rate_limit_enforce(usages)


# Where rate_limit_consume_once keeps a request's usages.
_USAGES = "rate_limit_usages"


def rate_limit_usage_of(request: HttpRequest) -> Usage | None:
    """The tightest usage a flow counted this request with (None if none counted, or no
    counter answered)."""
    usages: list[Usage] = getattr(request, _USAGES, [])
    return _tightest(usages)


def rate_limit_count_more(request: Request, limits: Sequence[Limit], amount: int) -> int:
    """For a request that stands for more than one unit against ``limits`` (a batch of
    messages, each counting once): count ``amount`` more, on the counters that counted the
    request itself, and answer how many of them fit within every limit. The response's
    X-Rate-Limit-* headers then show the count after them.

    Like refused requests, units that do not fit are counted all the same.
    """
    if amount <= 0:
        return amount
    if getattr(request.auth, "counted", None) is not None:
        counted = _count_in_redis(limits, amount)  # authentication counted there: so do we
    else:
        counted = _count_with_django_ratelimit(request, limits, amount)
    if counted is None:  # nothing answered: limits fail open
        return amount
    usage, fitting = counted
    request.rate_limit_usage = usage  # type: ignore[attr-defined]
    return fitting


def _count_in_redis(limits: Sequence[Limit], amount: int) -> tuple[Usage | None, int] | None:
    """``amount`` more on the Redis counters that accounts.liveness counts in (counter_key)."""
    now = int(time.time())
    counters = [counter_key(limit, now) for limit in limits]
    try:
        pipeline = get_redis_connection("default").pipeline(transaction=False)
        for key, seconds, _ in counters:
            pipeline.incrby(key, amount)
            pipeline.expire(key, seconds)
        replies = pipeline.execute()
    except RedisError:
        return None
    usages, fitting = [], amount
    for limit, count, (_, _, window_end) in zip(limits, replies[::2], counters, strict=True):
        usages.append(usage_counted(limit, count=count, window_end=window_end, now=now))
        allowed, _ = ratelimit_rate(limit.rate)
        fitting = min(fitting, max(0, amount - max(0, count - allowed)))
    return _tightest(usages), fitting


def _count_with_django_ratelimit(
    request: Request, limits: Sequence[Limit], amount: int
) -> tuple[Usage | None, int] | None:
    """``amount`` more on django-ratelimit's counters (without Redis: the local memory cache),
    which count one at a time."""
    usages: list[Usage] = []
    fitting = 0
    for _ in range(amount):
        usages = rate_limit_count(http_request_of(request), limits)
        if not usages:
            return None
        if not any(usage.exceeded for usage in usages):
            fitting += 1
    return _tightest(usages), fitting


def _tightest(usages: Iterable[Usage]) -> Usage | None:
    return min(usages, key=lambda usage: usage.remaining, default=None)


class RateLimitedApiMixin:
    """For DRF views: ``rate_limits()`` names the counters, checked after authentication."""

    def rate_limits(self, request: Request) -> list[Limit]:
        raise NotImplementedError

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        # A deferred request (a long poll: platform_site.server) is counted by its first pass;
        # the later ones answer with that pass's usage.
        passes = kept(request)
        if passes is not None and "rate_limit_usage" in passes:
            request.rate_limit_usage = passes["rate_limit_usage"]  # type: ignore[attr-defined]
            return
        # Authentication may have counted already, in the Redis round trip of its session check.
        usages = getattr(request.auth, "counted", None)
        if usages is None:
            usages = rate_limit_count(http_request_of(request), self.rate_limits(request))
        usage = rate_limit_enforce(usages)
        request.rate_limit_usage = usage  # type: ignore[attr-defined]
        if passes is not None:
            passes["rate_limit_usage"] = usage

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        usage: Usage | None = getattr(request, "rate_limit_usage", None)
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response
