"""Account states that apply to every principal, cabinet user or adapter."""

from __future__ import annotations

from django.db import transaction

from accounts.models import User
from accounts.services.audit import Kind, audit
from accounts.services.lockout import gate_unlock
from accounts.services.sessions import sessions_revoke_for_user


@transaction.atomic
def account_set_active(*, user: User, active: bool, actor: User | None = None) -> User:
    """Disable or enable ``user``; disabling ends its sessions at once (adapters keep queues)."""
    if user.is_active == active:
        return user
    user.is_active = active
    user.save(update_fields=["is_active"])
    if not active:
        sessions_revoke_for_user(user=user, reason="disabled")
    audit(Kind.ACCOUNT_ENABLED if active else Kind.ACCOUNT_DISABLED, user=user, actor=actor)
    return user


@transaction.atomic
def account_require_password_change(*, user: User, actor: User | None) -> User:
    """An administrator's requirement: the user's tokens carry USER_PASSWORD_RESET_REQUIRED from
    the next refresh on, and the allow-list applies at once (it reads the flag on every request)."""
    user.reset_password_required = True
    user.save(update_fields=["reset_password_required"])
    audit(Kind.PASSWORD_CHANGE_REQUIRED, user=user, actor=actor)
    return user


@transaction.atomic
def account_unlock(*, user: User, actor: User | None) -> None:
    gate_unlock(user=user)
    audit(Kind.UNLOCKED, user=user, actor=actor)


@transaction.atomic
def account_sessions_revoke(*, user: User, actor: User | None, reason: str = "admin") -> int:
    ended = sessions_revoke_for_user(user=user, reason=reason)
    audit(Kind.SESSION_REVOKED, user=user, actor=actor, sessions=ended)
    return ended
