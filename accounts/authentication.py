"""The API's one authentication: Bearer access tokens, each checked against its live session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from accounts import liveness
from accounts.devices import Device, device_of
from accounts.models import Session, User
from accounts.selectors import session_authenticate
from accounts.services.sessions import session_touch
from accounts.services.tokens import Claims, access_token_decode
from platform_site.deferral import arrived_at
from platform_site.errors import TokenMalformed
from platform_site.internals import http_request_of
from platform_site.ratelimits import Limit, Usage


@dataclass(frozen=True)
class Auth:
    """``request.auth`` of an authenticated request."""

    claims: Claims
    session: Session
    device: Device
    # The request's rate-limit usages, when authentication counted them (see counters below).
    counted: list[Usage] | None = None


if TYPE_CHECKING:

    class AuthenticatedRequest(Request):
        """What views behind AccessTokenAuthentication and a role permission receive."""

        @property
        def user(self) -> User: ...
        @user.setter
        def user(self, value: User) -> None: ...
        @property
        def auth(self) -> Auth: ...
        @auth.setter
        def auth(self, value: Auth) -> None: ...

else:
    AuthenticatedRequest = Request


class AccessTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <accessToken>``; no header at all is TOKEN_MISSING (401).

    ``counters`` names a view's rate limits by user id: with Redis they are counted in the round
    trip that checks the session (accounts.liveness), and ``request.auth.counted`` has the usages.
    """

    def __init__(self, counters: Callable[[int], list[Limit]] | None = None) -> None:
        self.counters = counters

    def authenticate(self, request: Request) -> tuple[User, Auth] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        # One scheme, one space, one token: anything else (line breaks, two tokens) is malformed.
        if scheme.lower() != "bearer" or not token or " " in token:
            raise TokenMalformed()
        # A request the server deferred (a long poll) is authenticated as of its arrival: its
        # token may expire while it waits, but its session must still be live at every pass.
        claims = access_token_decode(token, at=arrived_at(request))
        device = device_of(http_request_of(request))
        limits = self.counters(claims.user_id) if self.counters is not None else []
        session, counted = session_authenticate(claims=claims, device=device, limits=limits)
        if session_touch(session):
            liveness.forget(session.pk)
        return session.user, Auth(claims=claims, session=session, device=device, counted=counted)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
