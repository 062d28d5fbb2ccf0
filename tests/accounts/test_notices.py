"""Security notices (docs/users-api.md, section 16): what reaches the person's mailbox, through the
outbox and its Celery task (run eagerly here, into Django's locmem mailbox), when something
happens to their account; and what reaches nobody. (The stack tests' SMTP sink receives them from
real workers: tests/stack/test_code_delivery.py.)"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.test import Client

from accounts.models import User
from tests.accounts.api import NEW_PASSWORD, T0, change_password, outcome, signed_in
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

# Committed for real: each request's on-commit task sends its e-mails (Celery runs eagerly here).
pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = "grace@example.com"


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL, phone="+4915123456789")


@pytest.fixture
def delivered() -> list[Any]:
    """Django's locmem mailbox, which the outbox's tasks send into."""
    mail.outbox.clear()
    return mail.outbox


def sent_to(address: str) -> list[Any]:
    return [message for message in mail.outbox if address in message.to]


def subjects(address: str = EMAIL) -> list[str]:
    return [message.subject for message in sent_to(address)]


def sign_in(device: str, user_agent: str = "", **headers: Any) -> Any:
    return ApiClient(device_id=device).call(
        "post",
        "/api/auth/login/email",
        {"email": EMAIL, "password": DEFAULT_PASSWORD},
        HTTP_USER_AGENT=user_agent,
        **headers,
    )


@time_machine.travel(T0, tick=False)
def test_a_sign_in_from_a_new_device_is_told_with_when_from_where_and_what_to_do(grace, delivered):
    assert sign_in("laptop").status_code == 200  # the account's first sign-in: no news
    assert sign_in("laptop").status_code == 200  # the same device again
    assert subjects() == []

    firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"
    assert sign_in("phone", user_agent=firefox).status_code == 200

    [notice] = sent_to(EMAIL)
    assert notice.subject == "New sign-in to your account"
    assert "has not been used with it in the last 30 days" in notice.body
    assert "When: 2026-11-21 09:00 UTC" in notice.body
    assert "Device: Firefox 133 · Linux (phone)" in notice.body
    assert "IP address: 127.0.0.1" in notice.body
    assert "If this was not you, reset your password at once" in notice.body
    html = notice.alternatives[0][0]
    assert "Firefox 133 · Linux (phone)" in html


def test_a_device_unused_for_thirty_days_is_new_again(grace, delivered):
    with time_machine.travel(T0, tick=False) as clock:
        sign_in("laptop")
        sign_in("phone")
        mail.outbox.clear()
        clock.shift(timedelta(days=29))
        sign_in("laptop")
        assert subjects() == []
        clock.shift(timedelta(days=31))
        sign_in("phone")

    assert subjects() == ["New sign-in to your account"]


def test_adapters_sign_ins_tell_nobody(owner, delivered):
    adapter = AdapterFactory.create(username="erp", owner=owner)
    for device in ("consumer-1", "consumer-2", "consumer-3"):
        assert ApiClient(device_id=device).sign_in(adapter.username).status_code == 200

    assert mail.outbox == []


def test_a_password_change_and_a_reset_are_told(grace, delivered):
    client = signed_in(EMAIL, device="laptop")
    assert change_password(client, DEFAULT_PASSWORD).status_code == 200
    reset = ApiClient().call("post", "/api/auth/reset-password", {"email": EMAIL}).json()
    code = re.search(r"\b(\d{6})\b", sent_to(EMAIL)[-1].body)
    assert code is not None
    confirmed = ApiClient().call(
        "post",
        "/api/auth/reset-password/confirm",
        {
            "requestId": reset["requestId"],
            "token": code.group(1),
            "newPassword": DEFAULT_PASSWORD + "-again",
            "confirmPassword": DEFAULT_PASSWORD + "-again",
        },
    )
    assert confirmed.status_code == 200

    assert [s for s in subjects() if "password" in s.lower()] == [
        "Your password was changed",
        "Your Exchange platform password reset code",
        "Your password was reset",
    ]


def test_the_lock_is_told_to_the_owner_with_its_end(grace, delivered):
    with time_machine.travel(T0, tick=False):
        for _ in range(5):
            ApiClient().call("post", "/api/auth/login/email", {"email": EMAIL, "password": "x"})

    [notice] = sent_to(EMAIL)
    assert notice.subject == "Your account is locked"
    assert "locked until 2026-11-21 09:15 UTC" in notice.body
    assert "someone may know your password" in notice.body


def test_an_unknown_addresss_lock_is_written_for_nobody_and_sent_to_nobody(db, delivered):
    for _ in range(5):
        ApiClient().call(
            "post", "/api/auth/login/email", {"email": "ghost@example.com", "password": "x"}
        )

    assert mail.outbox == []


def test_an_adapters_new_password_is_told_to_its_owner(owner, delivered):
    adapter = AdapterFactory.create(username="erp", owner=owner)
    cabinet = signed_in(owner.email)

    rotated = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password")

    assert rotated.status_code == 200
    [notice] = sent_to(owner.email)
    assert notice.subject == "An adapter got a new password"
    assert "Your adapter erp got a new password." in notice.body


def test_turning_two_factor_off_is_told(grace, delivered):
    client = signed_in(EMAIL, device="laptop")
    User.objects.filter(pk=grace.pk).update(two_factor_enabled=True, code_factor="SMS")

    assert client.call("delete", "/api/users/two-factor-authentication").status_code == 200

    assert subjects() == ["Two-factor sign-in was turned off"]


def test_a_russian_registration_keeps_russian_for_the_notices(db, delivered):
    password = "a-long-and-unusual-passphrase"
    registered = ApiClient().call(
        "post",
        "/api/auth/register",
        {"email": "lev@example.com", "password": password, "confirmPassword": password},
        HTTP_ACCEPT_LANGUAGE="ru",
    )
    assert registered.status_code == 200
    lev = User.objects.get(email="lev@example.com")
    assert lev.language == "ru"
    User.objects.filter(pk=lev.pk).update(email_confirmed=True)
    signed_in("lev@example.com", password, device="laptop")

    # An English request, a Russian notice: the account's language is what counts.
    assert sign_in_as("lev@example.com", password, "phone").status_code == 200

    notice = sent_to("lev@example.com")[-1]
    assert notice.subject == "Новый вход в вашу учётную запись"
    assert re.search(r"^Когда: \d{4}-\d\d-\d\d \d\d:\d\d UTC$", notice.body, re.M)


def sign_in_as(email: str, password: str, device: str) -> Any:
    return ApiClient(device_id=device).call(
        "post",
        "/api/auth/login/email",
        {"email": email, "password": password},
        HTTP_ACCEPT_LANGUAGE="en",
    )


def test_the_cabinets_language_switch_is_kept_on_the_account(grace):
    browser = Client()
    browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})

    switched = browser.post("/i18n/setlang/", {"language": "ru", "next": "/bus"})

    assert switched.status_code == 302
    grace.refresh_from_db()
    assert grace.language == "ru"


def test_the_language_switch_of_nobody_signed_in_changes_no_account(grace):
    switched = Client().post("/i18n/setlang/", {"language": "ru", "next": "/login"})

    assert switched.status_code == 302
    grace.refresh_from_db()
    assert grace.language == ""


def test_a_new_password_needs_no_notice_for_a_wrong_current_one(grace, delivered):
    client = signed_in(EMAIL, device="laptop")

    refused = change_password(client, "not-the-password", NEW_PASSWORD)

    assert outcome(refused) == (400, "VALIDATION_FAILED")
    assert subjects() == []
