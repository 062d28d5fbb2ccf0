"""Signing in and its safeguards in Chromium: two-factor sign-in, the lock after wrong passwords,
and the password change an administrator requires."""

from __future__ import annotations

import re
import time
from typing import Any

import pyotp
import pytest
from playwright.sync_api import Page, expect

from accounts.models import SignInGate, User
from accounts.services.accounts import account_require_password_change
from platform_site.timestamps import utc_display
from tests.browser.conftest import Screenshots, sign_in, sms_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.browser

PHONE = "+4915123456789"
NEW_PASSWORD = "another-long-unusual-passphrase"


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone=PHONE)


def test_two_factor_sign_in_is_turned_on_with_an_sms_code_and_then_asks_for_one(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    page.goto("/login")
    screenshots.take(page, "login")
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(page).to_have_url(f"{live_server.url}/bus")

    page.get_by_role("link", name="Security").click()
    expect(page.get_by_text("Off: signing in needs only your password.")).to_be_visible()
    screenshots.take(page, "security")
    page.get_by_role("button", name="Turn on with SMS codes", exact=True).click()

    expect(page).to_have_url(re.compile(r"/settings/two-factor\?requestId="))
    screenshots.take(page, "two-factor-enable")
    page.get_by_label("Code", exact=True).fill(sms_code(PHONE))
    page.get_by_role("button", name="Turn on", exact=True).click()

    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    expect(page.locator("#recovery-codes li")).to_have_count(10)
    page.get_by_role("link", name="I have saved them").click()
    expect(page).to_have_url(f"{live_server.url}/settings/security")
    expect(page.get_by_text(f"On: signing in asks for a code sent to {PHONE}.")).to_be_visible()
    page.get_by_role("button", name="Sign out", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/login")
    expect(page.get_by_text("You are signed out.")).to_be_visible()

    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(page).to_have_url(re.compile(r"/login/two-factor\?requestId="))
    expect(page.get_by_role("heading", name="Enter the SMS code")).to_be_visible()
    screenshots.take(page, "login-two-factor")
    page.get_by_label("Code", exact=True).fill(sms_code(PHONE))
    page.get_by_role("button", name="Sign in", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.get_by_role("button", name="Sign out", exact=True)).to_be_visible()
    assert screenshots.wider_than_the_phone == {}


def test_the_last_wrong_passwords_are_counted_down_and_the_fifth_says_the_account_is_locked(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    wrong = "The e-mail, login or password is wrong."
    said = []
    for _ in range(5):
        sign_in(page, "grace", "not-the-password")
        said.append(page.get_by_role("alert").inner_text().strip())

    locked_until = SignInGate.objects.get(key=f"user:{person.pk}").locked_until
    assert locked_until is not None
    until = utc_display(locked_until)
    assert said == [
        wrong,
        wrong,
        f"{wrong} 2 more wrong passwords lock the account for 15 min.",
        f"{wrong} 1 more wrong password locks the account for 15 min.",
        f"{wrong} That was too many wrong passwords: the account is now locked until {until}. "
        "You can reset your password to unlock it.",
    ]
    expect(page).to_have_url(f"{live_server.url}/login")
    screenshots.take(page, "login-locked")

    sign_in(page, "grace", DEFAULT_PASSWORD)
    expect(page.get_by_role("alert")).to_have_text(
        f"Too many wrong passwords: the account is locked until {until}. "
        "You can reset your password to unlock it."
    )
    assert screenshots.wider_than_the_phone == {}


def test_a_required_password_change_keeps_the_browser_on_the_change_page_until_it_is_done(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    sign_in(page, "grace", DEFAULT_PASSWORD)
    expect(page).to_have_url(f"{live_server.url}/bus")

    account_require_password_change(user=person, actor=None)

    page.goto("/bus")
    expect(page).to_have_url(f"{live_server.url}/settings/password")
    expect(page.get_by_text("Your administrator requires a new password.")).to_be_visible()
    screenshots.take(page, "password-required")
    page.goto("/settings/security")
    expect(page).to_have_url(f"{live_server.url}/settings/password")

    page.get_by_label("Current password", exact=True).fill(DEFAULT_PASSWORD)
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Repeat the new password", exact=True).fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change the password", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/settings/security")
    expect(page.get_by_text("Your password is changed.")).to_be_visible()
    page.goto("/bus")
    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.get_by_role("heading", name="Adapters", exact=True)).to_be_visible()
    assert screenshots.wider_than_the_phone == {}


def app_code(secret: str) -> str:
    """What the authenticator app shows now: the test computes it as the app does."""
    return pyotp.TOTP(secret).now()


def test_an_authenticator_app_is_turned_on_from_its_qr_page_and_then_asked_for_at_sign_in(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto("/settings/security")
    page.get_by_role("button", name="Turn on with an authenticator app", exact=True).click()

    expect(page).to_have_url(re.compile(r"/settings/two-factor/app\?requestId="))
    expect(page.locator("figure.qr svg")).to_be_visible()
    secret = page.locator("#totp-secret").inner_text().strip()
    screenshots.take(page, "two-factor-app")
    turned_on_with = app_code(secret)
    page.get_by_label("Code", exact=True).fill(turned_on_with)
    page.get_by_role("button", name="Confirm and turn on", exact=True).click()

    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    codes = [code.strip() for code in page.locator("#recovery-codes code").all_inner_texts()]
    assert len(codes) == 10
    screenshots.take(page, "recovery-codes")
    page.get_by_role("link", name="I have saved them").click()
    expect(
        page.get_by_text("On: signing in asks for the code your authenticator app shows.")
    ).to_be_visible()
    expect(page.locator("#recovery-codes-left")).to_have_text("10 recovery codes left.")
    screenshots.take(page, "security-app")
    page.get_by_role("button", name="Sign out", exact=True).click()

    # The code that turned the app on was used, and passes no more (the very code: the app may
    # show the next one by now): the sign-in takes the next one the app shows (the platform
    # accepts the step after the current one too).
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(page.get_by_role("heading", name="Enter the code from your app")).to_be_visible()
    expect(page.get_by_role("button", name="Send a new code")).to_have_count(0)
    screenshots.take(page, "login-two-factor-app")
    page.get_by_label("Code", exact=True).fill(turned_on_with)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.locator("#id_code_error")).to_have_text(
        "This code was already used. Wait for the next code your authenticator app shows. "
        "Attempts left: 4."
    )
    page.get_by_label("Code", exact=True).fill(pyotp.TOTP(secret).at(time.time() + 30))
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/bus")

    page.get_by_role("button", name="Sign out", exact=True).click()
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.get_by_label("Code", exact=True).fill(codes[0])
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/bus")
    page.goto("/settings/security")
    expect(page.locator("#recovery-codes-left")).to_have_text("9 recovery codes left.")
    assert screenshots.wider_than_the_phone == {}
