"""Browser sign-in: a Django session cookie that carries the id of a platform session.

Signing in through the cabinet runs the same services as the API and starts the same
accounts.Session row; the cookie session only points at it. So the sessions list shows browsers
too, and revoking a session (from the list, the admin, a password change) signs the browser out
on its next request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import login, logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone

from accounts.models import Session, User
from accounts.services.sessions import session_revoke
from accounts.services.sign_in import SignIn
from accounts.session_rules import action_of, password_change_allows, session_refusal

SESSION_KEY = "platform_session"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"

# Paths with their own authentication, untouched here. The administration is not among them:
# staff sign in through the cabinet's gate (accounts.admin_site), so a revoked session or a
# required password change reaches them there too.
NOT_CABINET = ("/api/", "/actuator/")
ADMIN_PREFIX = "/admin/"


def web_sign_in(request: HttpRequest, result: SignIn) -> None:
    """Log the browser in to ``result``'s session (the session key is rotated by login())."""
    login(request, result.user, backend=MODEL_BACKEND)
    request.session[SESSION_KEY] = str(result.session.pk)


def web_sign_out(request: HttpRequest) -> None:
    session_id = request.session.get(SESSION_KEY)
    if session_id and isinstance(request.user, User):
        session_revoke(user_id=request.user.pk, session_id=session_id, reason="logout")
    logout(request)


def current_session_id(request: HttpRequest) -> str | None:
    value = request.session.get(SESSION_KEY)
    return str(value) if value else None


def after_sign_in_path(user: User, target: str | None = None) -> str:
    """Where the client goes next (docs/cabinet.md): a required password change, then the
    profile, then ``target`` (a page of this site the sign-in was asked for) or /bus. Staff on
    their way to the administration need no profile."""
    if user.reset_password_required:
        return "/settings/password"
    if target and user.is_staff and target.startswith(ADMIN_PREFIX):
        return target
    if not (user.first_name and user.last_name and user.phone):
        return "/welcome"
    return target or "/bus"


class CabinetSessionMiddleware:
    """Signs out a browser whose platform session ended, and keeps a user whose administrator
    required a new password on the change-password page: the rules of accounts.session_rules,
    which the API applies too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(NOT_CABINET):
            return self.get_response(request)
        session_id = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
        if session_id and request.user.is_authenticated:
            session = Session.objects.select_related("user").filter(pk=session_id).first()
            # The cookie, not a device key, binds a browser to its session.
            refusal = session_refusal(
                session, user_id=request.user.pk, device_key=None, now=timezone.now()
            )
            if refusal is not None:
                logout(request)
                return redirect(f"/login?next={request.path}")
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.path.startswith(NOT_CABINET) or password_change_allows(action_of(view)):
            return None
        user = getattr(request, "user", None)  # lazy: read only for a cabinet page
        if isinstance(user, User) and user.reset_password_required:
            return redirect("/settings/password")
        return None
