"""The keys of the token pairs: the current key signs, previous keys still verify.

Every token names its key in the JOSE header: ``kid`` is the first 16 hex digits of the key's
SHA-256, so operators never name keys and the id leads nobody to the key. Verification takes the
key that ``kid`` names among ``JWT_SIGNING_KEY`` and ``JWT_PREVIOUS_SIGNING_KEYS``, and the
algorithm stays pinned: nothing in a token (``jwk``, ``jku``, ``x5u``, ``alg``) ever supplies a key
or an algorithm. docs/operations.md, "Rotating the token signing key", has the procedure.

simplejwt builds every token through ``Token.token_backend`` (read by ``get_token_backend()`` on
encode and decode); the token classes here override that property and nothing private.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import jwt
from django.conf import settings
from rest_framework_simplejwt.backends import TokenBackend
from rest_framework_simplejwt.exceptions import TokenBackendError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.tokens import AccessToken, RefreshToken

ALGORITHM = "HS256"
KEY_ID_LENGTH = 16


def key_id(key: str) -> str:
    """The ``kid`` of tokens signed with ``key``: ``printf %s "$KEY" | sha256sum | cut -c1-16``."""
    return hashlib.sha256(key.encode()).hexdigest()[:KEY_ID_LENGTH]


class KeyedTokenBackend(TokenBackend):
    """Signs with ``current`` under its ``kid``; verifies with the key a token's ``kid`` names."""

    def __init__(self, *, current: str, previous: Sequence[str]) -> None:
        super().__init__(
            ALGORITHM,
            current,
            audience=api_settings.AUDIENCE,
            issuer=api_settings.ISSUER,
            leeway=api_settings.LEEWAY,
        )
        self.current = current
        self.key_id = key_id(current)
        # The current key first: tokens from before key ids are tried against it first.
        self.keys: dict[str, str] = {key_id(key): key for key in (current, *previous)}
        self._signatures = jwt.PyJWS()

    def encode(self, payload: dict[str, Any]) -> str:
        claims = dict(payload)
        if self.audience is not None:
            claims["aud"] = self.audience
        if self.issuer is not None:
            claims["iss"] = self.issuer
        return jwt.encode(claims, self.current, algorithm=ALGORITHM, headers={"kid": self.key_id})

    def get_verifying_key(self, token: Any) -> str:
        """The key named by the token's ``kid``; TokenBackendError for a key not configured.

        simplejwt passes the result to PyJWT's decode with ``algorithms=[ALGORITHM]``, which checks
        the signature, expiry, issuer and audience with it.
        """
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.InvalidTokenError:
            raise TokenBackendError("Token is invalid") from None
        if kid is None:
            return self._key_before_key_ids(token)
        key = self.keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise TokenBackendError("Token is signed with a key that is not accepted")
        return key

    def _key_before_key_ids(self, token: Any) -> str:
        # Tokens issued before key ids (releases before this one) carry no kid; they live on until
        # their refresh token ends (JWT_REFRESH_TTL_SECONDS after the upgrade at the most). Such a
        # token is accepted when one of the configured keys signed it, so neither the upgrade nor
        # a rotation right after it signs anyone out; nobody issues them any more, and once the key
        # that was current at the upgrade is removed, none of them verifies.
        for key in self.keys.values():
            try:
                self._signatures.decode_complete(token, key, algorithms=[ALGORITHM])
            except jwt.InvalidSignatureError:
                continue
            except jwt.InvalidTokenError:
                break
            return key
        raise TokenBackendError("Token is signed with a key that is not accepted")


def token_backend() -> KeyedTokenBackend:
    """The backend of the configured keys (read once per process; tests may change them)."""
    return _backend(settings.JWT_SIGNING_KEY, tuple(settings.JWT_PREVIOUS_SIGNING_KEYS))


@lru_cache(maxsize=8)
def _backend(current: str, previous: tuple[str, ...]) -> KeyedTokenBackend:
    return KeyedTokenBackend(current=current, previous=previous)


class KeyedAccessToken(AccessToken):
    @property
    def token_backend(self) -> TokenBackend:
        return token_backend()


class KeyedRefreshToken(RefreshToken):
    @property
    def token_backend(self) -> TokenBackend:
        return token_backend()
