"""Spring Boot Actuator's endpoints: the same URLs, bodies, statuses and media types.

Plain Django views: no authentication, no DRF negotiation, nothing between the probe and the check.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from functools import wraps
from typing import Any

import django
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from prometheus_client import generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from health import indicators
from platform_site import metrics
from platform_site.errors import NotAcceptable, ValidationFailed, problem_response

ACTUATOR_V3 = "application/vnd.spring-boot.actuator.v3+json"
ACTUATOR_MEDIA_TYPES = [
    ACTUATOR_V3,
    "application/vnd.spring-boot.actuator.v2+json",
    "application/json",
]
# Spring's own spelling of the Prometheus text format 0.0.4 (prometheus_client defaults to 1.0.0).
PROMETHEUS_TEXT = "text/plain;version=0.0.4;charset=utf-8"

View = Callable[..., HttpResponse]


def exposed(endpoint: str) -> Callable[[View], View]:
    """404 unless MANAGEMENT_ENDPOINTS_EXPOSURE lists ``endpoint``, as Spring does."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if endpoint not in settings.MANAGEMENT_ENDPOINTS_EXPOSURE:
                raise Http404(endpoint)
            return view(request, *args, **kwargs)

        return actuator_view(wrapper)

    return decorator


def actuator_view(view: View) -> View:
    # GET and HEAD only; other methods get 405, not a CSRF failure (nothing here reads cookies).
    return csrf_exempt(require_safe(view))


def actuator_response(
    request: HttpRequest, body: dict[str, Any], status: int = 200
) -> HttpResponse:
    """Compact JSON as the v3 vendor type, unless the client prefers v2 or application/json."""
    if request.headers.get("Accept", "").strip():
        content_type = request.get_preferred_type(ACTUATOR_MEDIA_TYPES)
        if content_type is None:
            return problem_response(NotAcceptable())
    else:
        content_type = ACTUATOR_V3
    return HttpResponse(
        json.dumps(body, separators=(",", ":")), status=status, content_type=content_type
    )


@actuator_view
def index(request: HttpRequest, *, prefix: str, internal: bool) -> HttpResponse:
    base = request.build_absolute_uri(prefix)

    def link(path: str, *, templated: bool = False) -> dict[str, Any]:
        return {"href": base + path, "templated": templated}

    exposure = settings.MANAGEMENT_ENDPOINTS_EXPOSURE
    links = {"self": link("")}
    if "health" in exposure:
        links["health"] = link("/health")
        links["health-path"] = link("/health/{*path}", templated=True)
    if "info" in exposure:
        links["info"] = link("/info")
    # Metrics live only on the internal prefix, which the reverse proxy never forwards.
    if internal and "metrics" in exposure:
        links["metrics"] = link("/metrics")
        links["metrics-requiredMetricName"] = link("/metrics/{requiredMetricName}", templated=True)
    if internal and "prometheus" in exposure:
        links["prometheus"] = link("/prometheus")
    return actuator_response(request, {"_links": links})


@exposed("health")
def health(request: HttpRequest) -> HttpResponse:
    components = {name: indicator() for name, indicator in sorted(indicators.indicators().items())}
    status = indicators.aggregate([component.status for component in components.values()])
    body = {
        "status": status,
        "components": {name: component.as_json() for name, component in components.items()},
    }
    return actuator_response(request, body, indicators.Health(status).http_status)


@exposed("health")
def health_path(request: HttpRequest, path: str) -> HttpResponse:
    if path == "liveness":
        # The process answers, so it is alive: restarting it would not help anything else.
        result = indicators.Health(indicators.UP)
    elif path == "readiness":
        result = indicators.readiness()
    elif path in (found := indicators.indicators()):
        result = found[path]()
    else:
        raise Http404(path)
    return actuator_response(request, result.as_json(), result.http_status)


@exposed("info")
def info(request: HttpRequest) -> HttpResponse:
    body: dict[str, Any] = {
        "build": {"name": "exchange-platform", "version": settings.PLATFORM_VERSION},
        "runtime": {"python": platform.python_version(), "django": django.get_version()},
    }
    if settings.GIT_COMMIT:
        body["git"] = {"commit": {"id": settings.GIT_COMMIT}}
    return actuator_response(request, body)


@exposed("metrics")
def metric_names(request: HttpRequest) -> HttpResponse:
    return actuator_response(request, {"names": sorted(metrics.meters(metrics.scrape_registry()))})


@exposed("metrics")
def metric(request: HttpRequest, name: str) -> HttpResponse:
    tags: list[tuple[str, str]] = []
    for tag in request.GET.getlist("tag"):
        key, separator, value = tag.partition(":")
        if not separator:
            message = "Each tag parameter must be in the form 'key:value'"
            return problem_response(ValidationFailed({"tag": [message]}, detail=message))
        tags.append((key, value))
    meter = metrics.meters(metrics.scrape_registry()).get(name)
    body = None if meter is None else metrics.meter_json(meter, tags)
    if body is None:
        raise Http404(name)
    return actuator_response(request, body)


@exposed("prometheus")
def prometheus(request: HttpRequest) -> HttpResponse:
    registry = metrics.scrape_registry()
    if "application/openmetrics-text" in request.headers.get("Accept", ""):
        exposition = openmetrics.generate_latest(registry)  # type: ignore[no-untyped-call]
        return HttpResponse(exposition, content_type=openmetrics.CONTENT_TYPE_LATEST)
    return HttpResponse(generate_latest(registry), content_type=PROMETHEUS_TEXT)
