"""The platform's URLs plus /bench/bare: a plain Django view, the floor of any request."""

from django.http import HttpRequest, JsonResponse
from django.urls import path

from platform_site.urls import urlpatterns as platform_urlpatterns


def bare(request: HttpRequest) -> JsonResponse:
    """No DRF, no authentication, no database: Django and its middleware only."""
    return JsonResponse({"ok": True})


# First, as the platform's own first pattern is the exchange API: a view at the end of the list
# would pay for every pattern Django tries before it, and the floor would sit lower than a plain
# view's.
urlpatterns = [path("bench/bare", bare), *platform_urlpatterns]

handler404 = "platform_site.errors.handler404"
handler500 = "platform_site.errors.handler500"
