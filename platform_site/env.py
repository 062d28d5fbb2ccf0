"""Typed readers of environment variables for settings.py.

Each reader returns the default when the variable is unset or empty, and raises
``ImproperlyConfigured`` naming the variable when a value is set but cannot be parsed: a typo in
production must stop the process at start-up, not surface later as odd behaviour.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _fail(name: str, value: str, expected: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name}={value!r} is not valid: expected {expected}.")


def env_str(name: str, default: str) -> str:
    value = _raw(name)
    return default if value is None else value


def env_secret(name: str, default: str) -> str:
    """Read ``name``, or the contents of the file named by ``name_FILE`` (Docker secrets)."""
    file_name = _raw(f"{name}_FILE")
    if file_name is not None:
        try:
            return Path(file_name).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"{name}_FILE={file_name!r} cannot be read: {error}"
            ) from None
    return env_str(name, default)


def env_previous_keys(name: str, *, current: str, min_length: int) -> tuple[str, ...]:
    """Keys that verify tokens but sign none: comma-separated in ``name`` or the file ``name_FILE``.

    Each is at least ``min_length`` characters, appears once, and is not ``current``. The errors
    name a key by its position, never by its value: a secret must not reach the logs.
    """
    keys = tuple(item.strip() for item in env_secret(name, "").split(",") if item.strip())
    for position, key in enumerate(keys, start=1):
        if len(key) < min_length:
            problem = f"its key {position} is shorter than {min_length} characters"
        elif key == current:
            problem = f"its key {position} is the current key, which verifies tokens anyway"
        elif key in keys[: position - 1]:
            problem = f"its key {position} is listed twice"
        else:
            continue
        raise ImproperlyConfigured(
            f"{name} is not valid: {problem}. Expected keys that verify tokens but sign none, "
            "comma-separated."
        )
    return keys


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise _fail(name, value, "true or false")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise _fail(name, value, "an integer") from None
    if minimum is not None and number < minimum:
        raise _fail(name, value, f"an integer of at least {minimum}")
    if maximum is not None and number > maximum:
        raise _fail(name, value, f"an integer of at most {maximum}")
    return number


def env_float(name: str, default: float, *, minimum: float, maximum: float) -> float:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise _fail(name, value, "a number") from None
    if not minimum <= number <= maximum:  # also refuses nan
        raise _fail(name, value, f"a number from {minimum} to {maximum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks around items are dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


_DURATION = re.compile(r"([0-9]+)([smhd]?)")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def env_durations(name: str, default: str) -> tuple[int, ...]:
    """A comma-separated list of durations, each a whole number of seconds with an optional unit
    (s, m, h, d): "5s,5m,30m,2h". In seconds."""
    value = env_str(name, default)
    durations = []
    for item in value.split(","):
        match = _DURATION.fullmatch(item.strip())
        if match is None:
            raise _fail(name, value, "durations separated by commas, such as 5s,5m,2h")
        durations.append(int(match[1]) * _SECONDS[match[2]])
    return tuple(durations)


_RATE = re.compile(r"[1-9][0-9]*/[0-9]*[smhd]")


def env_rate(name: str, default: str) -> str:
    """A django-ratelimit rate: a count per period, such as 60/m or 1000/h."""
    value = env_str(name, default)
    if not _RATE.fullmatch(value):
        raise _fail(name, value, "a rate such as 60/m (s, m, h or d)")
    return value


def env_choice(name: str, default: str, choices: Collection[str]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise _fail(name, value, "one of " + ", ".join(sorted(choices)))
    return value


def env_subset(name: str, default: list[str], choices: Collection[str]) -> list[str]:
    """A comma-separated list whose items come from ``choices``; ``*`` means all of them."""
    items = env_list(name, default)
    if items == ["*"]:
        return sorted(choices)
    unknown = [item for item in items if item not in choices]
    if unknown:
        raise _fail(
            name, ",".join(items), "a comma-separated list of " + ", ".join(sorted(choices))
        )
    return items


def env_networks(
    name: str, default: list[str]
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A comma-separated list of IP addresses or CIDR networks."""
    items = env_list(name, default)
    try:
        return [ipaddress.ip_network(item, strict=False) for item in items]
    except ValueError:
        raise _fail(
            name, ",".join(items), "IP addresses or CIDR networks, comma-separated"
        ) from None


def email_config(name: str, url: str | None) -> dict[str, Any]:
    """Django e-mail settings from ``smtp://``, ``smtp+tls://`` or ``smtps://`` URLs.

    Without a URL, e-mail goes to the console (the development mode).
    """
    if url is None:
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend",
            "EMAIL_HOST": "localhost",
            "EMAIL_PORT": 25,
            "EMAIL_HOST_USER": "",
            "EMAIL_HOST_PASSWORD": "",
            "EMAIL_USE_TLS": False,
            "EMAIL_USE_SSL": False,
        }
    parts = urlsplit(url)
    if parts.scheme not in {"smtp", "smtp+tls", "smtps"} or not parts.hostname:
        raise _fail(name, url, "smtp://host:port, smtp+tls://user:pass@host:port or smtps://...")
    try:
        port = parts.port
    except ValueError:
        raise _fail(name, url, "a URL with a numeric port") from None
    default_port = {"smtp": 25, "smtp+tls": 587, "smtps": 465}[parts.scheme]
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": port or default_port,
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": parts.scheme == "smtp+tls",
        "EMAIL_USE_SSL": parts.scheme == "smtps",
    }
