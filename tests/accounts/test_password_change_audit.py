"""A wrong current password when changing the password is audited as what it was, a refused
password change, not as a failed sign-in, and counts toward the lock as a wrong sign-in does
(docs/sessions.md, "The audit log"): through the API and the cabinet's /settings/password."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import AuditEvent, User
from tests.accounts.api import by_email, change_password, outcome, signed_in
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "ada@example.com"


@pytest.fixture
def ada() -> User:
    return UserFactory.create(username="ada", email=EMAIL, phone="+4915123456789")


def kinds(user: User) -> list[str]:
    return list(
        AuditEvent.objects.filter(user=user)
        .exclude(kind="SIGN_IN")
        .order_by("pk")
        .values_list("kind", flat=True)
    )


def test_wrong_current_passwords_through_the_api_are_refused_changes_and_lock_on_the_fifth(ada):
    client = signed_in(EMAIL)

    answers = [outcome(change_password(client, "wrong password")) for _ in range(5)]

    assert answers == [(400, "VALIDATION_FAILED")] * 5
    # The fifth locks the account (LOCKED) and is recorded as refused after it.
    assert kinds(ada) == ["PASSWORD_CHANGE_FAILED"] * 4 + ["LOCKED", "PASSWORD_CHANGE_FAILED"]
    assert outcome(by_email(EMAIL)) == (423, "ACCOUNT_LOCKED")


def test_a_wrong_current_password_in_the_cabinet_is_a_refused_change_on_the_security_page(ada):
    browser = Client()
    browser.post("/login", {"login": EMAIL, "password": DEFAULT_PASSWORD})

    refused = browser.post(
        "/settings/password",
        {
            "current_password": "wrong password",
            "new_password": "a new and long passphrase",
            "confirm_password": "a new and long passphrase",
        },
    )
    security = browser.get("/settings/security").content.decode()

    assert "The current password is wrong." in refused.content.decode()
    assert kinds(ada) == ["PASSWORD_CHANGE_FAILED"]
    assert "Password change refused: wrong current password" in security
    assert "Sign-in failed" not in security
