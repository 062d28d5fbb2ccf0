"""Token pairs: simplejwt JWTs with typ, sub, sid, jti, role, iat, exp, iss and aud.

Tokens are signed with the current key and name it in their ``kid`` header; the signature (with
the key ``kid`` names, accounts/signing_keys.py), algorithm (pinned to one), issuer, audience,
expiry and type are checked by simplejwt and PyJWT; whether the session is still alive is the
caller's business (sessions.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework_simplejwt.exceptions import ExpiredTokenError, TokenError
from rest_framework_simplejwt.tokens import Token
from rest_framework_simplejwt.utils import datetime_to_epoch

from accounts.errors import TokenExpired
from accounts.models import User
from accounts.signing_keys import (
    KeyedAccessToken,
    KeyedRefreshToken,
    KeyedTokenBackend,
    token_backend,
)
from platform_site.errors import TokenMalformed
from platform_site.timestamps import rfc3339

ROLE_ADAPTER = "ADAPTER"
ROLE_USER = "USER"
ROLE_PASSWORD_RESET_REQUIRED = "USER_PASSWORD_RESET_REQUIRED"  # noqa: S105 (a role)
MAX_TOKEN_LENGTH = 4096
MAX_EPOCH_SECONDS = 253402300800  # 10000-01-01: datetime's end


@dataclass(frozen=True)
class TokenPair:
    access_token: str
    access_token_expires_at: datetime
    refresh_token: str
    refresh_token_expires_at: datetime

    def as_json(self) -> dict[str, str]:
        return {
            "accessToken": self.access_token,
            "accessTokenExpiresAt": rfc3339(self.access_token_expires_at),
            "refreshToken": self.refresh_token,
            "refreshTokenExpiresAt": rfc3339(self.refresh_token_expires_at),
        }


@dataclass(frozen=True)
class Claims:
    user_id: int
    session_id: uuid.UUID
    jti: str
    role: str
    expires_at: datetime


def role_of(user: User) -> str:
    if user.kind == User.Kind.ADAPTER:
        return ROLE_ADAPTER
    if user.reset_password_required:
        return ROLE_PASSWORD_RESET_REQUIRED
    return ROLE_USER


def _signed(
    token: Token, *, user: User, session_id: uuid.UUID, issued: datetime, expires: datetime
) -> str:
    token["sub"] = str(user.pk)
    token["sid"] = str(session_id)
    token["role"] = role_of(user)
    token["iat"] = datetime_to_epoch(issued)
    token["exp"] = datetime_to_epoch(expires)
    return str(token)


def token_pair_issue(
    *,
    user: User,
    session_id: uuid.UUID,
    refresh_jti: uuid.UUID,
    session_expires_at: datetime,
    now: datetime,
) -> TokenPair:
    """A new pair for ``session_id``; neither token outlives the session."""
    issued = now.replace(microsecond=0)
    session_end = session_expires_at.replace(microsecond=0)
    access_expires = min(issued + timedelta(seconds=settings.JWT_ACCESS_TTL_SECONDS), session_end)
    refresh_expires = min(issued + timedelta(seconds=settings.JWT_REFRESH_TTL_SECONDS), session_end)
    refresh = KeyedRefreshToken()
    refresh["jti"] = refresh_jti.hex
    return TokenPair(
        access_token=_signed(
            KeyedAccessToken(),
            user=user,
            session_id=session_id,
            issued=issued,
            expires=access_expires,
        ),
        access_token_expires_at=access_expires,
        refresh_token=_signed(
            refresh, user=user, session_id=session_id, issued=issued, expires=refresh_expires
        ),
        refresh_token_expires_at=refresh_expires,
    )


def _whole_seconds(value: Any) -> bool:
    return type(value) is int and 0 <= value < MAX_EPOCH_SECONDS


def _verified(token_class: type[Token], raw: str) -> Claims:
    if not raw or len(raw) > MAX_TOKEN_LENGTH or not raw.isascii():
        raise TokenMalformed()
    try:
        payload: dict[str, Any] = token_class(raw).payload  # type: ignore[arg-type]
    except ExpiredTokenError:
        raise TokenExpired() from None
    except TokenError:
        raise TokenMalformed() from None
    except (TypeError, ValueError, OverflowError, OSError):
        # Correctly signed, with a time claim that PyJWT lets through and no clock can hold (an
        # exp of 1e20, a numeric string): simplejwt's datetime_from_epoch fails on it.
        raise TokenMalformed() from None
    # Only what token_pair_issue writes: whole seconds in exp and iat, and no nbf.
    if not (_whole_seconds(payload.get("exp")) and _whole_seconds(payload.get("iat"))):
        raise TokenMalformed()
    if "nbf" in payload:
        raise TokenMalformed()
    return _claims(payload)


_ROLES = frozenset({ROLE_ADAPTER, ROLE_USER, ROLE_PASSWORD_RESET_REQUIRED})


def _claims(payload: dict[str, Any]) -> Claims:
    """The claims of a verified token, each of the type and shape token_pair_issue writes. A
    correctly signed token of another shape (a key leaked to someone else's issuer, a claim
    written by a future version) is TokenMalformed, never a crash further down."""
    sub, sid, jti, role = (payload.get(name) for name in ("sub", "sid", "jti", "role"))
    if not (isinstance(sub, str) and sub.isascii() and sub.isdigit() and len(sub) <= 19):
        raise TokenMalformed()
    if not (isinstance(jti, str) and 0 < len(jti) <= 64):
        raise TokenMalformed()
    if not (isinstance(role, str) and role in _ROLES):
        raise TokenMalformed()
    if not isinstance(sid, str):
        raise TokenMalformed()
    try:
        session_id = uuid.UUID(sid)
    except ValueError:
        raise TokenMalformed() from None
    return Claims(
        user_id=int(sub),
        session_id=session_id,
        jti=jti,
        role=role,
        expires_at=datetime.fromtimestamp(payload["exp"], tz=UTC),
    )


# A worker sees the same access token on every request of its lifetime (15 minutes by default):
# verifying its signature once is enough. The key is the exact token string, so a token that
# differs in any byte is verified in full; only verified claims are kept, and expiry is checked
# against the clock on every request. Whether the session lives is never cached (selectors.py).
# The configured signing keys are part of the cache key too (``keys`` is there for nothing else):
# claims verified with a signing key are never served once the settings no longer list it.
@lru_cache(maxsize=4096)
def _verified_access(raw: str, keys: KeyedTokenBackend) -> Claims:
    return _verified(KeyedAccessToken, raw)


def access_token_decode(raw: str, *, at: datetime | None = None) -> Claims:
    """Claims of an access token valid at ``at`` (now); TokenExpired, or TokenMalformed (a
    refresh token too)."""
    claims = _verified_access(raw, token_backend())
    if claims.expires_at <= (at or timezone.now()):
        raise TokenExpired()
    return claims


UNREADABLE_REFRESH = "The refresh token cannot be read: send the refreshToken of a token pair."


def refresh_token_decode(raw: str) -> Claims:
    """Claims of a valid refresh token; TokenExpired, or TokenMalformed (an access token too)."""
    try:
        return _verified(KeyedRefreshToken, raw)
    except TokenMalformed:
        raise TokenMalformed(UNREADABLE_REFRESH) from None
