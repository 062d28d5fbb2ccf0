"""The platform's one settings module: every knob comes from the environment. What is the same in
every deployment (apps, middleware, DRF, the OpenAPI document, periodic tasks, the log's shape) is
platform_site/wiring.py, imported here.

Unset variables give the embedded development mode (an embedded PostgreSQL started by manage.py,
local-memory cache, Celery tasks run in-process, e-mail and SMS to the console). Production sets
DATABASE_URL, REDIS_URL, CELERY_BROKER_URL, EMAIL_URL, SECRET_KEY, JWT_SIGNING_KEY and
ALLOWED_HOSTS. docs/operations.md has the table of every variable; .env.example lists them all.
"""

from __future__ import annotations

from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext

from platform_site import embedded, wiring
from platform_site.cache import guarded_connection_class
from platform_site.env import (
    email_config,
    env_bool,
    env_choice,
    env_durations,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_previous_keys,
    env_rate,
    env_secret,
    env_str,
    env_subset,
)

# Lets the generic classes of django-stubs (UserCreationForm[User]...) be subscripted at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

try:
    PLATFORM_VERSION = version("exchange-platform")
except PackageNotFoundError:  # running from a tree that was never pip-installed
    PLATFORM_VERSION = "0.0.0"

# Development defaults that the deploy checks (platform_site/checks.py) refuse in production.
DEVELOPMENT_SECRET_KEY = "development-only-secret-key-do-not-use-in-production-0123456789"  # noqa: S105
DEVELOPMENT_JWT_SIGNING_KEY = "development-only-jwt-signing-key-do-not-use-in-production-0123"

# --- Core ----------------------------------------------------------------------------------------

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Proxies whose X-Forwarded-For is believed (nginx of the deployment); nobody else's is.
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES", [])

INSTALLED_APPS = wiring.INSTALLED_APPS
MIDDLEWARE = wiring.MIDDLEWARE
LOGIN_URL = "/login"

ROOT_URLCONF = "platform_site.urls"
ASGI_APPLICATION = "platform_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

LANGUAGE_CODE = "en"
# The cabinet's languages: the browser's Accept-Language picks one, the switch in the page
# header keeps another in a cookie.
LANGUAGES = [("en", "English"), ("ru", "Русский")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Times Django renders by itself (the administration) say their zone: platform_site/formats.
FORMAT_MODULE_PATH = ["platform_site.formats"]

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / ".data" / "static")))
STATICFILES_DIRS = [BASE_DIR / "static"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Database: PostgreSQL only -------------------------------------------------------------------

# Without DATABASE_URL, this names the embedded server's socket under .data/postgres; manage.py and
# the test suite start that server and set DATABASE_URL to its exact address before Django starts.
DATABASE_URL = env_str("DATABASE_URL", embedded.default_url())
_database: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL))
if _database["ENGINE"] != "django.db.backends.postgresql":
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"DATABASE_URL must be a postgresql:// URL, got {_database['ENGINE']}."
    )
