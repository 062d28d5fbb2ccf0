"""SMS backends, chosen by SMS_BACKEND: ``console``, ``http`` (a gateway), ``memory`` (tests), or
the dotted path of a callable ``send(to, text)``."""

from __future__ import annotations

import json
import logging
import sys
import urllib.request
from collections.abc import Callable

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

# What the ``memory`` backend sent, newest last: (to, text). Like django.core.mail.outbox.
outbox: list[tuple[str, str]] = []

HTTP_TIMEOUT_SECONDS = 10


class SmsError(Exception):
    """The gateway refused or did not answer; the outbox retries."""


def _console(to: str, text: str) -> None:
    sys.stdout.write(f"SMS to {to}: {text}\n")
    sys.stdout.flush()


def _memory(to: str, text: str) -> None:
    outbox.append((to, text))


def _http(to: str, text: str) -> None:
    """POST ``{"to", "text"}`` as JSON to SMS_HTTP_URL; any status but 2xx is a failure."""
    url = settings.SMS_HTTP_URL
    if not url.startswith(("http://", "https://")):
        raise SmsError(f"SMS_HTTP_URL must be an http or https URL, not {url!r}")
    request = urllib.request.Request(  # noqa: S310 (the scheme is checked above)
        url,
        data=json.dumps({"to": to, "text": text}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:  # noqa: S310
            response.read()
    except OSError as error:  # URLError and HTTPError are OSErrors
        raise SmsError(f"SMS gateway: {error}") from error


BACKENDS: dict[str, Callable[[str, str], None]] = {
    "console": _console,
    "memory": _memory,
    "http": _http,
}


def sms_send(*, to: str, text: str) -> None:
    backend = BACKENDS.get(settings.SMS_BACKEND) or import_string(settings.SMS_BACKEND)
    backend(to, text)
