"""The cabinet's passkey pages with Django's test client and a software authenticator
(tests/authenticator.py): adding and removing one on the Security page, signing in with one, and
what each refusal says. Chromium's own ceremony is tests/browser/test_passkeys.py's."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.test import Client

from accounts.device_tokens import DEVICE_TOKEN_COOKIE
from accounts.models import Passkey, User
from tests.authenticator import SoftAuthenticator
from tests.cabinet.passkeys import ORIGIN, added, text
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NOT_ADDED = (
    "The passkey was not added: the browser&#x27;s answer did not verify, or it came too late. "
    "Try again."
)
NOT_SIGNED_IN = (
    "This passkey did not sign you in: it is not known here (it may have been removed), your "
    "device did not confirm it was you, or the request took too long. Try again, or sign in "
    "with your password."
)


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


def passkey_sign_in(authenticator: SoftAuthenticator, **answer: Any) -> Any:
    client = Client()
    started = client.post("/login/passkey/options").json()
    credential = authenticator.get(started["options"], **answer)
    return client.post(
        "/login/passkey",
        {"requestId": started["requestId"], "credential": json.dumps(credential)},
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/settings/passkeys/options"),
        ("post", "/settings/passkeys"),
        ("get", f"/settings/passkeys/{uuid.uuid4()}/remove"),
        ("post", f"/settings/passkeys/{uuid.uuid4()}/remove"),
    ],
)
def test_the_passkey_pages_of_the_security_page_send_a_stranger_to_sign_in(client, method, path):
    response = getattr(client, method)(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/login?next=")


def test_the_options_are_fetched_with_the_pages_csrf_token_only(person):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None

    without = client.post("/login/passkey/options")
    with_token = client.post("/login/passkey/options", headers={"X-CSRFToken": token.group(1)})

    assert without.status_code == 403
    assert with_token.status_code == 200
    assert with_token.json()["options"]["userVerification"] == "required"
    assert client.get("/login/passkey/options").status_code == 405


def test_a_passkey_is_added_listed_and_removed_after_asking(browser, person):
    page = added(browser, SoftAuthenticator(), "Work laptop")

    assert page.redirect_chain == [("/settings/security#passkeys", 302)]
    assert "The passkey “Work laptop” is added: you can sign in with it." in text(page)
    assert '<strong class="passkey-name">Work laptop</strong>' in text(page)
    assert "last used never" in text(page)
    passkey = Passkey.objects.get(user=person)
    asked = browser.get(f"/settings/passkeys/{passkey.pk}/remove")
    assert "Remove the passkey Work laptop?" in text(asked)
    removed = browser.post(f"/settings/passkeys/{passkey.pk}/remove", follow=True)
    assert "The passkey “Work laptop” is removed: it no longer signs you in." in text(removed)
    assert "No passkeys yet." in text(removed)
    assert not Passkey.objects.exists()


@pytest.mark.parametrize(
    "answer",
    [
        {"requestId": "", "credential": "{}"},
        {"credential": "not json"},
        {"credential": "[]"},
        {"credential": json.dumps({"id": "x", "rawId": "x", "response": {}})},
    ],
)
def test_an_answer_that_does_not_verify_adds_nothing_and_says_so(browser, answer):
    started = browser.post("/settings/passkeys/options").json()
    body = {"requestId": started["requestId"], "name": "Laptop", **answer}

    page = browser.post("/settings/passkeys", body, follow=True)

    assert page.redirect_chain == [("/settings/security#passkeys", 302)]
    assert NOT_ADDED in text(page)
    assert not Passkey.objects.exists()


def test_another_persons_passkey_is_not_found_and_stays(browser):
    other = UserFactory.create(username="ada", email="ada@example.com")
    theirs = Passkey.objects.create(
        user=other, credential_id=b"theirs", public_key=b"key", name="Ada's phone"
    )

    asked = browser.get(f"/settings/passkeys/{theirs.pk}/remove")
    removed = browser.post(f"/settings/passkeys/{theirs.pk}/remove")

    assert (asked.status_code, removed.status_code) == (404, 404)
    assert Passkey.objects.filter(pk=theirs.pk).exists()


def test_a_passkey_signs_in_as_the_password_does(browser, person):
    authenticator = SoftAuthenticator()
    added(browser, authenticator)

    response = passkey_sign_in(authenticator)

    assert response.status_code == 302
    assert response["Location"] == "/bus"
    assert response.cookies[DEVICE_TOKEN_COOKIE]["httponly"]
    assert Passkey.objects.get(user=person).last_used_at is not None


def test_a_passkey_sign_in_goes_where_the_sign_in_was_asked_for(browser):
    authenticator = SoftAuthenticator()
    added(browser, authenticator)
    client = Client()
    started = client.post("/login/passkey/options").json()
    credential = authenticator.get(started["options"])

    response = client.post(
        "/login/passkey?next=/settings/security",
        {"requestId": started["requestId"], "credential": json.dumps(credential)},
    )

    assert response["Location"] == "/settings/security"


def test_a_passkey_the_device_did_not_verify_or_that_was_removed_does_not_sign_in(browser):
    authenticator = SoftAuthenticator()
    added(browser, authenticator)

    unverified = passkey_sign_in(authenticator, verified=False)
    Passkey.objects.all().delete()
    removed = passkey_sign_in(authenticator)

    for page in (unverified, removed):
        assert page.status_code == 200
        assert '<div class="form-errors" role="alert" id="passkey-errors">' in text(page)
        assert NOT_SIGNED_IN.replace("'", "&#x27;") in text(page)
        assert 'name="password"' in text(page)  # the password form is there too


def test_a_garbled_answer_to_the_sign_in_says_the_same_sentence(client):
    page = client.post("/login/passkey", {"requestId": "nope", "credential": "{"})

    assert page.status_code == 200
    assert NOT_SIGNED_IN in text(page)


def test_the_steps_after_a_passkey_say_what_the_password_path_says(browser, person):
    authenticator = SoftAuthenticator()
    added(browser, authenticator)

    User.objects.filter(pk=person.pk).update(is_active=False)
    disabled = passkey_sign_in(authenticator)
    User.objects.filter(pk=person.pk).update(is_active=True, email_confirmed=False)
    unconfirmed = passkey_sign_in(authenticator)

    assert "This account is disabled. Contact your administrator." in text(disabled)
    assert unconfirmed.status_code == 302
    assert unconfirmed["Location"].startswith("/register/confirm?requestId=")


def test_the_sign_in_page_offers_a_passkey_and_the_security_page_says_what_it_needs(browser):
    login = Client().get("/login?next=/settings/security")
    security = browser.get("/settings/security")

    assert 'action="/login/passkey?next=/settings/security"' in text(login)
    assert "Sign in with a passkey" in text(login)
    assert "/static/passkeys.js" in text(login)
    assert "Passkeys need a browser that supports them" in text(security)
    assert 'id="passkey-add" hidden' in text(security)


def test_the_scripts_sentences_are_in_the_pages_language(browser):
    browser.post("/i18n/setlang/", {"language": "ru", "next": "/settings/security"})

    security = text(browser.get("/settings/security"))
    login = text(Client(headers={"accept-language": "ru"}).get("/login"))

    assert 'data-cancelled="Ключ доступа не добавлен: действие отменено' in security
    assert "Добавить ключ доступа" in security
    assert 'data-cancelled="Вход не выполнен: ключ доступа отменён' in login
    assert "Войти с ключом доступа" in login  # noqa: RUF001
