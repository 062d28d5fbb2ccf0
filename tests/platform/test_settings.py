"""Configuration comes from the environment, is typed, and fails loudly on a bad value."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from platform_site import embedded
from platform_site.env import (
    email_config,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_previous_keys,
    env_secret,
    env_str,
    env_subset,
)

ROOT = Path(__file__).resolve().parents[2]
SERVICE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "EMAIL_URL", "DEBUG")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("True", True), ("1", True), ("yes", True), ("off", False), ("0", False)],
)
def test_booleans_read_the_usual_spellings(monkeypatch, value, expected):
    monkeypatch.setenv("FLAG", value)

    assert env_bool("FLAG", not expected) is expected


def test_unset_or_empty_variables_give_the_default(monkeypatch):
    monkeypatch.delenv("FLAG", raising=False)
    assert env_bool("FLAG", True) is True
    monkeypatch.setenv("FLAG", "  ")
    assert env_bool("FLAG", False) is False
    assert env_int("FLAG", 7) == 7
    assert env_str("FLAG", "x") == "x"
    assert env_list("FLAG", ["a"]) == ["a"]


@pytest.mark.parametrize(
    ("reader", "value", "message"),
    [
        (
            lambda: env_bool("VALUE", False),
            "maybe",
            "VALUE='maybe' is not valid: expected true or false.",
        ),
        (lambda: env_int("VALUE", 1), "ten", "VALUE='ten' is not valid: expected an integer."),
        (
            lambda: env_int("VALUE", 1, minimum=1),
            "0",
            "VALUE='0' is not valid: expected an integer of at least 1.",
        ),
        (
            lambda: env_float("VALUE", 1.0, minimum=0.01, maximum=60),
            "nan",
            "VALUE='nan' is not valid: expected a number from 0.01 to 60.",
        ),
        (
            lambda: env_float("VALUE", 1.0, minimum=0.01, maximum=60),
            "1s",
            "VALUE='1s' is not valid: expected a number.",
        ),
        (
            lambda: env_choice("VALUE", "INFO", {"INFO", "DEBUG"}),
            "LOUD",
            "VALUE='LOUD' is not valid: expected one of DEBUG, INFO.",
        ),
        (
            lambda: env_subset("VALUE", [], {"health", "info"}),
            "health,env",
            "VALUE='health,env' is not valid: expected a comma-separated list of health, info.",
        ),
        (
            lambda: env_networks("VALUE", []),
            "10.0.0.0/8,proxy",
            "VALUE='10.0.0.0/8,proxy' is not valid: expected IP addresses or CIDR networks, "
            "comma-separated.",
        ),
    ],
)
def test_bad_values_raise_naming_the_variable(monkeypatch, reader, value, message):
    monkeypatch.setenv("VALUE", value)

    with pytest.raises(ImproperlyConfigured) as raised:
        reader()

    assert str(raised.value) == message


def test_lists_drop_blanks_around_items(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example , b.example,, ")

    assert env_list("HOSTS", []) == ["a.example", "b.example"]


def test_a_star_exposes_every_choice(monkeypatch):
    monkeypatch.setenv("EXPOSURE", "*")

    assert env_subset("EXPOSURE", [], {"info", "health"}) == ["health", "info"]


def test_networks_accept_addresses_and_cidrs(monkeypatch):
    monkeypatch.setenv("PROXIES", "10.0.0.0/8, 192.168.1.7, ::1")

    assert env_networks("PROXIES", []) == [
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("192.168.1.7/32"),
        ipaddress.ip_network("::1/128"),
    ]


def test_secrets_are_read_from_a_file_when_name_file_is_set(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret-from-file\n")
    monkeypatch.setenv("TOKEN", "from-environment")
    monkeypatch.setenv("TOKEN_FILE", str(secret))

    assert env_secret("TOKEN", "default") == "s3cret-from-file"


def test_an_unreadable_secret_file_fails_loudly(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKEN_FILE", str(tmp_path / "missing"))

    with pytest.raises(ImproperlyConfigured, match="TOKEN_FILE="):
        env_secret("TOKEN", "default")


CURRENT_KEY = "current-key-0123456789abcdef0123456789abcdef"
OLD_KEY = "old-key-0123456789abcdef0123456789abcdef0123"
OLDER_KEY = "older-key-0123456789abcdef0123456789abcdef01"


def test_previous_keys_are_read_comma_separated(monkeypatch):
    monkeypatch.setenv("KEYS", f" {OLD_KEY} ,{OLDER_KEY},, ")

    assert env_previous_keys("KEYS", current=CURRENT_KEY, min_length=32) == (OLD_KEY, OLDER_KEY)


def test_previous_keys_may_come_from_a_file(monkeypatch, tmp_path):
    (tmp_path / "keys").write_text(f"{OLD_KEY},{OLDER_KEY}\n")
    monkeypatch.setenv("KEYS_FILE", str(tmp_path / "keys"))

    assert env_previous_keys("KEYS", current=CURRENT_KEY, min_length=32) == (OLD_KEY, OLDER_KEY)


def test_no_previous_keys_is_an_empty_tuple(monkeypatch):
    monkeypatch.delenv("KEYS", raising=False)

    assert env_previous_keys("KEYS", current=CURRENT_KEY, min_length=32) == ()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (f"{OLD_KEY},short-old-key", "its key 2 is shorter than 32 characters"),
        (f"{CURRENT_KEY}", "its key 1 is the current key, which verifies tokens anyway"),
        (f"{OLD_KEY},{OLDER_KEY},{OLD_KEY}", "its key 3 is listed twice"),
    ],
)
def test_bad_previous_keys_fail_loudly_without_showing_a_key(monkeypatch, value, problem):
    monkeypatch.setenv("KEYS", value)

    with pytest.raises(ImproperlyConfigured) as raised:
        env_previous_keys("KEYS", current=CURRENT_KEY, min_length=32)

    assert str(raised.value) == (
        f"KEYS is not valid: {problem}. Expected keys that verify tokens but sign none, "
        "comma-separated."
    )
    assert not any(key in str(raised.value) for key in (CURRENT_KEY, OLD_KEY, "short-old-key"))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "smtp://mail.internal:2525",
            {
                "EMAIL_HOST": "mail.internal",
                "EMAIL_PORT": 2525,
                "EMAIL_USE_TLS": False,
                "EMAIL_USE_SSL": False,
            },
        ),
        (
            "smtp+tls://robot%40example.com:p%40ss@smtp.example.com:587",
            {
                "EMAIL_HOST": "smtp.example.com",
                "EMAIL_PORT": 587,
                "EMAIL_HOST_USER": "robot@example.com",
                "EMAIL_HOST_PASSWORD": "p@ss",
                "EMAIL_USE_TLS": True,
            },
        ),
        (
            "smtps://smtp.example.com",
            {"EMAIL_PORT": 465, "EMAIL_USE_SSL": True, "EMAIL_USE_TLS": False},
        ),
    ],
)
def test_email_urls_become_smtp_settings(url, expected):
    config = email_config("EMAIL_URL", url)

    assert config["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert {key: config[key] for key in expected} == expected


@pytest.mark.parametrize("url", ["http://mail.example.com", "smtp://", "smtp://host:port"])
def test_bad_email_urls_fail_loudly(url):
    with pytest.raises(ImproperlyConfigured, match="EMAIL_URL="):
        email_config("EMAIL_URL", url)


# Slow: Django started in a new interpreter, about a second each.
in_a_new_process = pytest.mark.slow


def run_settings(code: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """Import the real settings in a fresh interpreter with exactly these service variables."""
    env = {key: value for key, value in os.environ.items() if key not in SERVICE_VARIABLES}
    env.update(variables, DJANGO_SETTINGS_MODULE="platform_site.settings")
    script = "import django, json; django.setup(); from django.conf import settings\n" + code
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@in_a_new_process
@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DEBUG", "sometimes", "DEBUG='sometimes' is not valid"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL='LOUD' is not valid"),
        ("JWT_ACCESS_TTL_SECONDS", "15m", "JWT_ACCESS_TTL_SECONDS='15m' is not valid"),
        ("MANAGEMENT_ENDPOINTS_EXPOSURE", "health,env", "MANAGEMENT_ENDPOINTS_EXPOSURE="),
        (
            "DATABASE_URL",
            "mysql://root@127.0.0.1/platform",
            "DATABASE_URL must be a postgresql:// URL",
        ),
        ("EMAIL_URL", "gmail", "EMAIL_URL='gmail' is not valid"),
        ("REDIS_SOCKET_TIMEOUT_SECONDS", "0", "REDIS_SOCKET_TIMEOUT_SECONDS='0' is not valid"),
        # Above nginx's read timeout for streams less a margin (tests/deploy/test_nginx.py).
        (
            "EXCHANGE_STREAM_HEARTBEAT_SECONDS",
            "61",
            "EXCHANGE_STREAM_HEARTBEAT_SECONDS='61' is not valid",
        ),
        (
            "JWT_PREVIOUS_SIGNING_KEYS",
            "an-old-key",
            "JWT_PREVIOUS_SIGNING_KEYS is not valid: its key 1 is shorter than 32 characters",
        ),
    ],
)
def test_start_up_stops_on_a_bad_variable(variable, value, message):
    result = run_settings("", **{variable: value})

    assert result.returncode == 1
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


@in_a_new_process
def test_defaults_give_the_embedded_mode_without_starting_anything(tmp_path):
    code = """
