"""The Security page's two-factor section with second factors side by side: which are on, which a
sign-in asks for first and choosing it, turning the code factor off while passkeys keep two-factor
sign-in on, and a code factor offered beside passkeys."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from tests.authenticator import SoftAuthenticator
from tests.cabinet.passkeys import ORIGIN, added, text
from tests.conftest import last_code

pytestmark = pytest.mark.django_db

PHONE = "+4915123456789"
STAYS_ON = (
    "Two-factor sign-in stays on while you have a passkey; it goes off with the last one, unless "
    "SMS codes or an authenticator app are on."
)


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


def security(browser: Client) -> str:
    return text(browser.get("/settings/security"))


def two_factor_section(page: str) -> str:
    found = re.search(r'<section class="card" id="two-factor">(.*?)</section>', page)
    assert found is not None
    return found.group(1)


def sms_on(browser: Client) -> Any:
    started = browser.post("/settings/two-factor/enable")
    return browser.post(started["Location"], {"code": last_code(PHONE)})


def test_without_a_factor_the_page_offers_each_way_to_turn_one_on(browser):
    section = two_factor_section(security(browser))

    assert "Off: signing in needs only your password." in section
    assert "Turn it on with an authenticator app or SMS codes, or add a passkey below." in section
    assert ">Turn on with an authenticator app</button>" in section
    assert ">Turn on with SMS codes</button>" in section
    assert "recovery code" not in section


def test_a_passkey_alone_is_asked_for_and_a_code_factor_is_offered_beside_it(browser):
    added(browser, SoftAuthenticator())

    section = two_factor_section(security(browser))

    assert "On: signing in asks for one of your passkeys." in section
    assert '<li id="factor-passkeys"><strong>1 passkey</strong>' in section
    assert STAYS_ON in section
    assert ">Add an authenticator app</button>" in section
    assert ">Add SMS codes</button>" in section
    assert 'id="first-factor"' not in section  # nothing to choose from
    assert "Turn off" not in section
    assert "0 recovery codes left. Make some: each signs you in once" in section
    assert ">New recovery codes</button>" in section


def test_sms_beside_passkeys_the_first_is_chosen_and_turning_sms_off_keeps_two_factor_on(
    browser, person
):
    added(browser, SoftAuthenticator(), "Laptop")
    added(browser, SoftAuthenticator(), "Phone")

    turned_on = text(sms_on(browser))
    both = two_factor_section(security(browser))
    chosen = browser.post("/settings/two-factor/first", {"method": "SMS"}, follow=True)
    person.refresh_from_db()
    first_sms = person.two_factor_method
    off = browser.post("/settings/two-factor/disable", follow=True)
    person.refresh_from_db()

    assert "SMS codes are on, beside your passkeys." in turned_on
    assert (
        "On: signing in asks first for one of your passkeys, and you can switch to another of "
        "your second factors there." in both
    )
    assert f"<strong>SMS codes to {PHONE}</strong>" in both
    assert "<strong>2 passkeys</strong>" in both
    assert '<option value="PASSKEY" selected>A passkey</option>' in both
    assert f'<option value="SMS">SMS codes to {PHONE}</option>' in both
    assert ">Turn off SMS codes</button>" in both
    assert ">Use an authenticator app instead</button>" in both
    assert STAYS_ON in both
    assert "Add SMS codes" not in both
    assert "10 recovery codes left." in both
    assert chosen.redirect_chain == [("/settings/security#two-factor", 302)]
    assert f"Signing in now asks first for a code sent to {PHONE}." in text(chosen)
    assert "On: signing in asks first for a code sent to" in text(chosen)
    assert first_sms == "SMS"
    assert (
        "SMS codes are off. Two-factor sign-in stays on with your passkeys. We sent you an "
        "e-mail about it." in text(off)
    )
    assert (person.two_factor_enabled, person.code_factor) == (True, "")
    assert "On: signing in asks for one of your passkeys." in two_factor_section(text(off))
    assert ">Add SMS codes</button>" in two_factor_section(text(off))


def test_the_authenticator_app_is_removed_by_a_button_named_so(browser, person):
    User.objects.filter(pk=person.pk).update(
        code_factor="TOTP", two_factor_enabled=True, two_factor_method="TOTP"
    )

    section = two_factor_section(security(browser))
    off = browser.post("/settings/two-factor/disable", follow=True)
    person.refresh_from_db()

    assert "On: signing in asks for the code your authenticator app shows." in section
    assert "<strong>An authenticator app</strong>" in section
    assert ">Move to another app</button>" in section
    assert ">Remove the authenticator app</button>" in section
    assert STAYS_ON not in section
    assert "Two-factor sign-in is off. We sent you an e-mail about it." in text(off)
    assert not person.two_factor_enabled


@pytest.mark.parametrize("method", ["TOTP", "SMS", "EMAIL", ""])
def test_a_first_factor_the_person_does_not_hold_is_refused(browser, person, method):
    added(browser, SoftAuthenticator())

    page = browser.post("/settings/two-factor/first", {"method": method}, follow=True)
    person.refresh_from_db()

    assert "This is not one of your second factors." in text(page)
    assert person.two_factor_method == "PASSKEY"


def test_choosing_the_first_factor_needs_a_signed_in_person(client):
    response = client.post("/settings/two-factor/first", {"method": "SMS"})

    assert response["Location"].startswith("/login?next=")


def test_the_factors_speak_russian(browser):
    added(browser, SoftAuthenticator())
    browser.post("/i18n/setlang/", {"language": "ru", "next": "/settings/security"})

    section = two_factor_section(security(browser))

    assert "1 ключ доступа" in section
    assert "Добавить коды по SMS" in section
