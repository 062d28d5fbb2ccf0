"""Sessions: the server-side row behind every token pair, its rotation and its end."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import NoReturn

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import liveness
from accounts.devices import Device
from accounts.errors import RefreshTokenReused, TokenRevoked
from accounts.models import Session, User
from accounts.services.audit import Kind, audit
from accounts.services.tokens import Claims, TokenPair, refresh_token_decode, token_pair_issue
from accounts.session_rules import live_sessions, session_refusal
from platform_site.errors import TokenMalformed

# Two refreshes of one token in flight together (two threads of one client): the loser finds its
# token rotated moments ago by the winner, from the same device. Within this window that is a
# race, refused without ending the winner's session; any later presentation is a replay. The
# window is short because it is also how long a thief who refreshed first is not caught by the
# genuine client's next refresh (docs/adapters.md, "Refreshing").
REFRESH_RACE_SECONDS = 2


def session_start(*, user: User, device: Device) -> tuple[Session, TokenPair]:
    now = timezone.now()
    session = Session.objects.create(
        user=user,
        device_key=device.key,
        device_id=device.device_id,
        user_agent=device.user_agent,
        ip=device.ip or None,
        created_at=now,
        last_used_at=now,
        expires_at=now + timedelta(seconds=settings.SESSION_MAX_AGE_SECONDS),
        refresh_jti=uuid.uuid4(),
    )
    pair = token_pair_issue(
        user=user,
        session_id=session.pk,
        refresh_jti=session.refresh_jti,
        session_expires_at=session.expires_at,
        now=now,
    )
    return session, pair


def session_refresh(*, refresh_token: str, device: Device) -> TokenPair:
    """Rotate the refresh token of its session: exactly one caller wins per token.

    The swap is one conditional UPDATE (row lock, re-checked after a concurrent commit). A token
    that is no longer the current one is a replay and revokes the whole session, unless it is the
    one rotated just now by a parallel refresh.
    """
    claims = refresh_token_decode(refresh_token)
    try:
        presented = uuid.UUID(hex=claims.jti)
    except ValueError:
        raise TokenMalformed() from None
    now = timezone.now()
    new_jti = uuid.uuid4()
    # A live session (live_sessions: no join, so PostgreSQL's recheck after the row lock sees this
    # row's new version, and a parallel refresh that lost finds its jti gone) of this device.
    rotated = Session.objects.filter(
        live_sessions(now),
        pk=claims.session_id,
        user_id=claims.user_id,
        refresh_jti=presented,
        device_key=device.key,
    ).update(
        refresh_jti=new_jti, previous_refresh_jti=presented, refreshed_at=now, last_used_at=now
    )
    if rotated:
        session = Session.objects.select_related("user").get(pk=claims.session_id)
        # The role is read again: an administrator may have required a password change.
        return token_pair_issue(
            user=session.user,
            session_id=session.pk,
            refresh_jti=new_jti,
            session_expires_at=session.expires_at,
            now=now,
        )
    _refuse(claims=claims, presented=presented, device=device)


def _refuse(*, claims: Claims, presented: uuid.UUID, device: Device) -> NoReturn:
    session = (
        Session.objects.select_related("user")
        .filter(pk=claims.session_id, user_id=claims.user_id)
        .first()
    )
    if session is None:
        raise TokenRevoked()
    now = timezone.now()
    refusal = session_refusal(session, user_id=claims.user_id, device_key=device.key, now=now)
    if refusal is not None:
        raise refusal
    if (
        session.previous_refresh_jti == presented
        and session.refreshed_at is not None
        and now - session.refreshed_at < timedelta(seconds=REFRESH_RACE_SECONDS)
    ):
        raise TokenRevoked("A parallel refresh has just rotated this refresh token; use its pair.")
    session_revoke(user_id=session.user_id, session_id=session.pk, reason="refresh_reuse")
    audit(Kind.REFRESH_TOKEN_REUSED, user=session.user, session=str(session.pk))
    raise RefreshTokenReused()


# last_used_at is written at most this often per session: "last used" for people reading their
# session list, without a write on every request of a busy adapter.
TOUCH_INTERVAL = timedelta(seconds=60)


def session_touch(session: Session) -> bool:
    """Write ``last_used_at`` if it is older than TOUCH_INTERVAL; True if it was written."""
    now = timezone.now()
    if now - session.last_used_at < TOUCH_INTERVAL:
        return False
    Session.objects.filter(pk=session.pk).update(last_used_at=now)
    session.last_used_at = now
    return True


def session_logout(*, refresh_token: str) -> None:
    """End the session of ``refresh_token``; idempotent. Possession of the token is the proof."""
    claims = refresh_token_decode(refresh_token)
    session_revoke(user_id=claims.user_id, session_id=claims.session_id, reason="logout")


def session_revoke(*, user_id: int, session_id: uuid.UUID, reason: str) -> bool:
    """End ``user_id``'s session ``session_id``, if it is live; True if it was."""
    with liveness.changing([user_id]):
        updated = Session.objects.filter(
            pk=session_id, user_id=user_id, revoked_at__isnull=True
        ).update(revoked_at=timezone.now(), revoked_reason=reason)
    return bool(updated)


def session_delete(*, session: Session) -> None:
    """Delete the row (the admin's delete): its tokens fail like a revoked session's."""
    with liveness.changing([session.user_id]):
        session.delete()


@transaction.atomic
def sessions_revoke_for_user(*, user: User, reason: str, keep: uuid.UUID | None = None) -> int:
    """End every live session of ``user`` but ``keep``; their tokens fail on the next request."""
    sessions = Session.objects.filter(user=user, revoked_at__isnull=True)
    if keep is not None:
        sessions = sessions.exclude(pk=keep)
    with liveness.changing([user.pk]):
        return sessions.update(revoked_at=timezone.now(), revoked_reason=reason)
