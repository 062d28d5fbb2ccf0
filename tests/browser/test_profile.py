"""The profile page in Chromium: the details saved, the e-mail address changed with the code sent
to the new one, the data exported, and the account deleted, with the password alone and with the
password and a passkey (the DevTools protocol's virtual authenticator); on the way, the Security
page asking a stale sign-in for the password."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import CDPSession, Page, expect

from accounts.models import Session, User
from tests.browser.conftest import Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser

PHONE = "+4915123456789"
NEW_EMAIL = "grace.hopper@example.org"


@pytest.fixture
def person(transactional_db: None) -> User:
    person = UserFactory.create(username="grace", email="grace@example.com", phone=PHONE)
    AdapterFactory.create(username="billing", owner=person)
    return person


def e_mailed_code(page: Page, to: str) -> str:
    page.goto("/dev/outbox")
    e_mail = page.locator("article.outbox-message", has_text=to).first
    code = re.search(r"\b(\d{6})\b", e_mail.locator("pre").inner_text())
    assert code is not None
    return code.group(1)


def test_the_profile_is_saved_the_address_changed_with_a_code_and_the_data_exported(
    page: Page, live_server: Any, person: User, settings: Any, screenshots: Screenshots
) -> None:
    settings.DEBUG = True  # /dev/outbox exists only then; the live server runs in this process
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.get_by_role("link", name="Profile", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/settings/profile")
    expect(page.get_by_role("heading", name="Profile", exact=True)).to_be_visible()
    screenshots.take(page, "profile")
    page.get_by_label("First name", exact=True).fill("Grace")
    page.get_by_label("Last name", exact=True).fill("Hopper")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("Your profile is saved.")
    expect(page.get_by_label("Last name", exact=True)).to_have_value("Hopper")

    with page.expect_download() as downloading:
        page.get_by_role("link", name="Export my data", exact=True).click()
    download = downloading.value
    assert download.suggested_filename == "personal-data.json"
    document = json.loads(Path(download.path()).read_text())
    assert document["profile"]["lastName"] == "Hopper"
    assert [adapter["login"] for adapter in document["adapters"]] == ["billing"]

    page.get_by_role("link", name="Change…", exact=True).click()
    page.get_by_label("New e-mail address", exact=True).fill(NEW_EMAIL)
    page.get_by_label("Your password", exact=True).fill("not-the-password")
    page.get_by_role("button", name="Send the code", exact=True).click()
    expect(page.locator("#id_password_error")).to_have_text(
        "The password is wrong. Nothing was changed."
    )
    expect(page.get_by_label("New e-mail address", exact=True)).to_have_value(NEW_EMAIL)
    screenshots.take(page, "email-change")
    page.get_by_label("Your password", exact=True).fill(DEFAULT_PASSWORD)
    page.get_by_role("button", name="Send the code", exact=True).click()

    expect(page).to_have_url(re.compile(r"/settings/email/confirm\?requestId="))
    expect(page.get_by_text(f"We sent a 6-digit code to {NEW_EMAIL}.")).to_be_visible()
    screenshots.take(page, "email-change-confirm")
    confirm_url = page.url
    code = e_mailed_code(page, NEW_EMAIL)
    page.goto(confirm_url)
    page.get_by_label("Code", exact=True).fill(code)
    page.get_by_role("button", name="Confirm", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/settings/profile")
    expect(page.get_by_role("status")).to_have_text(
        f"Your e-mail address is now {NEW_EMAIL}. We told your old address, and signed out "
        "your other sessions."
    )
    expect(page.locator("#email .email-address")).to_have_text(NEW_EMAIL)
    expect(page.locator("#signed-in-as")).to_contain_text(NEW_EMAIL)
    assert screenshots.wider_than_the_phone == {}


def test_the_account_is_deleted_with_the_password_after_a_page_that_says_what_goes(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto("/settings/profile")
    page.get_by_role("link", name="Delete account…", exact=True).click()

    expect(page.get_by_role("heading", name="Delete your account?")).to_be_visible()
    expect(page.get_by_text("Your 1 adapter, with its queue")).to_be_visible()
    expect(page.get_by_role("button", name="Delete with my passkey")).to_have_count(0)
    page.get_by_label("Your password", exact=True).fill("not-the-password")
    page.get_by_role("button", name="Delete my account", exact=True).click()
    expect(page.locator("#id_password_error")).to_have_text(
        "The password is wrong. Nothing was changed."
    )
    screenshots.take(page, "account-delete")
    page.get_by_label("Your password", exact=True).fill(DEFAULT_PASSWORD)
    page.get_by_role("button", name="Delete my account", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/login")
    expect(page.get_by_role("status")).to_have_text(
        "Your account is deleted. We sent a last e-mail to confirm it. Goodbye."
    )
    assert not User.objects.filter(pk=person.pk).exists()
    assert screenshots.wider_than_the_phone == {}


def test_with_a_passkey_a_stale_sign_in_is_asked_for_the_password_and_deletion_takes_both(
    page: Page,
    live_server: Any,
    person: User,
    authenticator: tuple[CDPSession, str],
    screenshots: Screenshots,
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto("/settings/security")
    page.get_by_role("button", name="Add a passkey", exact=True).click()
    expect(page.locator(".passkeys li")).to_have_count(1)
    for session in Session.objects.filter(user=person):
        session.created_at -= timedelta(seconds=django_settings.ACCOUNTS_REAUTH_SECONDS + 1)
        session.save(update_fields=["created_at"])

    page.goto("/settings/security")
    recovery = page.locator("#form-recovery-codes")
    recovery.get_by_role("button", name="New recovery codes").click()
    refused = page.locator("#form-recovery-codes")
    expect(refused.locator("#reauth-recovery-codes_error")).to_have_text(
        "Enter your password to confirm it is you."
    )
    expect(refused.get_by_label("Your password")).to_be_focused()
    screenshots.take(page, "security-password-asked")
    refused.get_by_label("Your password").fill(DEFAULT_PASSWORD)
    refused.get_by_role("button", name="New recovery codes").click()
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()

    page.goto("/settings/profile/delete")
    page.get_by_label("Your password", exact=True).fill(DEFAULT_PASSWORD)
    screenshots.take(page, "account-delete-passkey")
    page.get_by_role("button", name="Delete with my passkey", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/login")
    expect(page.get_by_role("status")).to_have_text(
        "Your account is deleted. We sent a last e-mail to confirm it. Goodbye."
    )
    assert not User.objects.filter(pk=person.pk).exists()
