"""The newcomer's journey in Chromium: register, confirm the e-mail from the development outbox,
complete the profile, create an adapter, and watch its test message go through the exchange API."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import Screenshots

pytestmark = pytest.mark.browser

PASSWORD = "a-long-and-unusual-passphrase"


def figure(page: Page, login: str, name: str) -> Locator:
    return page.locator(f'section.adapter[data-login="{login}"] dd[data-figure="{name}"]')


def test_a_newcomer_registers_creates_an_adapter_and_sees_its_test_message_received_and_acked(
    page: Page, live_server: Any, settings: Any, screenshots: Screenshots
) -> None:
    settings.DEBUG = True  # /dev/outbox exists only then; the live server runs in this process

    page.goto("/register")
    screenshots.take(page, "register")
    page.get_by_label("E-mail", exact=True).fill("ada@example.com")
    page.get_by_label("New password", exact=True).fill(PASSWORD)
    page.get_by_label("Repeat the new password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Create the account").click()

    expect(page).to_have_url(re.compile(r"/register/confirm\?requestId="))
    expect(page.get_by_text("We sent a 6-digit code to ada@example.com")).to_be_visible()
    screenshots.take(page, "register-confirm")
    confirm_url = page.url

    page.goto("/dev/outbox")
    screenshots.take(page, "dev-outbox")
    e_mail = page.locator("article.outbox-message", has_text="ada@example.com").first
    code = re.search(r"\b(\d{6})\b", e_mail.locator("pre").inner_text())
    assert code is not None

    page.goto(confirm_url)
    page.get_by_label("Code", exact=True).fill(code.group(1))
    page.get_by_role("button", name="Confirm", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/welcome")
    screenshots.take(page, "welcome")
    page.get_by_label("First name", exact=True).fill("Ada")
    page.get_by_label("Last name", exact=True).fill("Lovelace")
    page.get_by_label("Mobile phone", exact=True).fill("+4915123456789")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.get_by_text("Your profile is complete.")).to_be_visible()
    expect(page.get_by_text("No adapters yet.")).to_be_visible()
    screenshots.take(page, "bus-empty")
    page.get_by_role("button", name="Create an adapter", exact=True).click()

    expect(page.get_by_text("Copy the password now: it is shown only this once.")).to_be_visible()
    login = page.locator("#credential-login").inner_text().strip()
    password = page.locator("#credential-password").inner_text().strip()
    assert login
    assert password
    screenshots.take(page, "bus-credentials")

    with httpx.Client(base_url=live_server.url, headers={"X-Device-ID": "erp-1"}) as api:
        signed_in = api.post(
            "/api/auth/login/username", json={"username": login, "password": password}
        )
        assert signed_in.status_code == 200, signed_in.text
        api.headers["Authorization"] = f"Bearer {signed_in.json()['accessToken']}"

        page.locator(f'section.adapter[data-login="{login}"]').get_by_role(
            "button", name="Send a test message"
        ).click()
        expect(page.get_by_text(f"is waiting for {login}")).to_be_visible()
        expect(figure(page, login, "available")).to_have_text("1")
        screenshots.take(page, "bus")

        received = api.get("/api/exchange/messages", params={"max": 10})
        assert received.status_code == 200, received.text
        [message] = received.json()["messages"]
        assert message["type"] == "cabinet.test"
        acked = api.post("/api/exchange/messages/ack", json={"messageIds": [message["messageId"]]})
        assert acked.json() == {"results": [{"messageId": message["messageId"], "status": "acked"}]}

    page.reload()
    expect(figure(page, login, "available")).to_have_text("0")
    expect(figure(page, login, "in-flight")).to_have_text("0")
    assert screenshots.wider_than_the_phone == {}