# django-prometheus's PostgreSQL backend (it counts queries, errors and their duration), with a
# cheaper checkout from the pool: platform_site/db/base.py.
_database["ENGINE"] = "platform_site.db"
_database["CONN_MAX_AGE"] = 0  # the psycopg pool keeps connections; Django must not hold them too
# The backend checks a pooled connection when the server has written to it (it closed it); the
# pool's own check, a round trip on every checkout, stays off.
DATABASE_CONN_HEALTH_CHECKS = env_bool("DATABASE_CONN_HEALTH_CHECKS", True)
_database["CONN_HEALTH_CHECKS"] = False
_database["OPTIONS"] = {
    **_database.get("OPTIONS", {}),
    "connect_timeout": env_int("DATABASE_CONNECT_TIMEOUT_SECONDS", 5, minimum=1),
    "application_name": "exchange-platform",
    # psycopg prepares a statement on its fifth run on a connection. Only the exchange's hot
    # statements can be prepared (platform_site.database.prepared_cursor): Django's own cursors
    # bind parameters on the client. Off behind a transaction-pooling PgBouncer before 1.21.
    "prepare_threshold": 5 if env_bool("DATABASE_PREPARED_STATEMENTS", True) else None,
}
# How long a request waits for a pooled connection in all (platform_site.db.base waits in slices
# of the pool's own timeout, asking the server between them whether it is there at all).
DATABASE_POOL_TIMEOUT_SECONDS = env_int("DATABASE_POOL_TIMEOUT_SECONDS", 10, minimum=1)
if env_bool("DATABASE_POOL", True):
    _database["OPTIONS"]["pool"] = {
        "name": "default",
        "min_size": env_int("DATABASE_POOL_MIN_SIZE", 1, minimum=0),
        "max_size": env_int("DATABASE_POOL_MAX_SIZE", 4, minimum=1),
        "timeout": 0.25,
        # No back-off of its own after an outage: it gives up reconnecting at once, and the next
        # request that needs a connection makes it connect again (platform_site.db.availability).
        "reconnect_timeout": 0,
    }
DATABASES: dict[str, dict[str, Any]] = {"default": _database}

# --- Cache (and rate-limit counters) -------------------------------------------------------------


# How long one call to Redis may take before it counts as failed, and how long a process then
# leaves Redis aside before it tries again (platform_site/cache.py, docs/operations.md "When Redis
# is slow or gone").
REDIS_SOCKET_TIMEOUT_SECONDS = env_float(
    "REDIS_SOCKET_TIMEOUT_SECONDS", 1.0, minimum=0.01, maximum=60
)
REDIS_UNAVAILABLE_SECONDS = env_float("REDIS_UNAVAILABLE_SECONDS", 5.0, minimum=0, maximum=3600)


def redis_caches(url: str) -> dict[str, Any]:
    """CACHES for the Redis at ``url`` (the tests build them the same way for their own)."""
    return {
        "default": {
            # django-redis (the client django-ratelimit supports), counted by django-prometheus.
            "BACKEND": "django_prometheus.cache.backends.redis.RedisCache",
            "LOCATION": url,
            # A Redis outage must not take the API down: cache calls then return nothing, and
            # once one has failed the others fail at once for a while (platform_site/cache.py).
            "OPTIONS": {
                "SOCKET_CONNECT_TIMEOUT": REDIS_SOCKET_TIMEOUT_SECONDS,
                "SOCKET_TIMEOUT": REDIS_SOCKET_TIMEOUT_SECONDS,
                "IGNORE_EXCEPTIONS": True,
                "CONNECTION_POOL_KWARGS": {"connection_class": guarded_connection_class(url)},
            },
        }
    }


REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CACHES = redis_caches(REDIS_URL)
    # Each call that finds Redis gone would log an ERROR with a traceback; the change of
    # availability is logged once instead (platform_site/cache.py).
    DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = False
    # django-ratelimit knows backends by class path. django-prometheus's class is django-redis's
    # with get() counted; the add() and incr() that rate limits use are django-redis's own.
    SILENCED_SYSTEM_CHECKS = ["django_ratelimit.W001"]
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # django-ratelimit refuses a per-process cache because counts would differ between workers;
    # the embedded mode runs one process, where a local-memory count is exact.
    SILENCED_SYSTEM_CHECKS = ["django_ratelimit.E003", "django_ratelimit.W001"]
# axes.W006 asks for the IP address among the lockout parameters; axes locks nobody here (see
# AXES_LOCK_OUT_AT_FAILURE), and per-IP limits are django-ratelimit's.
SILENCED_SYSTEM_CHECKS += ["axes.W006"]
RATELIMIT_USE_CACHE = "default"
# django-ratelimit's default, written out: accounts.liveness reads it on every exchange request
# (a setting missing from here costs an AttributeError on each read).
RATELIMIT_ENABLE = True
# Without a working cache, rate limits let requests through; the sign-in lock lives in
# PostgreSQL and keeps protecting accounts.
RATELIMIT_FAIL_OPEN = True

