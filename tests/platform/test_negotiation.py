"""The fast content negotiation answers exactly as DRF's own does."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from platform_site.negotiation import ContentNegotiation

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "",
    "text/html",
    "application/json; indent=4",
    "application/*",
    "text/html, */*;q=0.1",
    "application/xml",
]


def outcome(negotiation: DefaultContentNegotiation, accept: str | None, path: str, renderers):
    headers = {} if accept is None else {"accept": accept}
    request = Request(APIRequestFactory().get(path, headers=headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
    except NotAcceptable:
        return "406"
    except Http404:  # ?format= naming no renderer
        return "404"
    return type(renderer).__name__, media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("path", ["/api/exchange/whoami", "/api/exchange/whoami?format=api"])
@pytest.mark.parametrize(
    "renderers",
    [[JSONRenderer()], [JSONRenderer(), BrowsableAPIRenderer()], [BrowsableAPIRenderer()]],
    ids=["json", "json+browsable", "browsable"],
)
def test_it_selects_what_drf_selects(
    accept: str | None, path: str, renderers: list[BaseRenderer]
) -> None:
    assert outcome(ContentNegotiation(), accept, path, renderers) == outcome(
        DefaultContentNegotiation(), accept, path, renderers
    )


def test_the_api_still_refuses_what_it_cannot_render(client) -> None:
    response = client.get("/api/exchange/whoami", HTTP_ACCEPT="text/html")

    assert response.status_code == 406
    assert response.json()["code"] == "NOT_ACCEPTABLE"
