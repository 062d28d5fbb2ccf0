"""The Content Security Policy of the platform's own pages (Django 5.2 has none built in).

The cabinet's pages load their script and stylesheet from /static/ and run no inline script, so
the policy allows only the site itself. Pages of libraries that use inline script or style (the
Swagger UI of /api/docs/, Django's admin) are left to their own headers.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
EXEMPT = ("/api/docs/", "/admin/")


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(EXEMPT):
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
