"""Webhook secrets and signatures, as the Standard Webhooks specification writes them.

A secret is ``whsec_`` and the base64 of 32 random bytes; the signature of a delivery is
``v1,`` and the base64 of HMAC-SHA256 over ``{webhook-id}.{webhook-timestamp}.{body}`` keyed with
the secret's bytes. While a rotated secret is still valid, both sign: their signatures separated
by a space, the newest first (a receiver accepts any that it can verify).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from functools import lru_cache

from accounts.factor_secrets import secret_decrypt

PREFIX = "whsec_"
SECRET_BYTES = 32


def secret_new() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    """The bytes a secret signs with."""
    return base64.b64decode(secret.removeprefix(PREFIX))


def signature(keys: Sequence[bytes], *, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: one ``v1,...`` entry per key, separated by spaces."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for key in keys
    )


@lru_cache(maxsize=4096)
def signing_keys(adapter_id: int, *stored: str) -> tuple[bytes, ...]:
    """The keys of an adapter's stored (encrypted) secrets, newest first; the deliverer asks for
    them at every claim, so they are remembered by their ciphertext."""
    return tuple(
        secret_key(secret_decrypt(user_id=adapter_id, stored=secret, purpose="webhook"))
        for secret in stored
    )
