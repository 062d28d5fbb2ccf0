"""Changing the account's e-mail address through the API (docs/users-api.md, "Changing the e-mail
address"), as its owner and as an attacker who would learn from it whether an address has an
account."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import AuditEvent, OutboxMessage, User
from tests.accounts.api import outcome, signed_in
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
NEW = "grace.hopper@example.org"
CHANGE = "/api/users/me/email"


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace@example.com", email=EMAIL)


def started(client: ApiClient, new_email: str = NEW, **proof: Any) -> Any:
    return client.call("post", CHANGE, {"newEmail": new_email, **proof})


def test_the_code_to_the_new_address_makes_it_the_accounts(grace):
    client = signed_in(EMAIL)
    other_device = signed_in(EMAIL, device="phone")

    response = started(client, password=DEFAULT_PASSWORD)
    confirmed = client.call(
        "post",
        f"{CHANGE}/confirm",
        {"requestId": response.json()["requestId"], "token": last_code(NEW)},
    )

    assert response.status_code == 200, response.json()
    assert set(response.json()) == {"requestId", "confirmMethod", "retryAfterSeconds"}
    assert response.json()["confirmMethod"] == "EMAIL"
    assert confirmed.status_code == 200, confirmed.json()
    assert confirmed.json()["email"] == NEW
    grace.refresh_from_db()
    assert (grace.email, grace.email_canonical, grace.username) == (NEW, NEW, NEW)
    # This session stays, every other one ends.
    assert client.call("get", "/api/users/me").status_code == 200
    assert outcome(other_device.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    # The old address is told; sign-in goes by the new one.
    told = OutboxMessage.objects.filter(to=EMAIL, template="notice_email_changed").get()
    assert NEW in told.text
    assert signed_in(NEW, device="laptop").tokens["userDto"]["email"] == NEW
    assert AuditEvent.objects.filter(kind="EMAIL_CHANGED", user=grace).count() == 1


def test_a_wrong_password_is_401_and_nothing_is_sent(grace):
    client = signed_in(EMAIL)

    response = started(client, password="not-the-password")

    assert outcome(response) == (401, "BAD_CREDENTIALS")
    assert not OutboxMessage.objects.filter(to=NEW).exists()


def test_a_taken_address_is_409(grace):
    UserFactory.create(email=NEW)

    response = started(signed_in(EMAIL))

    assert outcome(response) == (409, "EMAIL_TAKEN")


def test_with_enumeration_prevented_a_taken_address_answers_like_a_free_one(grace, settings):
    settings.ACCOUNTS_PREVENT_ENUMERATION = True
    owner = UserFactory.create(email=NEW)
    client = signed_in(EMAIL)

    taken = started(client)
    free = started(client, "free@example.org")
    resent = client.call("post", f"{CHANGE}/resend", {"requestId": taken.json()["requestId"]})
    guessed = client.call(
        "post", f"{CHANGE}/confirm", {"requestId": taken.json()["requestId"], "token": "123456"}
    )

    assert taken.status_code == free.status_code == 200
    assert set(taken.json()) == set(free.json())
    # The cooldown answers alike too: neither has a code to send again yet.
    assert outcome(resent) == (429, "RESEND_TOO_EARLY")
    assert outcome(guessed) == (400, "CODE_INVALID")
    # The taken address's owner is told (no code goes there); the account keeps its address.
    to_owner = OutboxMessage.objects.filter(to=NEW).order_by("pk").values_list("template", "user")
    assert list(to_owner) == [("email_change_taken", owner.pk), ("email_change_code", None)]
    assert User.objects.get(pk=owner.pk).email == NEW
    assert User.objects.get(username="grace@example.com").email == EMAIL


@pytest.mark.parametrize(
    ("new_email", "field"),
    [
        pytest.param(EMAIL, "newEmail", id="the-same"),
        pytest.param("GRACE@Example.com", "newEmail", id="the-same-in-another-case"),
        pytest.param("\u212aev@example.org", "newEmail", id="a-lookalike"),
        pytest.param("not-an-address", "newEmail", id="not-an-address"),
    ],
)
def test_an_address_that_cannot_be_the_new_one_is_400(grace, new_email, field):
    response = started(signed_in(EMAIL), new_email)

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert field in response.json()["errors"]


def test_another_persons_change_cannot_be_confirmed(grace):
    mallory = UserFactory.create(email="mallory@example.com")
    theirs = started(signed_in(mallory.email), "mallory@example.org")

    response = signed_in(EMAIL).call(
        "post",
        f"{CHANGE}/confirm",
        {"requestId": theirs.json()["requestId"], "token": last_code("mallory@example.org")},
    )

    assert outcome(response) == (400, "CODE_INVALID")
    assert User.objects.get(pk=grace.pk).email == EMAIL
    assert User.objects.get(pk=mallory.pk).email == "mallory@example.com"


def test_an_address_taken_before_the_code_is_confirmed_is_409(grace):
    client = signed_in(EMAIL)
    response = started(client)
    UserFactory.create(email=NEW)

    confirmed = client.call(
        "post",
        f"{CHANGE}/confirm",
        {"requestId": response.json()["requestId"], "token": last_code(NEW)},
    )

    assert outcome(confirmed) == (409, "EMAIL_TAKEN")
    assert User.objects.get(pk=grace.pk).email == EMAIL
