"""Signing in and its safeguards in Chromium: two-factor sign-in, the lock after wrong passwords,
and the password change an administrator requires."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts import sms
from accounts.models import SignInGate, User
from accounts.services.accounts import account_require_password_change
from platform_site.timestamps import utc_display
from tests.browser.conftest import Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.browser

PHONE = "+4915123456789"
NEW_PASSWORD = "another-long-unusual-passphrase"


def sms_code(phone: str) -> str:
    """The code in the newest SMS the phone received. (The outbox row's body is erased once the
    live server has sent it, so last_code() cannot read it here.)"""
    text = next(text for to, text in reversed(sms.outbox) if to == phone)
    code = re.search(r"\b(\d{6})\b", text)
    assert code is not None, text
    return code.group(1)


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
    page.get_by_role("button", name="Turn on", exact=True).click()

    expect(page).to_have_url(re.compile(r"/settings/two-factor\?requestId="))
    screenshots.take(page, "two-factor-enable")
    page.get_by_label("Code", exact=True).fill(sms_code(PHONE))
    page.get_by_role("button", name="Turn on", exact=True).click()

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
