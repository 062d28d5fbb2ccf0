"""What a cabinet page shows once, on the next page view and nowhere else: a new adapter
password, or a webhook's new secret (exchange/web/webhooks.py puts that one in the session).
/bus and an adapter's own page both show them, at their top."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest, HttpResponse

from exchange.web.webhook_cards import SHOWN_ONCE

CREDENTIALS_KEY = "adapter_credentials"  # shown once, on the next page view


def credentials_shown_once(request: HttpRequest, login: str, password: str) -> None:
    request.session[CREDENTIALS_KEY] = {"login": login, "password": password}


def shown_once(request: HttpRequest) -> dict[str, Any]:
    """A new password (``credentials``) or webhook secret (``webhook_secret``) to show: popped,
    it is on this one page view and nowhere else."""
    return {
        "credentials": request.session.pop(CREDENTIALS_KEY, None),
        "webhook_secret": request.session.pop(SHOWN_ONCE, None),
    }


def kept_from_caches(response: HttpResponse, secrets: Mapping[str, Any]) -> HttpResponse:
    if any(secrets.values()):
        response["Cache-Control"] = "no-store"  # no copy of the secret in any cache
    return response
