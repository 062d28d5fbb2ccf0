"""``manage.py check --deploy``: the development defaults that production must replace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register


@register(Tags.security, deploy=True)
def check_secrets(
    *, app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None, **kwargs: Any
) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if settings.SECRET_KEY == settings.DEVELOPMENT_SECRET_KEY:
        messages.append(
            Error(
                "SECRET_KEY is the development key.",
                hint="Set SECRET_KEY or SECRET_KEY_FILE.",
                id="platform.E001",
            )
        )
    if settings.JWT_SIGNING_KEY == settings.DEVELOPMENT_JWT_SIGNING_KEY:
        messages.append(
            Error(
                "JWT_SIGNING_KEY is the development key: anyone could sign tokens.",
                hint="Set JWT_SIGNING_KEY or JWT_SIGNING_KEY_FILE to at least 32 random bytes.",
                id="platform.E002",
            )
        )
    elif len(settings.JWT_SIGNING_KEY) < (minimum := settings.JWT_SIGNING_KEY_MIN_LENGTH):
        messages.append(
            Error(f"JWT_SIGNING_KEY is shorter than {minimum} characters.", id="platform.E003")
        )
    if settings.DEVELOPMENT_JWT_SIGNING_KEY in settings.JWT_PREVIOUS_SIGNING_KEYS:
        # Tokens the development key signs would verify: it is public, so nobody signed in under
        # it can be told from someone who forged a token.
        messages.append(
            Error(
                "JWT_PREVIOUS_SIGNING_KEYS lists the development key: anyone could sign tokens.",
                hint="Remove it: sessions signed in under the development key must sign in again.",
                id="platform.E005",
            )
        )
    if not settings.TOTP_ENCRYPTION_KEY:
        messages.append(
            Warning(
                "TOTP_ENCRYPTION_KEY is unset: authenticator apps' secrets and recovery codes "
                "are protected with a key derived from SECRET_KEY, so replacing SECRET_KEY "
                "would make every one unreadable.",
                hint="Set TOTP_ENCRYPTION_KEY or TOTP_ENCRYPTION_KEY_FILE (openssl rand -hex 32) "
                "before anyone turns an authenticator app on, and keep it.",
                id="platform.W006",
            )
        )
    if "," in settings.JWT_SIGNING_KEY:
        messages.append(
            Warning(
                "JWT_SIGNING_KEY contains a comma: it cannot be listed in "
                "JWT_PREVIOUS_SIGNING_KEYS when it is rotated, so rotating it signs everyone out.",
                hint="Use keys without commas (openssl rand -hex 32); replacing this one "
                "without listing it signs every session out once.",
                id="platform.W005",
            )
        )
    return messages


@register(deploy=True)
def check_services(
    *, app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None, **kwargs: Any
) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if not settings.REDIS_URL:
        messages.append(
            Warning(
                "REDIS_URL is unset: the cache and rate-limit counters are per process.",
                hint="Set REDIS_URL so every worker sees the same counts.",
                id="platform.W001",
            )
        )
    if settings.CELERY_TASK_ALWAYS_EAGER:
        messages.append(
            Warning(
                "CELERY_BROKER_URL is unset: tasks run inside the request that queues them.",
                hint="Set CELERY_BROKER_URL to the RabbitMQ broker and run Celery workers.",
                id="platform.W002",
            )
        )
    if settings.EMAIL_BACKEND.endswith("console.EmailBackend"):
        messages.append(
            Warning(
                "EMAIL_URL is unset: e-mails are printed to the console, not sent.",
                hint="Set EMAIL_URL, e.g. smtp+tls://user:password@mail.example.com:587.",
                id="platform.W003",
            )
        )
    if settings.SMS_BACKEND in ("console", "memory"):
        messages.append(
            Warning(
                f"SMS_BACKEND is {settings.SMS_BACKEND}: two-factor codes are not sent.",
                hint="Set SMS_BACKEND=http and SMS_HTTP_URL to your gateway.",
                id="platform.W004",
            )
        )
    return messages


@register()
def check_sms(
    *, app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None, **kwargs: Any
) -> list[CheckMessage]:
    """A misconfigured SMS gateway fails at startup, not at the first two-factor sign-in."""
    if settings.SMS_BACKEND == "http" and not settings.SMS_HTTP_URL.startswith(
        ("http://", "https://")
    ):
        return [
            Error(
                "SMS_BACKEND is http but SMS_HTTP_URL is not an http(s) URL.",
                hint="Set SMS_HTTP_URL, e.g. https://sms-gateway.example.com/send.",
                id="platform.E004",
            )
        ]
    return []
