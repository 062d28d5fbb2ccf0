"""What a new user met in the cabinet, each fixed with a test: the language switch is one button
per language, named in itself, the queue limit has its thousands separated, the purge page's
address ends where it should, completing the profile mails nothing about the phone, the
welcome page shows every field's error at once, and the copy and download buttons that need the
script are hidden without it."""

from __future__ import annotations

import re

import pyotp
import pytest
from django.test import Client

from accounts.models import OutboxMessage, User
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def text(response: object) -> str:
    return response.content.decode()  # type: ignore[attr-defined]


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_language_switch_names_each_language_in_itself(client, language):
    page = text(client.get("/login", HTTP_ACCEPT_LANGUAGE=language))

    assert '<button type="submit" name="language" value="en" lang="en"' in page
    assert ">English</button>" in page
    assert ">Русский</button>" in page
    assert "Английский" not in page


def test_the_queue_limit_has_its_thousands_separated(browser, mine, settings):
    settings.EXCHANGE_MAX_QUEUE_DEPTH = 100_000

    english = text(browser.get("/bus"))
    browser.post("/i18n/setlang/", {"language": "ru", "next": "/bus"})
    russian = text(browser.get("/bus"))

    assert '<dd data-figure="limit">0 / 100,000</dd>' in english
    assert '<dd data-figure="limit">0 / 100\xa0000</dd>' in russian


def test_the_purge_page_is_a_link_whose_address_ends_with_purge(browser, mine):
    page = text(browser.get("/bus"))

    assert f'<a class="button secondary" href="/bus/adapters/{mine.pk}/purge">' in page
    assert browser.get(f"/bus/adapters/{mine.pk}/purge").status_code == 200


def test_completing_the_profile_mails_nothing_about_the_phone():
    newcomer: User = UserFactory.create(email="new@example.com", first_name="", last_name="")
    client = Client()
    client.post("/login", {"login": newcomer.email, "password": DEFAULT_PASSWORD})

    response = client.post(
        "/welcome", {"first_name": "Ada", "last_name": "Lovelace", "phone": "+4915123456789"}
    )

    assert response.status_code == 302
    assert User.objects.get(pk=newcomer.pk).phone == "+4915123456789"
    assert not OutboxMessage.objects.filter(template="phone_changed").exists()


def test_the_welcome_page_shows_every_fields_error_on_the_first_submit():
    newcomer: User = UserFactory.create(email="new@example.com", first_name="", last_name="")
    client = Client()
    client.post("/login", {"login": newcomer.email, "password": DEFAULT_PASSWORD})

    page = text(client.post("/welcome", {"first_name": "", "last_name": "", "phone": "12345"}))

    assert page.count("This field is required.") == 2
    assert "Enter a phone number in international format, such as +4915112345678." in page
    assert 'name="phone" value="12345"' in page
    assert User.objects.get(pk=newcomer.pk).phone == ""


def test_the_copy_and_download_buttons_are_hidden_until_the_script_shows_them(browser):
    started = browser.post("/settings/two-factor/app/start")
    app_page = text(browser.get(started["Location"]))
    secret = re.search(r'id="totp-secret">([A-Z2-7]+)<', app_page)
    assert secret is not None

    codes_page = text(
        browser.post(started["Location"], {"code": pyotp.TOTP(secret.group(1)).now()})
    )

    assert 'data-copy="#totp-secret" data-copied-label="Copied" hidden>Copy</button>' in app_page
    assert 'data-copy="#recovery-codes" data-copied-label="Copied" hidden>Copy</button>' in (
        codes_page
    )
    assert (
        'data-download="#recovery-codes" data-filename="recovery-codes.txt" hidden>Download</button>'
        in codes_page
    )
    assert "<script" not in codes_page.replace('<script src="/static/cabinet.js" defer>', "")