# --- Celery --------------------------------------------------------------------------------------

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
# The queue tasks go to and workers consume: deployments sharing one broker (and the test suite's
# stacks) keep apart by naming their own.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
# Without a broker, tasks run in-process, inside the call that queues them (the embedded mode).
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
if CELERY_TASK_ALWAYS_EAGER:
    # An eager task still takes a producer from the pool, whose connection it never opens. An
    # empty URL means amqp:// with no host, which kombu warns about ("No hostname was
    # supplied") on every code sent; kombu's in-memory transport with a host name is silent.
    CELERY_BROKER_URL = "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker's processes; 0: one per CPU the machine has (a container sees the node's, not its limit).
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 0, minimum=0) or None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# A message still in the outbox after this long is sent by the periodic sweep (the broker was
# down when its request committed, or its task was lost).
ACCOUNTS_OUTBOX_SWEEP_SECONDS = env_int("ACCOUNTS_OUTBOX_SWEEP_SECONDS", 60, minimum=1)
# Publishing a task must not hold a request for long when the broker is down.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BEAT_SCHEDULE = wiring.celery_beat_schedule(
    outbox_sweep_seconds=ACCOUNTS_OUTBOX_SWEEP_SECONDS
)

# --- E-mail and SMS ------------------------------------------------------------------------------

_email = email_config("EMAIL_URL", env_str("EMAIL_URL", "") or None)
EMAIL_BACKEND = _email["EMAIL_BACKEND"]
EMAIL_HOST = _email["EMAIL_HOST"]
EMAIL_PORT = _email["EMAIL_PORT"]
EMAIL_HOST_USER = _email["EMAIL_HOST_USER"]
EMAIL_HOST_PASSWORD = _email["EMAIL_HOST_PASSWORD"]
EMAIL_USE_TLS = _email["EMAIL_USE_TLS"]
EMAIL_USE_SSL = _email["EMAIL_USE_SSL"]
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Exchange platform <no-reply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_TIMEOUT = 10
PLATFORM_NAME = env_str("PLATFORM_NAME", "Exchange platform")
# console, http (POST {to, text} to SMS_HTTP_URL), memory (tests), or the dotted path of a
# callable send(to, text).
SMS_BACKEND = env_str("SMS_BACKEND", "console")
SMS_HTTP_URL = env_str("SMS_HTTP_URL", "")

# --- Accounts, passwords, tokens -----------------------------------------------------------------

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = wiring.AUTHENTICATION_BACKENDS
PASSWORD_HASHERS = wiring.PASSWORD_HASHERS
AUTH_PASSWORD_VALIDATORS = wiring.AUTH_PASSWORD_VALIDATORS

JWT_SIGNING_KEY = env_secret("JWT_SIGNING_KEY", DEVELOPMENT_JWT_SIGNING_KEY)
JWT_SIGNING_KEY_MIN_LENGTH = 32
# Keys that verify tokens but sign none: the key before a rotation while its tokens may live, or
# the next one, announced before it signs (docs/operations.md, "Rotating the token signing key").
JWT_PREVIOUS_SIGNING_KEYS = env_previous_keys(
    "JWT_PREVIOUS_SIGNING_KEYS", current=JWT_SIGNING_KEY, min_length=JWT_SIGNING_KEY_MIN_LENGTH
)
JWT_ISSUER = env_str("JWT_ISSUER", "exchange-platform")
JWT_AUDIENCE = env_str("JWT_AUDIENCE", "exchange-platform")
JWT_ACCESS_TTL_SECONDS = env_int("JWT_ACCESS_TTL_SECONDS", 900, minimum=30)
JWT_REFRESH_TTL_SECONDS = env_int("JWT_REFRESH_TTL_SECONDS", 604800, minimum=60)
SESSION_MAX_AGE_SECONDS = env_int("SESSION_MAX_AGE_SECONDS", 2592000, minimum=60)

