"""Passkeys in Chromium, with the DevTools protocol's virtual authenticator standing in for a
device's screen lock: one added on the Security page, signing in with it (refused while the
device does not confirm the person, and by the server once it is removed), and removing it; a
passkey as the second step of a password sign-in, beside SMS codes that the step switches to."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import CDPSession, Page, expect

from accounts.models import Passkey, User
from tests.browser.conftest import Screenshots, sign_in, sms_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.browser

PHONE = "+4915123456789"


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone=PHONE)


def test_a_passkey_is_added_signs_in_once_the_device_confirms_the_person_and_is_removed(
    page: Page,
    live_server: Any,
    person: User,
    authenticator: tuple[CDPSession, str],
    screenshots: Screenshots,
) -> None:
    cdp, authenticator_id = authenticator
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto("/settings/security")
    expect(page.get_by_text("No passkeys yet.")).to_be_visible()
    expect(page.get_by_text("Passkeys need a browser")).to_be_hidden()
    page.get_by_label("Name of the new passkey").fill("Work laptop")
    page.get_by_role("button", name="Add a passkey", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/settings/security#passkeys")
    expect(page.get_by_role("status")).to_have_text(
        "The passkey “Work laptop” is added: you can sign in with it."
    )
    expect(page.locator(".passkeys li")).to_have_count(1)
    expect(page.locator(".passkeys .passkey-name")).to_have_text("Work laptop")
    expect(page.locator(".passkeys li")).to_contain_text("last used never")
    screenshots.take(page, "security-passkeys")
    page.get_by_role("button", name="Sign out", exact=True).click()

    cdp.send(
        "WebAuthn.setUserVerified", {"authenticatorId": authenticator_id, "isUserVerified": False}
    )
    page.get_by_role("button", name="Sign in with a passkey", exact=True).click()
    # Chromium refuses before anything is sent: user verification is required.
    expect(page.get_by_role("alert")).to_have_text(
        "You were not signed in: the passkey was cancelled, or the browser stopped waiting."
    )
    expect(page).to_have_url(f"{live_server.url}/login")

    cdp.send(
        "WebAuthn.setUserVerified", {"authenticatorId": authenticator_id, "isUserVerified": True}
    )
    page.get_by_role("button", name="Sign in with a passkey", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.locator("#signed-in-as")).to_contain_text("grace@example.com")

    page.goto("/settings/security")
    expect(page.locator(".passkeys li")).not_to_contain_text("last used never")
    page.get_by_role("button", name="Remove Work laptop…", exact=True).click()
    expect(page.get_by_role("heading", name="Remove the passkey Work laptop?")).to_be_visible()
    screenshots.take(page, "passkey-remove")
    page.get_by_role("button", name="Remove the passkey", exact=True).click()
    expect(page.get_by_role("status")).to_have_text(
        "The passkey “Work laptop” is removed: it no longer signs you in."
    )
    expect(page.get_by_text("No passkeys yet.")).to_be_visible()
    assert not Passkey.objects.filter(user=person).exists()

    # The device still holds it: the server refuses it now.
    page.get_by_role("button", name="Sign out", exact=True).click()
    page.get_by_role("button", name="Sign in with a passkey", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/login/passkey")
    expect(page.get_by_role("alert")).to_have_text(
        "This passkey did not sign you in: it is not known here (it may have been removed), "
        "your device did not confirm it was you, or the request took too long. Try again, or "
        "sign in with your password."
    )
    screenshots.take(page, "login-passkey-refused")
    assert screenshots.wider_than_the_phone == {}


def test_the_second_step_asks_for_the_passkey_and_switches_to_sms_codes(
    page: Page,
    live_server: Any,
    person: User,
    authenticator: tuple[CDPSession, str],
    screenshots: Screenshots,
) -> None:
    cdp, authenticator_id = authenticator
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto("/settings/security")
    page.get_by_label("Name of the new passkey").fill("Work laptop")
    page.get_by_role("button", name="Add a passkey", exact=True).click()
    expect(page.locator("#two-factor-state")).to_have_text(
        "On: signing in asks for one of your passkeys."
    )
    page.get_by_role("button", name="Add SMS codes", exact=True).click()
    page.get_by_label("Code", exact=True).fill(sms_code(PHONE))
    page.get_by_role("button", name="Turn on", exact=True).click()
    page.get_by_role("link", name="I have saved them").click()
    expect(page.locator("#two-factor-state")).to_have_text(
        "On: signing in asks first for one of your passkeys, and you can switch to another of "
        "your second factors there."
    )
    expect(page.locator("#factor-sms")).to_contain_text(f"SMS codes to {PHONE}")
    expect(page.get_by_label("Ask first for")).to_have_value("PASSKEY")
    screenshots.take(page, "security-factors")
    page.get_by_role("button", name="Sign out", exact=True).click()

    # The password, then the passkey the sign-in asks for first.
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(page).to_have_url(re.compile(r"/login/two-factor\?requestId="))
    expect(page.get_by_role("heading", name="Confirm with your passkey")).to_be_visible()
    expect(page.get_by_label("Recovery code", exact=True)).to_be_visible()
    screenshots.take(page, "login-two-factor-passkey")
    page.get_by_role("button", name="Use your passkey", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.locator("#signed-in-as")).to_contain_text("grace@example.com")
    page.get_by_role("button", name="Sign out", exact=True).click()

    # The device no longer holds the passkey: nothing is sent, and the page keeps its ways.
    cdp.send("WebAuthn.clearCredentials", {"authenticatorId": authenticator_id})
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    step = page.url
    page.get_by_role("button", name="Use your passkey", exact=True).click()
    expect(page.get_by_role("alert")).to_have_text(
        "The passkey was cancelled, or the browser stopped waiting. Try again, or use another "
        "way below."
    )
    expect(page).to_have_url(step)

    page.get_by_role("button", name="Use a code sent by SMS instead", exact=True).click()
    expect(page).to_have_url(step)
    expect(page.get_by_role("heading", name="Enter the SMS code")).to_be_visible()
    expect(page.get_by_role("button", name="Use a passkey instead", exact=True)).to_be_visible()
    screenshots.take(page, "login-two-factor-switched")
    page.get_by_label("Code", exact=True).fill(sms_code(PHONE))
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/bus")
    assert screenshots.wider_than_the_phone == {}
