"""DRF content negotiation that answers the usual Accept headers without parsing them, and the
one of event streams, which must be asked for by name."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

# What adapters and browsers' fetch() send; each selects the first renderer under DRF's own rules.
PLAIN_ACCEPTS = frozenset({"*/*", "application/json"})


class ContentNegotiation(DefaultContentNegotiation):
    """The API renders JSON only (and problem+json for errors): a request that accepts anything or
    JSON gets the first renderer at once, anything else goes through DRF's negotiation (and its
    406). Negotiation runs on every request, and DRF's parses the Accept header each time: a
    measurable share of a request as small as whoami (docs/performance.md has the figures)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        candidates = list(renderers)
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        if (
            accept in PLAIN_ACCEPTS
            and format_suffix is None
            and candidates
            and candidates[0].media_type == "application/json"
            and (
                not request.META.get("QUERY_STRING")  # no query string to parse for ?format=
                or self.settings.URL_FORMAT_OVERRIDE not in request.query_params
            )
        ):
            return candidates[0], candidates[0].media_type
        selected: tuple[BaseRenderer, str] = super().select_renderer(
            request, candidates, format_suffix
        )
        return selected


EVENT_STREAM = "text/event-stream"


class EventStreamRenderer(JSONRenderer):
    """The media type of a view that answers with Server-Sent Events (an EventStream response,
    which is no DRF Response and renders itself). Its errors are problem+json, rendered as JSON."""

    media_type = EVENT_STREAM
    format = "event-stream"


class EventStreamNegotiation(ContentNegotiation):
    """An event stream is what a client must ask for by name: an Accept header without
    text/event-stream (*/*, application/json, none at all) is 406 NOT_ACCEPTABLE, so that a
    client that expects JSON never gets a stream that does not end."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        accepted = {
            item.split(";", 1)[0].strip().lower()
            for item in request.META.get("HTTP_ACCEPT", "").split(",")
        }
        if EVENT_STREAM not in accepted:
            raise NotAcceptable()
        return super().select_renderer(request, renderers, format_suffix)
