"""Account states that apply to every principal, cabinet user or adapter."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts import liveness
from accounts.models import Session, User
from accounts.services.audit import Kind, audit
from accounts.services.lockout import gate_unlock
from accounts.services.sessions import session_revoke, sessions_revoke_for_user


@transaction.atomic
def account_set_active(*, user: User, active: bool, actor: User | None = None) -> User:
    """Disable or enable ``user``; disabling ends its sessions at once (adapters keep queues).
    A cabinet user's adapters follow them (``_adapters_follow_owner``)."""
    if user.is_active == active and not user.disabled_with_owner:
        return user
    followers = _followers(owner=user, active=active)
    with liveness.changing([user.pk, *(adapter.pk for adapter in followers)]):
        user.is_active = active
        # An adapter disabled or enabled by itself no longer waits for its owner's enabling.
        user.disabled_with_owner = False
        user.save(update_fields=["is_active", "disabled_with_owner"])
        if not active:
            sessions_revoke_for_user(user=user, reason="disabled")
        audit(Kind.ACCOUNT_ENABLED if active else Kind.ACCOUNT_DISABLED, user=user, actor=actor)
        _adapters_follow_owner(followers, active=active, actor=actor)
    return user


def _followers(*, owner: User, active: bool) -> list[User]:
    """The adapters of ``owner`` that its disabling disables (the active ones), or that its
    enabling enables (those its disabling disabled), locked."""
    if owner.kind != User.Kind.USER or owner.pk is None:
        return []
    adapters = User.objects.filter(owner=owner, kind=User.Kind.ADAPTER)
    following = (
        adapters.filter(disabled_with_owner=True) if active else adapters.filter(is_active=True)
    )
    return list(following.select_for_update().order_by("pk"))


def _adapters_follow_owner(adapters: list[User], *, active: bool, actor: User | None) -> None:
    """A disabled owner's adapters cannot sign in either, and their sessions end; each is marked
    ``disabled_with_owner``, so that enabling the owner enables those and only those (one the
    owner had disabled themselves stays disabled). Inside the caller's ``changing``."""
    for adapter in adapters:
        adapter.is_active = active
        adapter.disabled_with_owner = not active
        adapter.save(update_fields=["is_active", "disabled_with_owner"])
        if not active:
            sessions_revoke_for_user(user=adapter, reason="owner_disabled")
        audit(
            Kind.ACCOUNT_ENABLED if active else Kind.ACCOUNT_DISABLED,
            user=adapter,
            actor=actor,
            with_owner=True,
        )


@transaction.atomic
def account_require_password_change(*, user: User, actor: User | None) -> User:
    """An administrator's requirement: the user's tokens carry USER_PASSWORD_RESET_REQUIRED from
    the next refresh on, and the allow-list applies at once (it reads the flag on every request)."""
    with liveness.changing([user.pk]):
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


@transaction.atomic
def account_expire(*, user: User, actor: User | None) -> User:
    """End the account now: sign-in answers 403 ACCOUNT_EXPIRED and its sessions end."""
    now = timezone.now()
    with liveness.changing([user.pk]):
        user.account_expires_at = now
        user.save(update_fields=["account_expires_at"])
        sessions_revoke_for_user(user=user, reason="expired")
        audit(Kind.ACCOUNT_EXPIRY_SET, user=user, actor=actor, at=now.isoformat())
    return user


@transaction.atomic
def account_credentials_expire(*, user: User, actor: User | None) -> User:
    """Expire the password now: the next sign-in answers ACTION_RESET_PASSWORD."""
    now = timezone.now()
    with liveness.changing([user.pk]):
        user.credentials_expire_at = now
        user.save(update_fields=["credentials_expire_at"])
        audit(Kind.CREDENTIALS_EXPIRY_SET, user=user, actor=actor, at=now.isoformat())
    return user


@transaction.atomic
def account_edit(*, user: User, changed: set[str], actor: User | None) -> User:
    """Save an administrator's edit of ``user`` (the admin's change form: ``changed`` names the
    fields it changed) under the same rules as the acts above: disabling or an expiry already past
    ends the sessions (a cabinet user's adapters follow, as in ``account_set_active``), and each
    change is audited."""
    active_changed = "is_active" in changed
    followers = _followers(owner=user, active=user.is_active) if active_changed else []
    with liveness.changing([user.pk, *(adapter.pk for adapter in followers)]):
        if active_changed:
            user.disabled_with_owner = False
        user.save()
        if active_changed:
            if not user.is_active:
                sessions_revoke_for_user(user=user, reason="disabled")
            audit(
                Kind.ACCOUNT_ENABLED if user.is_active else Kind.ACCOUNT_DISABLED,
                user=user,
                actor=actor,
            )
            _adapters_follow_owner(followers, active=user.is_active, actor=actor)
        if "reset_password_required" in changed and user.reset_password_required:
            audit(Kind.PASSWORD_CHANGE_REQUIRED, user=user, actor=actor)
        if "account_expires_at" in changed:
            expires = user.account_expires_at
            if expires is not None and expires <= timezone.now():
                sessions_revoke_for_user(user=user, reason="expired")
            audit(Kind.ACCOUNT_EXPIRY_SET, user=user, actor=actor, at=_iso(expires))
        if "credentials_expire_at" in changed:
            audit(
                Kind.CREDENTIALS_EXPIRY_SET,
                user=user,
                actor=actor,
                at=_iso(user.credentials_expire_at),
            )
        if "password" in changed:
            audit(Kind.PASSWORD_CHANGED, user=user, actor=actor)
    return user


@transaction.atomic
def account_session_revoke(*, session: Session, actor: User | None) -> bool:
    """End one session (an administrator's act), audited; False if it had ended already."""
    ended = session_revoke(user_id=session.user_id, session_id=session.pk, reason="admin")
    if ended:
        audit(Kind.SESSION_REVOKED, user=session.user, actor=actor, session=str(session.pk))
    return ended


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
