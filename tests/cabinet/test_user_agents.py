"""The sessions list names each session's browser, system and device from its User-Agent
(accounts/user_agents.py), so that sessions of one kind of browser on different machines differ."""

from __future__ import annotations

import pytest

from accounts.user_agents import Client, user_agent_describe

CHROME_ANDROID = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Mobile Safari/537.36"
)
CHROME_WINDOWS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
YANDEX = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 YaBrowser/24.12.0.0 Safari/537.36"
)
SAFARI_IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
)
FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"


@pytest.mark.parametrize(
    ("user_agent", "client"),
    [
        (CHROME_ANDROID, Client("Chrome Mobile 131", "Android 14", "Pixel 8")),
        (CHROME_WINDOWS, Client("Chrome 131", "Windows 10", "")),
        (YANDEX, Client("Yandex Browser 24", "Windows 10", "")),
        (SAFARI_IPHONE, Client("Mobile Safari 17", "iOS 17.5", "iPhone")),
        (FIREFOX_LINUX, Client("Firefox 133", "Linux", "")),
        # HTTP clients of adapters and scripts, which the rules may not know: their product token.
        ("python-httpx/0.28.1", Client("python-httpx 0.28.1", "", "")),
        ("exchange-client/1.0", Client("exchange-client 1.0", "", "")),
        ("curl/8.5.0", Client("curl 8", "", "")),
        ("", Client("", "", "")),
        ("Mozilla/5.0 (compatible)", Client("", "", "")),
    ],
)
def test_a_user_agent_is_told_as_browser_system_and_device(user_agent, client):
    assert user_agent_describe(user_agent) == client


def test_one_browser_on_two_systems_reads_differently():
    assert user_agent_describe(CHROME_ANDROID) != user_agent_describe(CHROME_WINDOWS)
