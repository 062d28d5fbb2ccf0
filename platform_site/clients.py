"""Who sent a request: the client's address, behind the proxies the platform trusts
(TRUSTED_PROXIES, docs/deployment.md)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network

from django.conf import settings
from django.http import HttpRequest


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
