"""Actuator URLs: /api/actuator for what the reverse proxy may publish, /actuator for all of it.

Metrics and the Prometheus exposition exist only under /actuator, which the proxy never forwards,
so they are reachable from the backend's own network alone.
"""

from django.urls import URLPattern, path

from health import views


def actuator_patterns(prefix: str, *, internal: bool) -> list[URLPattern]:
    index_kwargs = {"prefix": "/" + prefix, "internal": internal}
    patterns = [
        path(prefix, views.index, index_kwargs),
        path(f"{prefix}/", views.index, index_kwargs),
        path(f"{prefix}/health", views.health),
        path(f"{prefix}/health/<path:path>", views.health_path),
        path(f"{prefix}/info", views.info),
    ]
    if internal:
        patterns += [
            path(f"{prefix}/metrics", views.metric_names),
            path(f"{prefix}/metrics/<str:name>", views.metric),
            path(f"{prefix}/prometheus", views.prometheus),
        ]
    return patterns


urlpatterns = actuator_patterns("api/actuator", internal=False) + actuator_patterns(
    "actuator", internal=True
)
