"""The accounts' rate limits (docs/sessions.md, "Rate limits"): the sign-in, registration,
confirmation and reset doors, counted by the flows themselves, and a signed-in cabinet user's
API requests. The machinery is platform_site.ratelimits."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from accounts.identifiers import identifier_key
from platform_site.clients import client_ip
from platform_site.ratelimits import Limit, rate_limit_consume_once


def auth_limits(request: HttpRequest, *, kind: str | None, identifier: str | None) -> list[Limit]:
    """The sign-in, registration, confirmation and reset doors, in the API and the cabinet: per
    client IP, and per account named (``kind``: email, username or requestId) in canonical form,
    so that look-alikes of one name share a counter (accounts.identifiers)."""
    limits = [Limit("auth-ip", client_ip(request), settings.ACCOUNTS_RATE_LIMIT_IP)]
    if kind is not None and identifier is not None:
        account = identifier_key(kind, identifier)
        limits.append(Limit("auth-account", account, settings.ACCOUNTS_RATE_LIMIT_ACCOUNT))
    return limits


def user_limits(user_id: int) -> list[Limit]:
    """A signed-in cabinet user's /api/users/* requests."""
    return [Limit("user", str(user_id), settings.ACCOUNTS_RATE_LIMIT_USER)]


def auth_limits_consume(
    request: HttpRequest | None, *, kind: str | None, identifier: str | None
) -> None:
    """Count an auth action (sign-in, registration, a code confirmed or resent, a password
    reset) against its limits (:func:`auth_limits`): called by the action's flow itself, which
    the API and the cabinet both call, so that no door can skip it. RateLimited (429, with the
    usage's headers) if a limit is exceeded; the usage answers in the response's X-Rate-Limit-*
    headers (platform_site.ratelimits.rate_limit_usage_of).

    A request counts once, whichever flow counts it first. Without a request (a management
    command, a service test) there is no client to count.
    """
    if request is not None:
        rate_limit_consume_once(
            request, lambda: auth_limits(request, kind=kind, identifier=identifier)
        )


def auth_limits_consume_refused(request: HttpRequest) -> None:
    """For a door that refused the request before any flow counted it (a body that cannot be
    read, or fails validation): it still counts against the client's IP, RateLimited if past."""
    auth_limits_consume(request, kind=None, identifier=None)
