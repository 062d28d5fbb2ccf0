"""Which endpoints a webhook may reach: public HTTPS only, unless EXCHANGE_WEBHOOK_ALLOW_PRIVATE.

A URL is checked twice. When the owner sets it: the scheme, and an IP literal's address. When a
message is pushed: every address its name resolves to, and the connection then goes to an address
that was checked (``CheckedBackend``, the network backend of the HTTP client), so a name that
resolves to 127.0.0.1, or is made to between the check and the connection, reaches nothing
private. The TLS certificate is still verified against the URL's name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from collections.abc import Iterable
from urllib.parse import urlsplit

import httpcore
from django.conf import settings

MAX_URL_LENGTH = 2000

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(httpcore.ConnectError):
    """The endpoint's name resolves to an address a webhook may not reach."""


def address_public(address: IPAddress) -> bool:
    """A global unicast address: not private, loopback, link-local, shared, reserved,
    unspecified or multicast (an IPv4 address written as IPv6 is judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def url_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` cannot be a webhook's endpoint, or None."""
    if len(url) > MAX_URL_LENGTH:
        return f"Ensure this field has no more than {MAX_URL_LENGTH} characters."
    if not url.isascii():
        return "Write the URL in ASCII: a name in punycode (xn--...), the path percent-encoded."
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Enter a valid URL."
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes:
        return "Enter an https:// URL." if parts.scheme != "https" else "Enter a valid URL."
    host = parts.hostname
    if not host or any(character.isspace() for character in url) or port == 0:
        return "Enter a valid URL."
    if parts.username is not None or parts.password is not None:
        return "Credentials in the URL are not accepted: authenticate by the signature."
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # A name: its addresses are checked at each delivery.
        return None if _HOST_NAME.fullmatch(host) else "Enter a valid host name."
    if not allow_private and not address_public(address):
        return "The address is private, loopback, link-local or multicast."
    return None


_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}\.?$){_LABEL}(?:\.{_LABEL})*\.?")


def ssl_context() -> ssl.SSLContext:
    """The system's trusted CAs, and EXCHANGE_WEBHOOK_CA_BUNDLE's."""
    context = ssl.create_default_context()
    if settings.EXCHANGE_WEBHOOK_CA_BUNDLE:
        context.load_verify_locations(cafile=settings.EXCHANGE_WEBHOOK_CA_BUNDLE)
    return context


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses that pass the check."""

    def __init__(self, *, allow_private: bool) -> None:
        self.allow_private = allow_private
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.addresses(host, port)
        error: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as failed:
                error = failed
        assert error is not None  # noqa: S101 (addresses() returns at least one)
        raise error

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """Every address ``host`` resolves to, if every one may be reached."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as error:
            raise httpcore.ConnectError(f"{host} does not resolve: {error}") from error
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        if not addresses:
            raise httpcore.ConnectError(f"{host} does not resolve")
        refused = [a for a in addresses if not self.allow_private and not address_public(a)]
        if refused:
            raise TargetRefused(
                f"{host} resolves to {refused[0]}: private, loopback, link-local and multicast "
                "addresses are refused"
            )
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("a webhook reaches no Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