from platform_site import embedded
print(json.dumps({
    "host": settings.DATABASES["default"]["HOST"],
    "cache": settings.CACHES["default"]["BACKEND"],
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "email": settings.EMAIL_BACKEND,
    "debug": settings.DEBUG,
}))
"""
    # The server module may not be touched by importing settings (or the ASGI application).
    guard = "import platform_site.embedded as e\ne.server_start = None\nimport platform_site.asgi\n"

    result = run_settings(guard + code)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "host": str(embedded.PGDATA),
        "cache": "django.core.cache.backends.locmem.LocMemCache",
        "eager": True,
        "email": "django.core.mail.backends.console.EmailBackend",
        "debug": False,
    }


@in_a_new_process
def test_service_variables_switch_on_the_real_services():
    code = """
print(json.dumps({
    "database": [settings.DATABASES["default"][key] for key in ("HOST", "PORT", "NAME", "USER")],
    "cache": settings.CACHES["default"]["BACKEND"],
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "broker": settings.CELERY_BROKER_URL,
    "email": [settings.EMAIL_BACKEND, settings.EMAIL_HOST, settings.EMAIL_PORT],
}))
"""
    result = run_settings(
        code,
        DATABASE_URL="postgresql://app@db.internal:6432/exchange",
        REDIS_URL="redis://cache.internal:6379/1",
        CELERY_BROKER_URL="amqp://guest:guest@broker.internal:5672//",
        EMAIL_URL="smtp://mail.internal:25",
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "database": ["db.internal", 6432, "exchange", "app"],
        "cache": "django_prometheus.cache.backends.redis.RedisCache",
        "eager": False,
        "broker": "amqp://guest:guest@broker.internal:5672//",
        "email": ["django.core.mail.backends.smtp.EmailBackend", "mail.internal", 25],
    }


@in_a_new_process
def test_without_a_broker_tasks_run_in_process_with_no_hostless_broker_for_kombu_to_warn_of():
    # What queueing a task does in the embedded mode (`make run`): eager tasks still take a
    # producer, whose connection kombu describes; an empty broker URL made it warn "No hostname
    # was supplied" on every code sent.
    code = """
