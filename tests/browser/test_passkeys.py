"""Passkeys in Chromium, with the DevTools protocol's virtual authenticator standing in for a
device's screen lock: one added on the Security page, signing in with it (refused while the
device does not confirm the person, and by the server once it is removed), and removing it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import CDPSession, Page, expect

from accounts.models import Passkey, User
from tests.browser.conftest import Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


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
