"""The development outbox: the last e-mails and SMS, so a newcomer in the embedded mode can
finish every flow without a mail server or a phone. Served only with DEBUG."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.models import OutboxMessage

SHOWN = 50


def dev_outbox(request: HttpRequest) -> HttpResponse:
    if not settings.DEBUG:
        raise Http404()
    # Not "messages": that name is Django's notices in base.html.
    outbox = OutboxMessage.objects.order_by("-created_at", "-pk")[:SHOWN]
    response = render(request, "dev/outbox.html", {"outbox": outbox, "count": SHOWN})
    response["Cache-Control"] = "no-store"
    return response
