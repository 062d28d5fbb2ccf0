"""The Russian translation: the catalogue is complete and compiled, and the pages, the language
switch and the e-mails speak Russian when asked to."""

from __future__ import annotations

import ast
import gettext
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation

from accounts.models import AuditEvent, OutboxMessage, User
from accounts.services.notices import HEADLINES, Notice
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD

PO = Path(settings.BASE_DIR) / "locale" / "ru" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")

PASSWORD = "a-long-and-unusual-passphrase"


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def po_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a .po file: msgid, msgid_plural, msgstr / msgstr[n], flags, obsolete."""
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] = {}
    key = ""

    def finish() -> None:
        nonlocal entry, key
        if "msgid" in entry:
            entries.append(entry)
        entry, key = {}, ""

    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            finish()
        elif line.startswith("#,"):
            if "msgid" in entry:
                finish()
            entry.setdefault("flags", set()).update(flag.strip() for flag in line[2:].split(","))
        elif line.startswith("#~"):
            entry["obsolete"] = True
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            entry[key] += ast.literal_eval(line)
        else:
            key, _, value = line.partition(" ")
            if key == "msgid" and "msgid" in entry:
                finish()
                key = "msgid"
            entry[key] = ast.literal_eval(value)
    finish()
    return entries


def test_every_message_is_translated_and_none_is_fuzzy():
    entries = po_entries(PO)
    header, messages = entries[0], entries[1:]

    assert header["msgid"] == ""
    assert "fuzzy" not in header.get("flags", set())
    assert "Language: ru\n" in header["msgstr"]
    assert "Plural-Forms: nplurals=3;" in header["msgstr"]
    assert len(messages) > 150
    for message in messages:
        assert not message.get("obsolete"), message["msgid"]
        assert "fuzzy" not in message.get("flags", set()), message["msgid"]
        if "msgid_plural" in message:
            forms = [message.get(f"msgstr[{n}]", "") for n in range(3)]
            assert all(forms), message["msgid"]
        else:
            assert message["msgstr"], message["msgid"]


def test_the_placeholders_survive_the_translation():
    placeholder = re.compile(r"%\([a-z_]+\)s|%%|%s")
    for message in po_entries(PO)[1:]:
        expected = sorted(placeholder.findall(message["msgid"]))
        translations = [value for key, value in message.items() if key.startswith("msgstr")]
        for translated in translations:
            assert sorted(placeholder.findall(translated)) == expected, message["msgid"]


def test_the_compiled_catalogue_says_what_the_source_says():
    # Compared by content: a checkout gives both files the same moment, so times prove nothing.
    with MO.open("rb") as compiled:
        catalogue = gettext.GNUTranslations(compiled)

    for entry in po_entries(PO):
        if not entry["msgid"] or entry.get("obsolete"):
            continue
        if "msgid_plural" in entry:
            for n, form in ((1, "msgstr[0]"), (3, "msgstr[1]"), (5, "msgstr[2]")):
                assert catalogue.ngettext(entry["msgid"], entry["msgid_plural"], n) == entry[form]
        else:
            assert catalogue.gettext(entry["msgid"]) == entry["msgstr"], entry["msgid"]


def test_russian_counts_take_three_forms():
    with translation.override("ru"):
        attempts = {
            n: render_to_string("cabinet/_code.html", {"attempts_left": n, "retry_after": 0})
            for n in (1, 3, 5, 21)
        }

    assert "Осталась 1 попытка." in attempts[1]
    assert "Осталось 3 попытки." in attempts[3]
    assert "Осталось 5 попыток." in attempts[5]
    assert "Осталась 21 попытка." in attempts[21]
    # The JavaScript countdown fills in the seconds: the %s survives the translation.
    assert 'data-wait-label="Новый код можно запросить через %s' in attempts[1]


def test_the_security_events_are_named_in_russian():
    with translation.override("ru"):
        assert str(AuditEvent.Kind.SIGN_IN.label) == "Вход выполнен"
        assert str(AuditEvent.Kind.TWO_FACTOR_ENABLED.label) == "Двухфакторный вход включён"
    with translation.override("en"):
        assert str(AuditEvent.Kind.SIGN_IN.label) == "Signed in"
    assert AuditEvent.Kind.SIGN_IN.value == "SIGN_IN"


@pytest.mark.django_db
def test_the_sign_in_page_is_russian_for_a_russian_browser(client):
    page = client.get("/login", HTTP_ACCEPT_LANGUAGE="ru")

    assert page.status_code == 200
    assert '<html lang="ru">' in text(page)
    assert "<h1>Войти</h1>" in text(page)
    assert '">Электронная почта или логин</label>' in text(page)
    assert '">Пароль</label>' in text(page)
    assert "Забыли пароль?" in text(page)
    assert "Sign in" not in text(page)


@pytest.mark.django_db
def test_the_sign_in_page_stays_english_by_default(client):
    page = client.get("/login")

    assert '<html lang="en">' in text(page)
    assert "<h1>Sign in</h1>" in text(page)
    assert '">E-mail or login</label>' in text(page)


@pytest.mark.django_db
def test_the_language_switch_makes_the_next_pages_russian():
    client = Client()
    switched = client.post("/i18n/setlang/", {"language": "ru", "next": "/login"})

    assert switched.status_code == 302
    assert switched["Location"] == "/login"
    page = client.get("/login")
    assert '<html lang="ru">' in text(page)
    assert "<h1>Войти</h1>" in text(page)

    client.post("/i18n/setlang/", {"language": "en", "next": "/login"})
    assert "<h1>Sign in</h1>" in text(client.get("/login"))


@pytest.mark.django_db
def test_a_wrong_password_is_told_in_russian(client):
    page = client.post(
        "/login",
        {"login": "nobody@example.com", "password": "wrong"},
        HTTP_ACCEPT_LANGUAGE="ru",
    )

    assert "Неверная электронная почта, логин или пароль." in text(page)


def test_the_registration_e_mail_renders_in_russian():
    context = {"platform_name": "Платформа", "code": "123456", "minutes": 15}
    with translation.override("ru"):
        subject = render_to_string("emails/registration_code_subject.txt", context)
        body = render_to_string("emails/registration_code.txt", context)
        html = render_to_string("emails/registration_code.html", context)

    assert subject.strip() == "Код подтверждения электронной почты на Платформа"
    assert "Ваш код подтверждения: 123456." in body
    assert "Код действует 15 мин." in body
    assert "Ваш код подтверждения:" in html
    assert "123456" in html


@pytest.mark.django_db
def test_a_russian_registration_queues_a_russian_e_mail():
    client = ApiClient(device_id="laptop")
    registered = client.call(
        "post",
        "/api/auth/register",
        {"email": "lev@example.com", "password": PASSWORD, "confirmPassword": PASSWORD},
        HTTP_ACCEPT_LANGUAGE="ru",
    )

    assert registered.status_code == 200, registered.json()
    message = OutboxMessage.objects.get(to="lev@example.com")
    assert message.subject.startswith("Код подтверждения электронной почты на ")
    assert re.search(r"Ваш код подтверждения: \d{6}\.", message.text)
    assert "Если вы не регистрировались" in message.text
    assert "Ваш код подтверждения:" in message.html
    assert "confirmation code" not in message.text


@pytest.mark.django_db
def test_the_second_factors_speak_russian_on_the_security_page(person):
    browser = Client()
    browser.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})

    page = text(browser.get("/settings/security", HTTP_ACCEPT_LANGUAGE="ru"))

    assert "приложением-аутентификатором" in page
    assert "кодами по SMS" in page


def test_a_security_notice_renders_in_russian():
    with translation.override("ru"):
        headline = str(HEADLINES[Notice.RECOVERY_CODE_USED]) % {"remaining": 9}
        body = render_to_string(
            "emails/security_notice.txt",
            {
                "headline": headline,
                "when": "2026-11-21 09:30 UTC",
                "where": "Firefox 133",
                "ip": "127.0.0.1",
                "advice": "-",
            },
        )

    assert "Осталось кодов: 9." in body
    assert "Когда: 2026-11-21 09:30 UTC" in body
    assert "Устройство: Firefox 133" in body
    assert "IP-адрес: 127.0.0.1" in body


@pytest.fixture
def russian_browser(person: Any) -> Client:
    browser = Client(HTTP_ACCEPT_LANGUAGE="ru")
    signed_in = browser.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})
    assert signed_in.status_code == 302
    return browser


def test_a_service_refusing_a_field_is_told_in_russian(russian_browser, person):
    """The services' own field messages (a phone they cannot read, a wrong current password, a
    phone that two-factor sign-in still needs) reach a Russian page, or a Russian client of the
    API, in Russian."""
    unreadable = russian_browser.post(
        "/welcome", {"first_name": "Ada", "last_name": "Lovelace", "phone": "12"}
    )
    wrong = russian_browser.post(
        "/settings/password",
        {
            "current_password": "not-" + DEFAULT_PASSWORD,
            "new_password": PASSWORD,
            "confirm_password": PASSWORD,
        },
    )
    User.objects.filter(pk=person.pk).update(two_factor_enabled=True, code_factor="SMS")
    api = ApiClient(device_id="ru-1")
    api.tokens = api.call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    ).json()
    api.tokens = api.call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": api.tokens["requestId"], "token": last_code(person.phone)},
    ).json()
    needed = api.call("patch", "/api/users/me", {"phone": ""}, HTTP_ACCEPT_LANGUAGE="ru")

    assert "Введите номер телефона в международном формате" in text(unreadable)
    assert "Текущий пароль неверен." in text(wrong)
    assert needed.json()["errors"]["phone"] == [
        "На этот номер приходят коды двухфакторного входа: сначала отключите его."  # noqa: RUF001
    ]
