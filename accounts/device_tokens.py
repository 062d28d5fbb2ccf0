"""Device tokens: proof that a client has signed in to an account before (OWASP's "device
cookies"). Every successful sign-in answers one; a sign-in that presents it back counts its
wrong passwords, and its wrong second-factor codes, against the token's own gate instead of the
account's (docs/sessions.md, "Device tokens").

Signed with Django's signing under a salt of their own, never with the JWT key: nothing that
verifies an access or refresh token can take a device token, nor the reverse, and the token needs
no row (a lost one costs nothing to forget; a stolen one is worth one account's 5 guesses).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core import signing
from django.http import HttpRequest

from accounts.models import User

DEVICE_TOKEN_HEADER = "X-Device-Token"  # noqa: S105 (a header's name)
DEVICE_TOKEN_COOKIE = "device_token"  # noqa: S105 (a cookie's name)
_SALT = "accounts.device-token"
# Longer than any token this module signs; anything longer is not read at all.
_MAX_LENGTH = 512


def device_token_seconds() -> int:
    return settings.ACCOUNTS_DEVICE_TOKEN_DAYS * 86400


def device_token_issue(*, user: User, token_id: str | None = None) -> str:
    """A token naming ``user``, valid ACCOUNTS_DEVICE_TOKEN_DAYS from now; ``token_id`` keeps a
    renewed token's identity, and so its gate."""
    payload = {"sub": user.pk, "jti": token_id or uuid.uuid4().hex}
    return signing.dumps(payload, salt=_SALT, compress=False)


def device_token_id(*, token: str, user: User | None) -> str | None:
    """The id of ``token`` if it is a valid, unexpired device token of ``user``; otherwise None
    (no token, a forged or expired one, one of another account: all alike)."""
    if not token or user is None or len(token) > _MAX_LENGTH:
        return None
    try:
        payload = signing.loads(token, salt=_SALT, max_age=device_token_seconds())
    except signing.BadSignature:  # SignatureExpired included
        return None
    if not isinstance(payload, dict) or payload.get("sub") != user.pk:
        return None
    token_id = payload.get("jti")
    return token_id if isinstance(token_id, str) and token_id else None


def device_token_gate_key(token_id: str) -> str:
    return f"device:{token_id}"


def device_token_sent(request: HttpRequest) -> str:
    """What the client sent back: the API's header, else the cabinet's and the admin's cookie."""
    header = request.headers.get(DEVICE_TOKEN_HEADER)
    if header:
        return header
    return str(request.COOKIES.get(DEVICE_TOKEN_COOKIE, ""))