SIMPLE_JWT = {
    # One algorithm, pinned: tokens signed any other way (none, RS256, HS512...) are refused.
    # accounts/signing_keys.py signs and verifies the platform's tokens with HS256 (pinned there
    # as well), the audience, issuer and leeway below, and the key their kid names among
    # JWT_SIGNING_KEY and JWT_PREVIOUS_SIGNING_KEYS.
    "ALGORITHM": "HS256",
    "SIGNING_KEY": JWT_SIGNING_KEY,
    "VERIFYING_KEY": "",
    "AUDIENCE": JWT_AUDIENCE,
    "ISSUER": JWT_ISSUER,
    "LEEWAY": 0,
    "ACCESS_TOKEN_LIFETIME": timedelta(seconds=JWT_ACCESS_TTL_SECONDS),
    "REFRESH_TOKEN_LIFETIME": timedelta(seconds=JWT_REFRESH_TTL_SECONDS),
    "TOKEN_TYPE_CLAIM": "typ",
    "JTI_CLAIM": "jti",
    "USER_ID_CLAIM": "sub",
    "USER_ID_FIELD": "id",
    "AUTH_HEADER_TYPES": ("Bearer",),
    "UPDATE_LAST_LOGIN": False,
}

ACCOUNTS_LOCKOUT_THRESHOLD = 5
ACCOUNTS_LOCKOUT_SECONDS = env_int("ACCOUNTS_LOCKOUT_SECONDS", 900, minimum=1)
# A device token (accounts.device_tokens) gives the client that holds it a lock of its own.
ACCOUNTS_DEVICE_TOKEN_DAYS = env_int("ACCOUNTS_DEVICE_TOKEN_DAYS", 90, minimum=1)
ACCOUNTS_CODE_TTL_SECONDS = env_int("ACCOUNTS_CODE_TTL_SECONDS", 600, minimum=30)
ACCOUNTS_CODE_ATTEMPTS = env_int("ACCOUNTS_CODE_ATTEMPTS", 5, minimum=1)
ACCOUNTS_CODE_RESEND_SECONDS = env_int("ACCOUNTS_CODE_RESEND_SECONDS", 60, minimum=0)
ACCOUNTS_PREVENT_ENUMERATION = env_bool("ACCOUNTS_PREVENT_ENUMERATION", False)
ACCOUNTS_PASSWORD_MAX_AGE_DAYS = env_int("ACCOUNTS_PASSWORD_MAX_AGE_DAYS", 0, minimum=0)
# A session that began with a sign-in this recently may turn a factor off, change the e-mail...
# without sending a proof again (docs/sessions.md, "Reauthentication").
ACCOUNTS_REAUTH_SECONDS = env_int("ACCOUNTS_REAUTH_SECONDS", 300, minimum=30)
# Staff accounts set up a second factor before the admin opens to them.
ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR = env_bool("ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR", not DEBUG)
ACCOUNTS_RATE_LIMIT_IP = env_rate("ACCOUNTS_RATE_LIMIT_IP", "60/m")
ACCOUNTS_RATE_LIMIT_ACCOUNT = env_rate("ACCOUNTS_RATE_LIMIT_ACCOUNT", "20/m")
# Per signed-in cabinet user, on /api/users/*.
ACCOUNTS_RATE_LIMIT_USER = env_rate("ACCOUNTS_RATE_LIMIT_USER", "120/m")
# Encrypts authenticator apps' secrets and keys recovery codes' hashes (accounts/factor_secrets.py);
# unset: derived from SECRET_KEY, and check --deploy warns (platform.W006).
TOTP_ENCRYPTION_KEY = env_secret("TOTP_ENCRYPTION_KEY", "")

