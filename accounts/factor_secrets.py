"""The second factors' secrets at rest (docs/sessions.md, "Second factors").

An authenticator app's secret, and an adapter's webhook secret (docs/exchange.md, "Webhooks"), are
encrypted with AES-256-GCM, bound to their user and purpose (the associated data, so a ciphertext
copied onto another account, or into another column, does not decrypt). A recovery
code is kept as an HMAC-SHA-256, so the row can be looked up and spent in one conditional UPDATE.
Both keys are derived (HKDF-SHA-256, one label each) from TOTP_ENCRYPTION_KEY, or from SECRET_KEY
when that is unset: a dump of the database alone yields neither secrets nor codes. Changing the
key makes every stored secret and recovery code unreadable (people turn their app on again).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from functools import cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

VERSION = "v1"
NONCE_BYTES = 12


class SecretUnreadable(Exception):
    """The stored secret was encrypted under another key, or altered."""


@cache
def _derived(root: str, label: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(root.encode())


def _key(label: bytes) -> bytes:
    # Read on every call, not at import: tests and key changes take effect without a restart.
    root = settings.TOTP_ENCRYPTION_KEY or settings.SECRET_KEY
    return _derived(root, b"exchange-platform " + label)


# What a secret is for: its key's label. A ciphertext of one purpose does not decrypt as another.
PURPOSES = {"authenticator": b"totp-secret", "webhook": b"webhook-secret"}


def _associated(user_id: int, purpose: str) -> bytes:
    return f"{purpose}:{user_id}".encode()


def secret_encrypt(*, user_id: int, secret: str, purpose: str = "authenticator") -> str:
    nonce = secrets.token_bytes(NONCE_BYTES)
    sealed = AESGCM(_key(PURPOSES[purpose])).encrypt(
        nonce, secret.encode(), _associated(user_id, purpose)
    )
    return f"{VERSION}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"


def secret_decrypt(*, user_id: int, stored: str, purpose: str = "authenticator") -> str:
    version, _, payload = stored.partition(":")
    if version != VERSION:
        raise SecretUnreadable(f"unknown format {version!r}")
    try:
        raw = base64.urlsafe_b64decode(payload)
        plain = AESGCM(_key(PURPOSES[purpose])).decrypt(
            raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(user_id, purpose)
        )
    except (InvalidTag, ValueError) as error:
        raise SecretUnreadable("not encrypted under the configured key") from error
    return plain.decode()


def recovery_code_hash(*, user_id: int, code: str) -> str:
    message = f"{user_id}:{code}".encode()
    return hmac.new(_key(b"recovery-code"), message, hashlib.sha256).hexdigest()
