"""The password a stale sign-in is asked for on the pages that hand the account over
(docs/sessions.md, "Reauthentication"): the Security page's code factor and recovery code forms,
and the passkey removal page, carry the field once the sign-in is older than
ACCOUNTS_REAUTH_SECONDS; a missing or wrong password is told under it, on the same page."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from accounts.models import Passkey, Session, User
from tests.authenticator import SoftAuthenticator
from tests.cabinet.passkeys import ORIGIN, added, text
from tests.conftest import last_code
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

PHONE = "+4915123456789"


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


@pytest.fixture
def sms_on(browser: Client, person: User) -> Client:
    """``browser`` with SMS codes on."""
    started = browser.post("/settings/two-factor/enable")
    browser.post(started["Location"], {"code": last_code(PHONE)})
    return browser


def stale(person: User) -> None:
    """The person's sign-ins began longer ago than ACCOUNTS_REAUTH_SECONDS."""
    for session in Session.objects.filter(user=person):
        session.created_at -= timedelta(seconds=settings.ACCOUNTS_REAUTH_SECONDS + 1)
        session.save(update_fields=["created_at"])


def password_fields(page: str) -> list[str]:
    return re.findall(r'<input type="password" name="password" id="(reauth-[a-z-]+)"', page)


def reauth_error(page: Any, action: str) -> str:
    found = re.search(rf'<p class="error" id="reauth-{action}_error">([^<]*)</p>', text(page))
    assert found is not None, text(page)
    return found.group(1).strip()


def test_a_fresh_sign_in_is_asked_for_no_password(sms_on):
    page = text(sms_on.get("/settings/security"))

    assert password_fields(page) == []
    assert 'id="proof-needed"' not in page


def test_a_stale_sign_in_gets_a_labelled_password_field_on_each_guarded_form(sms_on, person):
    stale(person)

    page = text(sms_on.get("/settings/security"))

    assert password_fields(page) == ["reauth-app", "reauth-disable", "reauth-recovery-codes"]
    for field in password_fields(page):
        assert f'<label for="{field}">Your password</label>' in page
        assert f'aria-describedby="{field}_helptext"' in page
    assert "changing or turning off your second factors asks for your password" in page


def test_a_stale_sign_in_without_the_password_keeps_the_page_with_the_error_on_the_field(
    sms_on, person
):
    stale(person)

    page = sms_on.post("/settings/two-factor/disable")

    assert page.status_code == 200
    assert reauth_error(page, "disable") == "Enter your password to confirm it is you."
    assert (
        'aria-describedby="reauth-disable_helptext reauth-disable_error" aria-invalid="true"'
        in (text(page))
    )
    person.refresh_from_db()
    assert person.two_factor_enabled


def test_a_wrong_password_is_told_under_the_field_and_counted(sms_on, person):
    stale(person)

    page = sms_on.post("/settings/two-factor/recovery-codes", {"password": "not-it"})

    assert reauth_error(page, "recovery-codes") == "The password is wrong. Nothing was changed."
    assert "Your recovery codes" not in text(page)


def test_the_password_lets_a_stale_sign_in_turn_sms_codes_off(sms_on, person):
    stale(person)

    off = sms_on.post("/settings/two-factor/disable", {"password": DEFAULT_PASSWORD}, follow=True)

    assert "Two-factor sign-in is off. We sent you an e-mail about it." in text(off)
    person.refresh_from_db()
    assert not person.two_factor_enabled


def test_a_fresh_sign_in_that_went_stale_on_the_page_is_asked_on_the_same_form(sms_on, person):
    sms_on.get("/settings/security")
    stale(person)

    page = sms_on.post("/settings/two-factor/app/start")

    assert password_fields(text(page)) == ["reauth-app", "reauth-disable", "reauth-recovery-codes"]
    assert reauth_error(page, "app") == "Enter your password to confirm it is you."
    assert reauth_error(page, "disable") == ""


def test_the_passkey_removal_page_asks_a_stale_sign_in_for_the_password(browser, person):
    added(browser, SoftAuthenticator(), name="Work laptop")
    passkey = Passkey.objects.get(user=person)
    path = f"/settings/passkeys/{passkey.pk}/remove"
    assert password_fields(text(browser.get(path))) == []
    stale(person)

    asked = text(browser.get(path))
    refused = browser.post(path, {"password": "not-it"})
    removed = browser.post(path, {"password": DEFAULT_PASSWORD}, follow=True)

    assert password_fields(asked) == ["reauth-remove"]
    assert reauth_error(refused, "remove") == "The password is wrong. Nothing was changed."
    assert "The passkey “Work laptop” is removed: it no longer signs you in." in text(removed)
    assert not Passkey.objects.filter(pk=passkey.pk).exists()
