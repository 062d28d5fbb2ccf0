"""When a session may serve a request, and what a user whose password change is required may do:
the one definition every door calls (the API's authentication and refresh, the cabinet's
middleware, the session lists).

The rules are plain functions of rows already read, with no I/O of their own, so an event-loop
caller can apply them to rows it read asynchronously; ``live_sessions`` states the same rule for a
query.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Exists, OuterRef, Q

from accounts.errors import DeviceMismatch, TokenExpired, TokenRevoked
from accounts.models import Session, User
from platform_site.errors import ApplicationError


def session_refusal(
    session: Session | None, *, user_id: int, device_key: str | None, now: datetime
) -> ApplicationError | None:
    """Why ``session`` (read with its user) may not serve a request of user ``user_id`` from
    ``device_key``; None when it may. A session is live while it is not revoked, its user is
    active and it has not reached its absolute end; it serves only the device it was bound to
    (``device_key`` None: the door binds otherwise, as the cabinet's cookie does)."""
    if session is None or session.user_id != user_id:
        return TokenRevoked()
    if session.revoked_at is not None or not session.user.is_active:
        return TokenRevoked()
    if session.expires_at <= now:
        return TokenExpired("The session has reached its maximum age: sign in again.")
    if device_key is not None and session.device_key != device_key:
        return DeviceMismatch()
    return None


def live_sessions(now: datetime) -> Q:
    """session_refusal's liveness as a filter of Session rows. The user's state is an EXISTS on
    the user alone, not a join: Django turns a joined filter of an UPDATE into "pk IN (SELECT ...)",
    which PostgreSQL's recheck after a row lock does not run again (accounts.services.sessions)."""
    return Q(
        Exists(User.objects.filter(pk=OuterRef("user_id"), is_active=True)),
        revoked_at__isnull=True,
        expires_at__gt=now,
    )


class Action(enum.Enum):
    """What a request does, where the rules need to tell: each door names its operations so."""

    READ_PROFILE = "read-profile"
    CHANGE_PASSWORD = "change-password"  # noqa: S105 (an action, not a password)
    SIGN_OUT = "sign-out"
    # The cabinet's pages around them: static files, the language switch, the development outbox.
    PAGE_SUPPORT = "page-support"


# A user whose administrator required a new password may do only these until it is changed
# (docs/sessions.md); refresh and logout take no access token, so the API never asks.
WHILE_PASSWORD_CHANGE_REQUIRED = frozenset(
    {Action.READ_PROFILE, Action.CHANGE_PASSWORD, Action.SIGN_OUT, Action.PAGE_SUPPORT}
)


def password_change_allows(action: Action | None) -> bool:
    """Whether a user whose password change is required may do ``action`` (None: anything not
    named)."""
    return action in WHILE_PASSWORD_CHANGE_REQUIRED


View = TypeVar("View", bound=Callable[..., Any])
_ACTION = "session_action"


def performs(action: Action) -> Callable[[View], View]:
    """Names the ``action`` a cabinet view (a view function) performs, for the rules above."""

    def name(view: View) -> View:
        setattr(view, _ACTION, action)
        return view

    return name


def action_of(view: Any) -> Action | None:
    """The action ``performs`` named for ``view``; None for a view that names none."""
    action: Action | None = getattr(view, _ACTION, None)
    return action
