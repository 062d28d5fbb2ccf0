"""Registration: an e-mail address and a password, then the e-mailed code confirms the address and
signs the new cabinet user in (docs/sessions.md, "Confirmation codes").
"""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent, OutboxMessage, User
from tests.accounts.api import PASSWORD, outcome, register
from tests.accounts.confirmations import start_registration
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_registration_answers_200_with_the_challenge_and_emails_a_code():
    response = register("ada@example.com")

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "requestId": body["requestId"],
        "confirmMethod": "EMAIL",
        "retryAfterSeconds": 60,
    }
    user = User.objects.get(email="ada@example.com")
    assert (user.kind, user.email_confirmed, user.is_active) == ("USER", False, True)
    assert user.check_password(PASSWORD)
    assert OutboxMessage.objects.get(to="ada@example.com").template == "registration_code"


@pytest.mark.parametrize(
    ("stored", "typed"),
    [
        ("owner@example.com", "owner@example.com"),
        ("owner@example.com", "OWNER@EXAMPLE.COM"),
        ("owner@example.com", "Owner@Example.com"),
        ("Kev1@Example.org", "kev1@example.org"),
        ("Kev1@Example.org", "KEV1@EXAMPLE.ORG"),
    ],
)
def test_registering_a_taken_email_in_any_case_is_409_email_taken(stored, typed):
    UserFactory.create(email=stored)

    response = register(typed)

    assert response.status_code == 409
    assert response.json() == {
        "type": "about:blank",
        "title": "Conflict",
        "status": 409,
        "detail": "An account with this e-mail address already exists: "
        "sign in or reset the password.",
        "code": "EMAIL_TAKEN",
    }
    assert User.objects.filter(email__iexact=stored).count() == 1
    assert OutboxMessage.objects.count() == 0


def test_registration_with_a_confirm_password_mismatch_is_400_on_confirm_password():
    response = register("ada@example.com", PASSWORD, PASSWORD + "!")

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["confirmPassword"]
    assert not User.objects.filter(email="ada@example.com").exists()


@pytest.mark.parametrize(
    "password",
    ["Sh0rt!", "password", "qwerty123", "12345678901234", "ada.lovelace@example.com"],
    ids=["too-short", "common", "common-with-digits", "only-digits", "like-the-email"],
)
def test_registration_with_a_weak_or_common_password_is_400_on_password(password):
    response = register("ada.lovelace@example.com", password)

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["password"]
    assert response.json()["errors"]["password"]
    assert not User.objects.exists()


def test_registration_accepts_a_64_character_password():
    password = "x7-" * 21 + "z"
    assert len(password) == 64

    assert register("ada@example.com", password).status_code == 200


@pytest.mark.parametrize(
    "extra",
    [{"isStaff": True}, {"email_confirmed": True}, {"kind": "ADAPTER"}],
    ids=["isStaff", "email_confirmed", "kind"],
)
def test_registration_with_an_unknown_field_is_400_unknown_field(extra):
    response = register("ada@example.com", **extra)

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    assert list(response.json()["errors"]) == list(extra)
    assert not User.objects.exists()


def test_the_registration_code_confirms_the_email_and_signs_in():
    pending = start_registration("a")

    response = pending.confirm(pending.code())

    assert response.status_code == 200
    assert response.json()["userDto"]["emailConfirmed"] is True
    assert response.json()["userDto"]["profileIncompleted"] is True
    user = User.objects.get(email="new-a@example.com")
    assert user.email_confirmed
    assert AuditEvent.objects.filter(user=user, kind="EMAIL_CONFIRMED").count() == 1
