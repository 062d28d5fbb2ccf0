"""What a new user met, in Chromium: every field's error shown on the first submit of /welcome,
the language switched with one click, and the authenticator app's key and the recovery codes
copied to the clipboard and downloaded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyotp
import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from tests.browser.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.browser


def test_the_welcome_page_shows_the_names_and_the_phone_errors_on_the_first_submit(
    page: Page, live_server: Any, transactional_db: None
) -> None:
    newcomer: User = UserFactory.create(email="new@example.com", first_name="", last_name="")
    sign_in(page, newcomer.email, DEFAULT_PASSWORD)
    expect(page).to_have_url(f"{live_server.url}/welcome")

    page.get_by_label("Mobile phone", exact=True).fill("12345")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator("#id_first_name_error")).to_have_text("This field is required.")
    expect(page.locator("#id_last_name_error")).to_have_text("This field is required.")
    expect(page.locator("#id_phone_error")).to_have_text(
        "Enter a phone number in international format, such as +4915112345678."
    )
    expect(page.get_by_label("Mobile phone", exact=True)).to_have_value("12345")


def test_one_click_on_a_language_switches_the_page_and_another_switches_back(
    page: Page, live_server: Any, transactional_db: None
) -> None:
    person: User = UserFactory.create(email="grace@example.com", phone="+4915123456789")
    sign_in(page, person.email, DEFAULT_PASSWORD)
    page.goto("/settings/security")

    page.get_by_role("button", name="Русский", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/settings/security")
    expect(page.locator("html")).to_have_attribute("lang", "ru")
    expect(page.get_by_role("heading", level=1)).to_have_text("Безопасность")
    expect(page.get_by_role("button", name="Русский", exact=True)).to_have_attribute(
        "aria-current", "true"
    )

    page.get_by_role("button", name="English", exact=True).click()

    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_role("heading", level=1)).to_have_text("Security")


def test_the_apps_key_and_the_recovery_codes_are_copied_and_the_codes_downloaded(
    page: Page, live_server: Any, transactional_db: None
) -> None:
    person: User = UserFactory.create(email="grace@example.com", phone="+4915123456789")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_in(page, person.email, DEFAULT_PASSWORD)
    page.goto("/settings/security")
    page.get_by_role("button", name="Turn on with an authenticator app", exact=True).click()
    expect(page).to_have_url(re.compile(r"/settings/two-factor/app\?requestId="))
    secret = page.locator("#totp-secret").inner_text().strip()

    page.get_by_role("button", name="Copy", exact=True).click()

    expect(page.get_by_role("button", name="Copied", exact=True)).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    page.get_by_label("Code", exact=True).fill(pyotp.TOTP(secret).now())
    page.get_by_role("button", name="Confirm and turn on", exact=True).click()
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    codes = [code.strip() for code in page.locator("#recovery-codes code").all_inner_texts()]
    assert len(codes) == 10

    page.get_by_role("button", name="Copy", exact=True).click()

    expect(page.get_by_role("button", name="Copied", exact=True)).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "\n".join(codes)
    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download", exact=True).click()
    download = downloading.value
    assert download.suggested_filename == "recovery-codes.txt"
    assert Path(download.path()).read_text() == "".join(f"{code}\n" for code in codes)
