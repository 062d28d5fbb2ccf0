"""What a session's User-Agent header tells a person: the browser (or HTTP client), the operating
system and the device, read by ua-parser (the uap-core rules that browsers' vendors keep current),
so that two sessions from one kind of browser on different systems read differently."""

from __future__ import annotations

import re
from dataclasses import dataclass

import ua_parser

# An HTTP client that is not a browser names itself first: "python-httpx/0.28.1", "curl/8.5.0".
_PRODUCT = re.compile(r"([A-Za-z][\w.-]*)/(\d[\w.]*)")


@dataclass(frozen=True)
class Client:
    browser: str  # "Chrome 131", "Yandex Browser 24.12", "python-httpx 0.28.1"; "" if unnamed
    system: str  # "Android 14", "Windows 10", "iOS 17.5"; "" if unnamed
    device: str  # "Pixel 8", "iPhone"; "" for a computer or an unnamed one


def _named(family: str | None, *versions: str | None) -> str:
    if not family or family == "Other":
        return ""
    version = ".".join(part for part in versions if part)
    return f"{family} {version}" if version else family


def user_agent_describe(user_agent: str) -> Client:
    parsed = ua_parser.parse(user_agent)
    browser = ""
    if parsed.user_agent is not None:
        browser = _named(parsed.user_agent.family, parsed.user_agent.major)
    product = _PRODUCT.match(user_agent.strip())
    if not browser and product and product.group(1) != "Mozilla":
        browser = f"{product.group(1)} {product.group(2)}"
    system = ""
    if parsed.os is not None:
        system = _named(parsed.os.family, parsed.os.major, parsed.os.minor)
    device = ""
    if parsed.device is not None and parsed.device.family not in ("Other", "Spider"):
        device = parsed.device.family
    return Client(browser=browser, system=system, device=device)
