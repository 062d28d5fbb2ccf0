"""Chromium, driven by Playwright, against pytest-django's live server in this process.

One browser for the package, a fresh context (cookies, storage) for each test, and one page at a
time: the live server's listen backlog is small."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    CDPSession,
    ConsoleMessage,
    Page,
    sync_playwright,
)

from accounts import sms

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# `make screenshots` renders docs/screenshots; otherwise the tests leave the checkout alone.
SCREENSHOTS_DIR = os.environ.get("SCREENSHOTS_DIR")
PHONE_WIDTH = 360
DESKTOP_WIDTH = 1440
HEIGHT = 900


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One Chromium for the package's tests.

    Playwright's sync API keeps an asyncio loop running in this thread while it is started, and
    Django refuses database calls from a thread with a running loop. So the tests' own queries
    (fixtures, flushes, reading codes) are allowed for exactly that time, and the browser stops
    with the package rather than the session, before the rest of the suite runs without it.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, live_server: Any, transactional_db: None) -> Iterator[Page]:
    context: BrowserContext = browser.new_context(
        base_url=live_server.url,
        locale="en-US",
        viewport={"width": DESKTOP_WIDTH, "height": HEIGHT},
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def refused_by_the_csp(page: Page) -> list[str]:
    """What the browser's console says the page's Content-Security-Policy refused."""
    refused: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            refused.append(message.text)

    page.on("console", heard)
    return refused


class Screenshots:
    """Full-page screenshots at a phone's and a desktop's width, and the pages that scroll
    sideways on the phone."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.wider_than_the_phone: dict[str, int] = {}

    def take(self, page: Page, name: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for width in (PHONE_WIDTH, DESKTOP_WIDTH):
            page.set_viewport_size({"width": width, "height": HEIGHT})
            if width == PHONE_WIDTH:
                scroll_width = page.evaluate("document.documentElement.scrollWidth")
                if scroll_width > PHONE_WIDTH:
                    self.wider_than_the_phone[name] = scroll_width
            page.screenshot(
                path=self.folder / f"{name}-{width}.png",
                full_page=True,
                animations="disabled",
                caret="hide",
            )


@pytest.fixture
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Screenshots:
    if SCREENSHOTS_DIR:
        return Screenshots(Path(SCREENSHOTS_DIR).resolve())
    return Screenshots(tmp_path_factory.getbasetemp() / "screenshots")


def sign_in(page: Page, login: str, password: str) -> None:
    page.goto("/login")
    page.get_by_label("E-mail or login", exact=True).fill(login)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()


def sms_code(phone: str) -> str:
    """The code in the newest SMS the phone received. (The outbox row's body is erased once the
    live server has sent it, so last_code() cannot read it here.)"""
    text = next(text for to, text in reversed(sms.outbox) if to == phone)
    code = re.search(r"\b(\d{6})\b", text)
    assert code is not None, text
    return code.group(1)


@pytest.fixture
def authenticator(page: Page, live_server: Any, settings: Any) -> tuple[CDPSession, str]:
    """A platform authenticator with user verification, answering at once; the live server
    (in this process) expects this test's origin."""
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [live_server.url]
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    added = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return cdp, added["authenticatorId"]
