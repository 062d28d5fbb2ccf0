"""What the cabinet's passkey tests share: the relying party they answer, a page's text, and a
passkey added on the Security page with a software authenticator (tests/authenticator.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.test import Client

from tests.authenticator import SoftAuthenticator

ORIGIN = "http://localhost:8000"


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def added(browser: Client, authenticator: SoftAuthenticator, name: str = "Laptop") -> Any:
    started = browser.post("/settings/passkeys/options").json()
    credential = authenticator.create(started["options"])
    return browser.post(
        "/settings/passkeys",
        {"requestId": started["requestId"], "credential": json.dumps(credential), "name": name},
        follow=True,
    )
