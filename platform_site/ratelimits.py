"""Rate limits (django-ratelimit counters in the shared cache) and their X-Rate-Limit-* headers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django_ratelimit.core import get_usage
from rest_framework.request import Request
from rest_framework.response import Response

from platform_site.errors import RateLimited


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

    def headers(self) -> dict[str, str]:
        return {
            "X-Rate-Limit-Limit": str(self.limit),
            "X-Rate-Limit-Remaining": str(self.remaining),
        }


def rate_limit_hit(request: HttpRequest, limits: Iterable[Limit]) -> Usage | None:
    """Count this request against every limit; RateLimited (429) if one is exceeded.

    Returns the tightest usage for the response headers, or None when no counter answered
    (limits disabled, or the cache is down and limits fail open).
    """
    tightest: Usage | None = None
    for limit in limits:
        usage = get_usage(
            request,
            group=limit.group,
            key=lambda group, request, value=limit.key: value,
            rate=limit.rate,
            increment=True,
        )
        if usage is None:
            continue
        current = Usage(
            limit=usage["limit"],
            remaining=max(0, usage["limit"] - usage["count"]),
            retry_after_seconds=max(1, usage["time_left"]),
        )
        if usage["should_limit"]:
            error = RateLimited(retry_after_seconds=current.retry_after_seconds)
            error.headers.update(current.headers())
            raise error
        if tightest is None or current.remaining < tightest.remaining:
            tightest = current
    return tightest


class RateLimitedApiMixin:
    """For DRF views: ``rate_limits()`` names the counters, checked after authentication."""

    def rate_limits(self, request: Request) -> list[Limit]:
        raise NotImplementedError

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        request.rate_limit_usage = rate_limit_hit(request._request, self.rate_limits(request))  # type: ignore[attr-defined]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        usage: Usage | None = getattr(request, "rate_limit_usage", None)
        if usage is not None:
            for name, value in usage.headers().items():
                response[name] = value
        return response
