"""How the exchange API answers: JSON written out directly, deliveries as PostgreSQL rendered
them, and a long poll's answer deferred until a send may have brought a message."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from exchange.services.messages import Delivery
from exchange.wakeups import Ticket, wakeups
from platform_site.deferral import defer


def acked_results(acked: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"messageId": message_id, "status": status} for message_id, status in acked]


def deliveries_response(deliveries: list[Delivery], **before: Any) -> HttpResponse:
    """A JSON object of the members ``before`` (an ACK's results) and then ``messages``. Each
    delivery is already its JSON, rendered by PostgreSQL (exchange/queries.py)."""
    opening = _json(before)[:-1] + ("," if before else "")
    body = opening + '"messages":[' + ",".join(delivery.json for delivery in deliveries) + "]}"
    response = HttpResponse(body, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def long_poll(
    request: HttpRequest,
    answer: HttpResponse,
    deliveries: list[Delivery],
    ticket: Ticket,
    options: dict[str, Any],
    state: Any = None,
) -> HttpResponse:
    """``answer`` now if it has messages or the receive does not wait, else once a send may
    have brought one (the server looks again: platform_site.server) or ``waitSeconds`` are up."""
    if deliveries or not options["waitSeconds"]:
        return answer
    return defer(
        request,
        answer,
        seconds=options["waitSeconds"],
        wake=functools.partial(wakeups.arrival, ticket),
        limit=settings.EXCHANGE_LONG_POLL_MAX_WAITING,
        state=state,
    )


def json_response(data: Any, status: int = 200) -> HttpResponse:
    """The exchange's answers are plain JSON (strings, numbers, lists): written out directly,
    as DRF's JSONRenderer would write them, without a Response to render per request. DRF's
    negotiation has already refused any Accept header that JSON does not satisfy."""
    return HttpResponse(_json(data), content_type="application/json", status=status)


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