# django-axes keeps the record of every sign-in attempt and its admin; the lock itself is the
# platform's atomic gate (accounts/services/lockout.py), so axes never locks anybody out.
AXES_LOCK_OUT_AT_FAILURE = False
AXES_LOCKOUT_PARAMETERS = ["username"]
AXES_FAILURE_LIMIT = ACCOUNTS_LOCKOUT_THRESHOLD
AXES_COOLOFF_TIME = timedelta(seconds=ACCOUNTS_LOCKOUT_SECONDS)
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "accounts.devices.client_ip"
AXES_VERBOSE = False

# --- Exchange ------------------------------------------------------------------------------------

# Passkeys (docs/sessions.md, "Passkeys"): the relying party is the site's host name, and the
# origins a ceremony may come from. A browser treats http://localhost as a secure context and a
# bare IP address over http not: the embedded mode's default is localhost and its port.
# The embedded mode's server sets the origin of the port it serves (platform_site/develop.py).
WEBAUTHN_RP_ID = env_str("WEBAUTHN_RP_ID", "localhost")
WEBAUTHN_ORIGINS = env_list("WEBAUTHN_ORIGINS", ["http://localhost:8000"])
WEBAUTHN_CHALLENGE_SECONDS = 300

EXCHANGE_MAX_DELIVERIES = env_int("EXCHANGE_MAX_DELIVERIES", 10, minimum=1)
EXCHANGE_HISTORY_DAYS = env_int("EXCHANGE_HISTORY_DAYS", 7, minimum=1)
EXCHANGE_MAX_PAYLOAD_BYTES = env_int("EXCHANGE_MAX_PAYLOAD_BYTES", 256 * 1024, minimum=1024)
# Bounds of what a sender can pile up (docs/operations.md, "Bounded queues"): messages waiting per
# recipient before sends are refused (429 QUEUE_FULL); days a message may wait for anyone to
# receive it before it moves to the dead letters as EXPIRED; days dead letters are kept.
EXCHANGE_MAX_QUEUE_DEPTH = env_int("EXCHANGE_MAX_QUEUE_DEPTH", 100_000, minimum=1)
EXCHANGE_MESSAGE_RETENTION_DAYS = env_int("EXCHANGE_MESSAGE_RETENTION_DAYS", 14, minimum=1)
EXCHANGE_DEAD_LETTER_DAYS = env_int("EXCHANGE_DEAD_LETTER_DAYS", 30, minimum=1)
EXCHANGE_RATE_LIMIT = env_rate("EXCHANGE_RATE_LIMIT", "6000/m")
# Long polls waiting at once in one server process, on its event loop (platform_site/server.py):
# each costs a socket and some memory, no thread. More are 503 SERVER_BUSY (docs/deployment.md,
# "The server").
EXCHANGE_LONG_POLL_MAX_WAITING = env_int("EXCHANGE_LONG_POLL_MAX_WAITING", 5000, minimum=0)
# Push streams (GET /api/exchange/messages/stream, exchange/streams.py): a comment line every
# heartbeat keeps proxies from timing them out (nginx's read timeout sits above it), and at most
# this many are open at once in one server process (more are 503 SERVER_BUSY).
EXCHANGE_STREAM_HEARTBEAT_SECONDS = env_int(
    "EXCHANGE_STREAM_HEARTBEAT_SECONDS", 15, minimum=1, maximum=60
)
EXCHANGE_STREAM_MAX_CONNECTIONS = env_int("EXCHANGE_STREAM_MAX_CONNECTIONS", 2000, minimum=0)
# Webhooks (exchange/webhooks/; each setting in docs/operations.md's table): private targets and
# plain http only where ALLOW_PRIVATE (by default in DEBUG, the embedded mode); the server's
# processes deliver unless DELIVERY_SEPARATE (compose, Kubernetes: `manage.py deliver_webhooks`).
EXCHANGE_WEBHOOK_TIMEOUT_SECONDS = env_int(
    "EXCHANGE_WEBHOOK_TIMEOUT_SECONDS", 15, minimum=1, maximum=60
)
EXCHANGE_WEBHOOK_RETRY_SCHEDULE = env_durations(
    "EXCHANGE_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,10h"
)
EXCHANGE_WEBHOOK_DISABLE_AFTER_DAYS = env_int("EXCHANGE_WEBHOOK_DISABLE_AFTER_DAYS", 5, minimum=1)
EXCHANGE_WEBHOOK_BREAKER_FAILURES = env_int("EXCHANGE_WEBHOOK_BREAKER_FAILURES", 5, minimum=1)
EXCHANGE_WEBHOOK_CONCURRENCY = env_int("EXCHANGE_WEBHOOK_CONCURRENCY", 10, minimum=1, maximum=100)
EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS = env_int(
    "EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS", 86400, minimum=0
)
EXCHANGE_WEBHOOK_LOG_DAYS = env_int("EXCHANGE_WEBHOOK_LOG_DAYS", 7, minimum=1)
EXCHANGE_WEBHOOK_ALLOW_PRIVATE = env_bool("EXCHANGE_WEBHOOK_ALLOW_PRIVATE", DEBUG)
EXCHANGE_WEBHOOK_CA_BUNDLE = env_str("EXCHANGE_WEBHOOK_CA_BUNDLE", "")
EXCHANGE_WEBHOOK_DELIVERY_SEPARATE = env_bool("EXCHANGE_WEBHOOK_DELIVERY_SEPARATE", False)

