"""Which device a request comes from: X-Device-ID, or a fingerprint of User-Agent and client IP."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.http import HttpRequest

from accounts.errors import InvalidDeviceId
from platform_site.clients import client_ip

DEVICE_ID_HEADER = "X-Device-ID"
_DEVICE_ID = re.compile(r"[\x20-\x7e]{1,128}")
# The same rule, as the OpenAPI schema states it.
DEVICE_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": r"^[\x20-\x7e]+$",
}


@dataclass(frozen=True)
class Device:
    key: str  # what a session is bound to: "d:<X-Device-ID>" or "f:<fingerprint>"
    device_id: str  # X-Device-ID as sent, or "" for a fingerprint
    user_agent: str
    ip: str


def device_of(request: HttpRequest) -> Device:
    ip = client_ip(request)
    user_agent = request.META.get("HTTP_USER_AGENT", "")[:512]
    device_id = request.META.get("HTTP_X_DEVICE_ID")
    if device_id is not None:
        if not _DEVICE_ID.fullmatch(device_id):
            raise InvalidDeviceId()
        return Device(key=f"d:{device_id}", device_id=device_id, user_agent=user_agent, ip=ip)
    fingerprint = hashlib.sha256(f"{user_agent}\n{ip}".encode()).hexdigest()[:40]
    return Device(key=f"f:{fingerprint}", device_id="", user_agent=user_agent, ip=ip)