from platform_site.celery import app
with app.producer_or_acquire() as producer:
    connection = producer.connection
    print(json.dumps({"eager": app.conf.task_always_eager, "broker": connection.as_uri()}))
"""
    result = run_settings(code)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "eager": True,
        "broker": "memory://:**@localhost//",  # as_uri() masks a password, even none
    }
    assert "hostname" not in result.stdout + result.stderr


@in_a_new_process
def test_log_level_sets_the_root_logger():
    result = run_settings("import logging; print(logging.getLogger().level)", LOG_LEVEL="WARNING")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "30"


PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "x7Gq2yLk9vN4pR8sT1wZ5bC3dF6hJ0mQ-aE_uI2oY4tW8rV1nM6kL3jH9gB7fD5s",
    "JWT_SIGNING_KEY": "Zq8Wv3Ns6Tk1Ry4Pm7Lx0Hb5Gd2Fc9Ja-Eu_Io3Yt6Wr8Vn1Mk4Lj7Hg0Bf2Ds5Q",
    "TOTP_ENCRYPTION_KEY": "5f0c3e9a7b214d8e9c6a1f2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a",
    "ALLOWED_HOSTS": "platform.example.com",
    "DATABASE_URL": "postgresql://app@db.internal:5432/exchange",
    "REDIS_URL": "redis://cache.internal:6379/0",
    "CELERY_BROKER_URL": "amqp://guest:guest@broker.internal:5672//",
    "EMAIL_URL": "smtp+tls://robot:secret@smtp.example.com:587",
    "SMS_BACKEND": "http",
    "SMS_HTTP_URL": "https://sms.example.com/send",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_PROXY_SSL_HEADER": "true",
}


def check_deploy(**variables: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in SERVICE_VARIABLES}
    env.update(variables)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@in_a_new_process
def test_deploy_check_is_clean_with_production_variables():
    result = check_deploy(**PRODUCTION)

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


@in_a_new_process
def test_deploy_check_refuses_the_development_defaults():
    variables = {
        key: value
        for key, value in PRODUCTION.items()
        if key not in ("SECRET_KEY", "JWT_SIGNING_KEY", "REDIS_URL")
    }

    result = check_deploy(**variables)

    assert result.returncode == 1
    for check in ("platform.E001", "platform.E002", "platform.W001"):
        assert check in result.stderr


@in_a_new_process
def test_the_deploy_check_warns_when_the_second_factors_key_is_derived_from_secret_key():
    without = {key: value for key, value in PRODUCTION.items() if key != "TOTP_ENCRYPTION_KEY"}

    result = check_deploy(**without)

    assert result.returncode == 1
    assert "platform.W006" in result.stderr


@in_a_new_process
def test_start_up_stops_when_the_current_signing_key_is_also_listed_as_previous():
    key = PRODUCTION["JWT_SIGNING_KEY"]

    result = run_settings("", JWT_SIGNING_KEY=key, JWT_PREVIOUS_SIGNING_KEYS=f"{OLD_KEY},{key}")

    assert result.returncode == 1
    assert "JWT_PREVIOUS_SIGNING_KEYS is not valid: its key 2 is the current key" in result.stderr
    assert key not in result.stderr


@in_a_new_process
def test_the_deploy_check_is_clean_in_the_middle_of_a_rotation():
    result = check_deploy(**PRODUCTION, JWT_PREVIOUS_SIGNING_KEYS=f"{OLD_KEY},{OLDER_KEY}")

    assert result.returncode == 0, result.stderr


@in_a_new_process
def test_the_deploy_check_refuses_the_development_key_as_a_previous_key():
    development_key = "development-only-jwt-signing-key-do-not-use-in-production-0123"

    result = check_deploy(**PRODUCTION, JWT_PREVIOUS_SIGNING_KEYS=development_key)

    assert result.returncode == 1
    assert "platform.E005" in result.stderr


@in_a_new_process
def test_the_deploy_check_warns_about_a_signing_key_that_could_not_be_listed_as_previous():
    result = check_deploy(**{**PRODUCTION, "JWT_SIGNING_KEY": f"{CURRENT_KEY},with-a-comma"})

    assert result.returncode == 1
    assert "platform.W005" in result.stderr


@in_a_new_process
def test_an_sms_gateway_without_an_http_url_fails_every_startup_check():
    result = check_deploy(**{**PRODUCTION, "SMS_HTTP_URL": "file:///etc/passwd"})

    assert result.returncode == 1
    assert "platform.E004" in result.stderr


@in_a_new_process
def test_the_deploy_check_warns_when_sms_codes_would_not_be_sent():
    result = check_deploy(**{**PRODUCTION, "SMS_BACKEND": "console"})

    assert result.returncode == 1
    assert "platform.W004" in result.stderr
