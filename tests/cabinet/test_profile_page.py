"""The profile page (/settings/profile) with Django's test client: the names, phone and language;
the e-mail address changed with a code sent to the new one; the data export; and deleting the
account, with and without a second factor."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pyotp
import pytest
import time_machine
from django.conf import settings
from django.test import Client

from accounts.models import AuditEvent, OutboxMessage, User
from tests.accounts.api import T0
from tests.authenticator import SoftAuthenticator
from tests.cabinet.passkeys import ORIGIN, added, text
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

PHONE = "+4915123456789"
NEW_EMAIL = "grace.hopper@example.org"


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


def field_error(page: Any, field_id: str) -> str:
    found = re.search(rf'<p class="error" id="{field_id}_error">([^<]*)</p>', text(page))
    assert found is not None, text(page)
    return found.group(1).strip()


def signed_in(user: User) -> Client:
    client = Client()
    assert client.post("/login", {"login": user.email, "password": DEFAULT_PASSWORD}).status_code
    return client


@pytest.mark.parametrize(
    "path", ["/bus", "/settings/security", "/settings/profile", "/settings/profile/delete"]
)
def test_the_header_of_every_cabinet_page_links_the_profile_page(browser, path):
    page = text(browser.get(path))

    assert re.search(r'<nav [^>]*>.*<a href="/settings/profile"[^>]*>Profile</a>', page)


@pytest.mark.parametrize(
    "path",
    [
        "/settings/profile",
        "/settings/profile/export",
        "/settings/profile/delete",
        "/settings/email",
    ],
)
def test_the_profile_pages_need_a_sign_in(client, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/login")


def test_the_profile_page_shows_the_details_the_address_export_and_deletion(browser, person):
    page = text(browser.get("/settings/profile"))

    assert 'value="Ada"' in page
    assert 'value="Lovelace"' in page
    assert f'value="{PHONE}"' in page
    assert '<option value="en" selected>English</option>' in page
    assert "<strong>grace@example.com</strong>" in page
    assert '<a href="/settings/email">Change…</a>' in page
    assert '<a href="/settings/profile/export" download>Export my data</a>' in page
    assert '<a href="/settings/profile/delete" class="danger">Delete account…</a>' in page
    for field_id in re.findall(r'<input[^>]+id="([^"]+)"', page):
        assert f'for="{field_id}"' in page


def test_the_names_phone_and_language_are_saved_and_the_cabinet_speaks_it(browser, person):
    saved = browser.post(
        "/settings/profile",
        {
            "first_name": "Grace",
            "last_name": "Hopper",
            "phone": "+49 151 2345 6780",
            "language": "ru",
        },
    )

    assert saved["Location"] == "/settings/profile"
    assert saved.cookies[settings.LANGUAGE_COOKIE_NAME].value == "ru"
    person.refresh_from_db()
    assert (person.first_name, person.last_name, person.phone) == (
        "Grace",
        "Hopper",
        "+4915123456780",
    )
    assert person.language == "ru"
    again = text(browser.get("/settings/profile"))
    assert "Профиль сохранён." in again
    assert '<html lang="ru">' in again


def test_a_phone_the_service_refuses_is_told_under_its_field_and_nothing_is_saved(browser, person):
    page = browser.post(
        "/settings/profile",
        {"first_name": "Grace", "last_name": "Hopper", "phone": "12345", "language": "en"},
    )

    assert page.status_code == 200
    assert field_error(page, "id_phone") == (
        "Enter a phone number in international format, such as +4915112345678."
    )
    person.refresh_from_db()
    assert person.first_name == "Ada"


def test_the_address_changes_with_the_code_sent_to_it_and_other_sessions_end(browser, person):
    elsewhere = signed_in(person)
    asked = browser.post("/settings/email", {"new_email": NEW_EMAIL, "password": DEFAULT_PASSWORD})
    assert asked["Location"].startswith("/settings/email/confirm?requestId=")
    code_page = text(browser.get(asked["Location"]))
    assert f"We sent a 6-digit code to {NEW_EMAIL}." in code_page
    assert "Send a new code" in code_page

    wrong = browser.post(asked["Location"], {"code": "000000"})
    assert field_error(wrong, "id_code") == "The code is wrong. Attempts left: 4."
    changed = browser.post(asked["Location"], {"code": last_code(NEW_EMAIL)}, follow=True)

    assert changed.redirect_chain[-1][0] == "/settings/profile"
    assert (
        f"Your e-mail address is now {NEW_EMAIL}. We told your old address, and signed out your "
        "other sessions." in text(changed)
    )
    assert f"<strong>{NEW_EMAIL}</strong>" in text(changed)
    person.refresh_from_db()
    assert person.email == NEW_EMAIL
    told = OutboxMessage.objects.filter(to="grace@example.com").latest("created_at")
    assert told.subject == "Your e-mail address was changed"
    assert elsewhere.get("/bus")["Location"].startswith("/login")


def test_the_code_page_sends_a_new_code_after_the_cooldown(browser, person):
    with time_machine.travel(T0, tick=False) as clock:
        asked = browser.post(
            "/settings/email", {"new_email": NEW_EMAIL, "password": DEFAULT_PASSWORD}
        )
        first = last_code(NEW_EMAIL)
        clock.shift(timedelta(seconds=settings.ACCOUNTS_CODE_RESEND_SECONDS + 1))
        resent = browser.post(asked["Location"], {"action": "resend"}, follow=True)

        assert "A new code is on its way. The old one no longer works." in text(resent)
        assert last_code(NEW_EMAIL) != first


def test_a_wrong_password_changes_no_address_and_says_so_under_the_password(browser, person):
    page = browser.post("/settings/email", {"new_email": NEW_EMAIL, "password": "not-it"})

    assert page.status_code == 200
    assert field_error(page, "id_password") == "The password is wrong. Nothing was changed."
    assert f'value="{NEW_EMAIL}"' in text(page)
    assert not OutboxMessage.objects.filter(to=NEW_EMAIL).exists()


def test_an_address_another_account_has_is_told_under_the_address(browser, person, settings):
    settings.ACCOUNTS_PREVENT_ENUMERATION = False
    UserFactory.create(username="ada", email="ada@example.com")

    page = browser.post(
        "/settings/email", {"new_email": "ada@example.com", "password": DEFAULT_PASSWORD}
    )

    assert field_error(page, "id_new_email") == (
        "Another account has this address. Choose another one."
    )
    person.refresh_from_db()
    assert person.email == "grace@example.com"


def test_the_export_downloads_the_apis_document_without_secrets(browser, person, mine):
    download = browser.get("/settings/profile/export")

    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="personal-data.json"'
    assert download["Cache-Control"] == "no-store"
    document = json.loads(download.content)
    api = ApiClient(device_id="browser-1")
    assert api.sign_in(person.username).status_code == 200
    from_api = api.call("get", "/api/users/me/export").json()
    assert document.keys() == from_api.keys()
    assert document["profile"] == from_api["profile"]
    assert [adapter["login"] for adapter in document["adapters"]] == ["billing"]
    raw = download.content.decode()
    assert person.password not in raw
    assert mine.password not in raw
    assert "argon2" not in raw


def test_the_deletion_page_says_what_goes_and_what_stays(browser, person, mine):
    page = text(browser.get("/settings/profile/delete"))

    assert "Your 1 adapter, with its queue, routes in both directions, webhook" in page
    assert "Messages your adapters already sent stay in their recipients' queues." in page
    assert "naming the account by a pseudonym" in page
    assert 'name="token"' not in page
    assert "data-passkey" not in page


def test_deleting_the_account_takes_the_password_signs_out_and_lands_on_the_sign_in(
    browser, person, mine
):
    wrong = browser.post("/settings/profile/delete", {"password": "not-it", "action": "delete"})
    assert field_error(wrong, "id_password") == "The password is wrong. Nothing was changed."
    assert User.objects.filter(pk=person.pk).exists()

    deleted = browser.post(
        "/settings/profile/delete", {"password": DEFAULT_PASSWORD, "action": "delete"}, follow=True
    )

    assert deleted.redirect_chain[-1][0] == "/login"
    assert "Your account is deleted. We sent a last e-mail to confirm it. Goodbye." in text(deleted)
    assert not User.objects.filter(pk__in=[person.pk, mine.pk]).exists()
    assert AuditEvent.objects.filter(kind="ACCOUNT_DELETED").count() == 1
    assert browser.get("/bus")["Location"].startswith("/login")


def test_with_sms_codes_on_the_deletion_needs_the_code_it_sends(browser, person):
    started = browser.post("/settings/two-factor/enable")
    browser.post(started["Location"], {"code": last_code(PHONE)})

    bare = browser.post("/settings/profile/delete", {"password": DEFAULT_PASSWORD})
    assert field_error(bare, "id_token") == (
        "Enter a code of your second factor, or use your passkey."
    )
    sent = browser.post("/settings/profile/delete", {"action": "sms"})
    assert sent["Location"].startswith("/settings/profile/delete?requestId=")
    request_id = sent["Location"].split("=", 1)[1]
    page = text(browser.get(sent["Location"]))
    assert f'<input type="hidden" name="requestId" value="{request_id}">' in page
    assert f"The code we sent to {PHONE}, or one of your recovery codes." in page

    wrong = browser.post(
        sent["Location"],
        {"password": DEFAULT_PASSWORD, "token": "000000", "requestId": request_id},
    )
    assert field_error(wrong, "id_token") == "The code is wrong. Nothing was changed."
    deleted = browser.post(
        sent["Location"],
        {"password": DEFAULT_PASSWORD, "token": last_code(PHONE), "requestId": request_id},
    )

    assert deleted["Location"] == "/login"
    assert not User.objects.filter(pk=person.pk).exists()


def test_with_an_app_on_the_deletion_takes_its_code(browser, person):
    with time_machine.travel(T0, tick=False) as clock:
        started = browser.post("/settings/two-factor/app/start")
        app = browser.get(started["Location"])
        secret = re.search(r'id="totp-secret">([A-Z2-7]+)</code>', text(app))
        assert secret is not None
        totp = pyotp.TOTP(secret.group(1))
        browser.post(started["Location"], {"code": totp.now()})
        clock.shift(timedelta(seconds=60))  # the next code: one is taken once

        page = text(browser.get("/settings/profile/delete"))
        assert "The code your authenticator app shows, or one of your recovery codes." in page
        deleted = browser.post(
            "/settings/profile/delete", {"password": DEFAULT_PASSWORD, "token": totp.now()}
        )

    assert deleted["Location"] == "/login"
    assert not User.objects.filter(pk=person.pk).exists()


def test_with_a_passkey_the_deletion_takes_its_answer_with_the_password(browser, person):
    authenticator = SoftAuthenticator()
    added(browser, authenticator)
    page = text(browser.get("/settings/profile/delete"))
    assert 'data-passkey="get" data-options="/settings/profile/delete/options"' in page
    assert '<button type="submit" class="danger" data-passkey-button>' in page

    asked = browser.post("/settings/profile/delete/options").json()
    answer = json.dumps(authenticator.get(asked["options"]))
    no_password = browser.post(
        "/settings/profile/delete", {"requestId": asked["requestId"], "credential": answer}
    )
    assert field_error(no_password, "id_password") == "This field is required."
    asked = browser.post("/settings/profile/delete/options").json()
    deleted = browser.post(
        "/settings/profile/delete",
        {
            "password": DEFAULT_PASSWORD,
            "requestId": asked["requestId"],
            "credential": json.dumps(authenticator.get(asked["options"])),
        },
    )

    assert deleted["Location"] == "/login"
    assert not User.objects.filter(pk=person.pk).exists()


def test_a_staff_member_without_a_factor_reads_why_and_is_linked_back_once_one_is_on(settings):
    settings.ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR = True
    staff = UserFactory.create(
        username="ops", email="ops@example.com", phone=PHONE, is_staff=True, is_superuser=True
    )
    client = signed_in(staff)

    sent = client.get("/admin/accounts/user/", follow=True)
    page = text(sent)
    assert sent.redirect_chain[-1][0].startswith("/settings/security?next=")
    assert "Set up a second factor before you use the administration." in page
    assert "this page links back once one is on" in page
    started = client.post("/settings/two-factor/enable")
    codes = client.post(started["Location"], {"code": last_code(PHONE)})
    assert codes.status_code == 200

    back = text(client.get("/settings/security"))
    assert '<a href="/admin/accounts/user/">Go back to where you were</a>' in back
    assert client.get("/admin/accounts/user/").status_code == 200


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/\\evil.example"])
def test_a_next_off_the_site_is_never_linked(browser, person, target):
    browser.get("/settings/security", {"next": target})
    started = browser.post("/settings/two-factor/enable")
    browser.post(started["Location"], {"code": last_code(PHONE)})

    page = text(browser.get("/settings/security"))

    assert "Go back to where you were" not in page
    assert "evil.example" not in page
