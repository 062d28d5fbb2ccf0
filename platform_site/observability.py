"""Request ids, one JSON log line per request, and the request timer behind the HTTP metrics."""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import lru_cache
from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, HttpResponse
from pythonjsonlogger.json import JsonFormatter

from platform_site import metrics
from platform_site.deferral import PASS_KEY, Pass

logger = logging.getLogger("platform.request")

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is kept only when it cannot forge log lines or blow up their size.
_ACCEPTABLE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)


class RequestIdLogFilter(logging.Filter):
    """Stamps every log record made while a request is handled with that request's id."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "requestId"):
            record.requestId = request_id_var.get()
        return True


class OutageRepeatLogFilter(logging.Filter):
    """Keeps django.request's line for a 503 out of the log.

    A 503 is the platform's own answer to a dependency it cannot reach for a moment (PostgreSQL,
    Redis): the code that decides it logs one WARNING, the request line records the answer, and
    the availability change is logged once. Django's ERROR line for every 5xx would add one more
    line per request for the length of the outage, at a level that pages people."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "status_code", None) != HTTPStatus.SERVICE_UNAVAILABLE


class JsonLogFormatter(JsonFormatter):
    """One JSON object per line: time (RFC 3339, UTC), level, logger, message, then the extras."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", "{message}")
        kwargs.setdefault("style", "{")
        super().__init__(*args, **kwargs)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = (
            datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        super().add_fields(log_data, record, message_dict)


@lru_cache(maxsize=1024)
def _template(route: str) -> str:
    # "api/users/adapters/<int:adapter_id>" -> "/api/users/adapters/{adapter_id}"; regex routes
    # lose their anchors and name their groups the same way.
    template = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route)
    template = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", template)
    template = template.removeprefix("^").removesuffix("$").removesuffix("\\Z")
    return "/" + template.lstrip("/") if template else "root"


def route_template(request: HttpRequest, status: int) -> str:
    """The ``uri`` of Spring's http.server.requests: the route, never the raw path."""
    match = request.resolver_match
    if match is not None and match.route is not None:
        return _template(match.route)
    if 300 <= status < 400:
        return "REDIRECTION"
    if status == 404:
        return "NOT_FOUND"
    return "UNKNOWN"


class RequestObservabilityMiddleware:
    """Outermost middleware: names the request, times it, logs it once and counts it."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A request the server deferred (platform_site.server) is one request, however many
        # passes it takes: the first pass's id and start, one log line and count at the last.
        passes: Pass | None = request.META.get(PASS_KEY)
        if passes is not None and passes.request_id is not None and passes.started is not None:
            request_id, started = passes.request_id, passes.started
        else:
            offered = request.headers.get(REQUEST_ID_HEADER, "")
            request_id = offered if _ACCEPTABLE_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex
            started = time.perf_counter()
        token = request_id_var.set(request_id)
        try:
            response: HttpResponse = self.get_response(request)
            if passes is not None and passes.deferral is not None and response.status_code < 300:
                passes.request_id, passes.started = request_id, started
                return response
            seconds = time.perf_counter() - started
            response[REQUEST_ID_HEADER] = request_id
            route = route_template(request, response.status_code)
            method = request.method if request.method in _KNOWN_METHODS else "UNKNOWN"
            exception = getattr(request, "unhandled_exception", None)
            metrics.http_request_observe(
                method=method,
                uri=route,
                status=response.status_code,
                exception=exception,
                seconds=seconds,
            )
            logger.info(
                "%s %s %s",
                method,
                request.path,
                response.status_code,
                extra={
                    "method": method,
                    "path": request.path,
                    "route": route,
                    "status": response.status_code,
                    "durationMs": round(seconds * 1000, 3),
                },
            )
            return response
        finally:
            request_id_var.reset(token)
