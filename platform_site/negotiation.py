"""DRF content negotiation that answers the usual Accept headers without parsing them."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
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
