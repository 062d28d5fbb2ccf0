"""Which device a request comes from: X-Device-ID, or a fingerprint of User-Agent and client IP."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network

from django.conf import settings
from django.http import HttpRequest

from accounts.errors import InvalidDeviceId

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


def _trusted(address: str) -> bool:
    proxies = settings.TRUSTED_PROXIES
    return bool(proxies) and _within(address, tuple(proxies))


# Every request asks about its socket's address, and a worker sees few of them (the proxy's, or
# a handful of clients'): parsing each again cost more than the rest of finding the device.
@lru_cache(maxsize=1024)
def _within(address: str, networks: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_ip(request: HttpRequest) -> str:
    """The socket's address, or the client that a trusted proxy names in X-Forwarded-For.

    Behind trusted proxies the address is the right-most X-Forwarded-For entry that is not itself
    a trusted proxy: entries to its left were written by the client and prove nothing.
    """
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if not _trusted(remote):
        return remote
    forwarded = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for hop in reversed([hop for hop in forwarded if hop]):
        if not _trusted(hop):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return remote
    return remote


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
