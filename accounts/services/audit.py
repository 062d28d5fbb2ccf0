"""The audit log of security events (docs/sessions.md, "The audit log"), with a Prometheus
counter per kind."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts import metrics
from accounts.models import AuditEvent, User
from platform_site.clients import client_ip

Kind = AuditEvent.Kind


def audit(
    kind: AuditEvent.Kind,
    *,
    user: User | None = None,
    actor: User | None = None,
    request: HttpRequest | None = None,
    identifier: str = "",
    **details: Any,
) -> AuditEvent:
    """Record ``kind``; ``request`` gives the client's IP and User-Agent."""
    event = AuditEvent.objects.create(
        kind=kind,
        user=user,
        actor=actor,
        identifier=identifier[:254],
        ip=(client_ip(request) or None) if request is not None else None,
        user_agent=request.META.get("HTTP_USER_AGENT", "")[:512] if request is not None else "",
        details=details,
    )
    metrics.security_events.labels(kind.value).inc()
    return event