# --- HTTP ----------------------------------------------------------------------------------------

# Bodies above this answer 413 before they are read; the default leaves room for an exchange
# message at EXCHANGE_MAX_PAYLOAD_BYTES with its envelope.
HTTP_MAX_BODY_BYTES = env_int("HTTP_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
# A batch send (POST /api/exchange/messages/batch, up to 100 messages) has its own body limit,
# never below HTTP_MAX_BODY_BYTES: any message that may be sent alone may be sent in a batch.
EXCHANGE_BATCH_MAX_BODY_BYTES = env_int(
    "EXCHANGE_BATCH_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=HTTP_MAX_BODY_BYTES
)
# Django's own ceiling on a body read into memory (DRF reads every JSON body through
# request.body) is the largest that any view takes. Each API view's limit is its own
# (platform_site.errors.body_limit), checked on Content-Length before the body is read and by the
# parser after: a ceiling at HTTP_MAX_BODY_BYTES refused every batch above it as 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = EXCHANGE_BATCH_MAX_BODY_BYTES

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# The TLS-terminating proxy says which scheme the client used; only set this behind such a proxy.
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

REST_FRAMEWORK = wiring.REST_FRAMEWORK
SPECTACULAR_SETTINGS = wiring.spectacular_settings(PLATFORM_VERSION)

# --- Operations: health, metrics, logs -----------------------------------------------------------

MANAGEMENT_ENDPOINTS_EXPOSURE = env_subset(
    "MANAGEMENT_ENDPOINTS_EXPOSURE",
    ["health", "info", "metrics"],
    {"health", "info", "metrics", "prometheus"},
)
MANAGEMENT_HEALTH_DISKSPACE_PATH = env_str("MANAGEMENT_HEALTH_DISKSPACE_PATH", ".")
MANAGEMENT_HEALTH_DISKSPACE_THRESHOLD_BYTES = env_int(
    "MANAGEMENT_HEALTH_DISKSPACE_THRESHOLD_BYTES", 10 * 1024 * 1024, minimum=0
)
GIT_COMMIT = env_str("GIT_COMMIT", "")  # shown by /actuator/info when the build sets it
MANAGEMENT_HEALTH_DB_TIMEOUT_SECONDS = env_int("MANAGEMENT_HEALTH_DB_TIMEOUT_SECONDS", 3, minimum=1)
# A redis component in /actuator/health (off by default: the components stay db, diskSpace, ping).
MANAGEMENT_HEALTH_REDIS_ENABLED = env_bool("MANAGEMENT_HEALTH_REDIS_ENABLED", False)

LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})
LOGGING = wiring.logging_config(LOG_LEVEL)
