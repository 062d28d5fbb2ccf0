"""The profile: the phone number (E.164, a notice e-mailed when it changes), the fields a user may
change, and turning two-factor sign-in on (by an SMS code) and off.
"""

from __future__ import annotations

import re

import pytest

from accounts import sms
from accounts.models import AuditEvent, Challenge, OutboxMessage, User
from tests.accounts.api import outcome, signed_in
from tests.accounts.confirmations import PHONES, start_enabling
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def test_enabling_two_factor_without_a_phone_is_400_phone_required(ada):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/two-factor-authentication")

    assert outcome(response) == (400, "PHONE_REQUIRED")
    assert Challenge.objects.count() == 0


def test_enabling_two_factor_when_it_is_on_is_409():
    pending = start_enabling("a")
    assert pending.succeeded(pending.confirm(pending.code()))

    response = pending.client.call("patch", "/api/users/two-factor-authentication")

    assert outcome(response) == (409, "TWO_FACTOR_ALREADY_ENABLED")


def test_a_confirmed_enabling_turns_two_factor_on_and_is_audited():
    pending = start_enabling("a")

    response = pending.confirm(pending.code())

    assert list(response.json()) == ["twoFactorEnabled", "recoveryCodes"]
    assert response.json()["twoFactorEnabled"] is True
    user = User.objects.get(phone=PHONES["a"])
    assert user.two_factor_enabled
    assert AuditEvent.objects.filter(user=user, kind="TWO_FACTOR_ENABLED").count() == 1
    assert pending.client.call("get", "/api/users/me").json()["twoFactorEnabled"] is True


def test_disabling_two_factor_turns_it_off_and_queues_a_notice(django_capture_on_commit_callbacks):
    user = UserFactory.create(
        email="ada@example.com", phone=PHONES["a"], two_factor_enabled=True, code_factor="SMS"
    )
    client = ApiClient(device_id="browser")
    with django_capture_on_commit_callbacks(execute=True):
        started = client.call(
            "post",
            "/api/auth/login/email",
            {"email": "ada@example.com", "password": DEFAULT_PASSWORD},
        ).json()
    client.tokens = client.call(
        "post",
        "/api/auth/login/two-factor/confirm",
        {"requestId": started["requestId"], "token": re.findall(r"\d{6}", sms.outbox[-1][1])[0]},
    ).json()

    response = client.call("delete", "/api/users/two-factor-authentication")

    assert response.status_code == 200
    assert response.json() == {"twoFactorEnabled": False}
    user.refresh_from_db()
    assert user.two_factor_enabled is False
    assert list(
        OutboxMessage.objects.filter(to="ada@example.com").values_list("template", flat=True)
    ) == ["notice_two_factor_disabled"]
    assert AuditEvent.objects.filter(user=user, kind="TWO_FACTOR_DISABLED").count() == 1
    signed_in("ada@example.com")  # no 428 any more


def test_a_first_phone_completes_the_profile_without_an_email(ada):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": "+49 (151) 2345-6781"})

    assert response.json()["phone"] == PHONES["a"]
    assert not OutboxMessage.objects.filter(to="ada@example.com").exists()
    assert AuditEvent.objects.filter(user=ada, kind="PHONE_CHANGED").count() == 1


def test_changing_the_phone_stores_e164_and_queues_a_phone_changed_email(ada):
    ada.phone = PHONES["b"]
    ada.save()
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": "+49 (151) 2345-6781"})

    assert response.status_code == 200
    assert response.json()["phone"] == PHONES["a"]
    message = OutboxMessage.objects.get(to="ada@example.com")
    assert message.template == "phone_changed"
    assert PHONES["a"] in message.text
    assert AuditEvent.objects.filter(user=ada, kind="PHONE_CHANGED").count() == 1


def test_saving_the_same_phone_again_sends_no_email(ada):
    ada.phone = PHONES["a"]
    ada.save()
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": PHONES["a"], "firstName": "Augusta"})

    assert response.json()["firstName"] == "Augusta"
    assert OutboxMessage.objects.count() == 0


@pytest.mark.parametrize("phone", ["12345", "not a phone", "+49 0000", "+1 555 0100 999 999 9"])
def test_an_invalid_phone_is_400_on_phone(ada, phone):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"phone": phone, "firstName": "Augusta"})

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["phone"]
    ada.refresh_from_db()
    assert (ada.phone, ada.first_name) == ("", "Ada")


@pytest.mark.parametrize(
    "body",
    [{"email": "evil@example.com"}, {"twoFactorEnabled": True}, {"is_staff": True}],
    ids=["email", "twoFactorEnabled", "is_staff"],
)
def test_profile_update_with_an_unknown_field_is_400_unknown_field(ada, body):
    client = signed_in("ada@example.com")

    response = client.call("patch", "/api/users/me", {"firstName": "Augusta", **body})

    assert outcome(response) == (400, "UNKNOWN_FIELD")
    ada.refresh_from_db()
    assert (ada.first_name, ada.email, ada.two_factor_enabled, ada.is_staff) == (
        "Ada",
        "ada@example.com",
        False,
        False,
    )


def test_the_profile_update_completes_the_profile(ada):
    client = signed_in("ada@example.com")
    assert client.tokens["userDto"]["profileIncompleted"] is True

    response = client.call("patch", "/api/users/me", {"phone": PHONES["a"]})

    assert response.json()["profileIncompleted"] is False
