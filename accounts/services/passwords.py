"""Passwords the platform generates: adapter credentials and the demo accounts."""

import secrets

# 24 random bytes: 192 bits, above the 128 the platform promises, URL-safe to paste anywhere.
GENERATED_PASSWORD_BYTES = 24


def password_generate() -> str:
    return secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
