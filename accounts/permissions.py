"""Who may call what (docs/sessions.md, "Tokens and sessions"): adapters the exchange API,
cabinet users their own endpoints, and a user whose administrator required a new password only
the allow-list."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.errors import PasswordChangeRequired
from accounts.services.tokens import ROLE_ADAPTER, ROLE_PASSWORD_RESET_REQUIRED, ROLE_USER
from accounts.session_rules import Action, password_change_allows
from platform_site.errors import ApplicationError, PermissionDeniedError


def _role(request: Request) -> str | None:
    auth = getattr(request, "auth", None)
    return getattr(getattr(auth, "claims", None), "role", None)


def _password_change_required(request: Request) -> bool:
    """By the token's role, or by the flag itself: tokens issued before an administrator set it
    are held to the allow-list too, from their very next request."""
    if _role(request) == ROLE_PASSWORD_RESET_REQUIRED:
        return True
    return _role(request) == ROLE_USER and bool(
        getattr(request.user, "reset_password_required", False)
    )


class IsAdapter(BasePermission):
    message = "Only adapters may use the exchange API."
    # What it answers, for the schema (accounts.schema), as every guard here says.
    refusals: tuple[type[ApplicationError], ...] = (PermissionDeniedError, PasswordChangeRequired)

    def has_permission(self, request: Request, view: Any) -> bool:
        if _password_change_required(request):
            raise PasswordChangeRequired()
        return _role(request) == ROLE_ADAPTER


class IsCabinetUser(BasePermission):
    """A cabinet user in the normal state; one who must change the password gets 403
    PASSWORD_CHANGE_REQUIRED."""

    message = "Only cabinet users may use this API."
    refusals: tuple[type[ApplicationError], ...] = (PermissionDeniedError, PasswordChangeRequired)

    def has_permission(self, request: Request, view: Any) -> bool:
        if _password_change_required(request):
            raise PasswordChangeRequired()
        return _role(request) == ROLE_USER


class IsCabinetUserDoing(BasePermission):
    """A cabinet user doing ``action``: one who must change the password only an action of the
    allow-list (accounts.session_rules.WHILE_PASSWORD_CHANGE_REQUIRED, the cabinet's too)."""

    message = "Only cabinet users may use this API."

    def __init__(self, action: Action) -> None:
        self.action = action

    @property
    def refusals(self) -> tuple[type[ApplicationError], ...]:
        if password_change_allows(self.action):
            return (PermissionDeniedError,)
        return (PermissionDeniedError, PasswordChangeRequired)

    def has_permission(self, request: Request, view: Any) -> bool:
        if _password_change_required(request) and not password_change_allows(self.action):
            raise PasswordChangeRequired()
        return _role(request) in (ROLE_USER, ROLE_PASSWORD_RESET_REQUIRED)
