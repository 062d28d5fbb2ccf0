"""A passkey as a second factor, through the API, with a software authenticator
(tests/authenticator.py): it turns two-factor sign-in on and off, answers the second step of a
password sign-in, sits beside an SMS code that the sign-in switches to and from, and is the
factor asked first when the person chooses it (docs/users-api.md, "Passkeys")."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import AuditEvent, Challenge, OutboxMessage, Passkey, SignInGate, User
from accounts.services.two_factor import two_factor_reset
from tests.accounts.api import PHONE, SIGNED_IN_FIELDS, outcome, signed_in
from tests.authenticator import SoftAuthenticator
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"
PASSKEYS = "/api/users/passkeys"
CONFIRM = "/api/auth/login/two-factor/confirm"
RESEND = "/api/auth/login/two-factor/resend"


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = ["http://localhost:8000"]


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL, phone=PHONE)


def passkey_added(client: ApiClient, authenticator: SoftAuthenticator) -> dict[str, Any]:
    started = client.call("post", f"{PASSKEYS}/registration/options").json()
    credential = authenticator.create(started["options"])
    created = client.call(
        "post", PASSKEYS, {"requestId": started["requestId"], "credential": credential}
    )
    assert created.status_code == 201, created.json()
    return dict(created.json())


def sms_on(client: ApiClient) -> None:
    started = client.call("patch", "/api/users/two-factor-authentication").json()
    confirmed = client.call(
        "post",
        "/api/users/two-factor-authentication/confirm",
        {"requestId": started["requestId"], "token": last_code(PHONE)},
    )
    assert confirmed.status_code == 200, confirmed.json()


def password_step(device: str = "laptop") -> dict[str, Any]:
    response = ApiClient(device_id=device).call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert outcome(response) == (428, "TWO_FACTOR_REQUIRED"), response.json()
    return dict(response.json())


def confirmed_by(
    asked: dict[str, Any], authenticator: SoftAuthenticator, *, request_id: str = ""
) -> Any:
    credential = authenticator.get(asked["options"])
    return ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": request_id or asked["requestId"], "credential": credential}
    )


def switched(request_id: str, method: str) -> Any:
    return ApiClient(device_id="laptop").call(
        "post", RESEND, {"requestId": request_id, "method": method}
    )


def me(client: ApiClient) -> dict[str, Any]:
    return dict(client.call("get", "/api/users/me").json())


def notices() -> list[str]:
    """The subjects of the security notices e-mailed to Grace, oldest first."""
    return list(
        OutboxMessage.objects.filter(to=EMAIL, template__startswith="notice_")
        .order_by("pk")
        .values_list("subject", flat=True)
    )


def test_a_first_passkey_turns_two_factor_on_and_removing_the_last_turns_it_off(grace):
    client = signed_in(EMAIL)
    authenticator = SoftAuthenticator()

    first = passkey_added(client, authenticator)
    second = passkey_added(client, SoftAuthenticator())

    dto = me(client)
    assert (dto["twoFactorEnabled"], dto["twoFactorMethod"]) == (True, "PASSKEY")
    assert notices() == [
        "Two-factor sign-in was turned on",
        "A second factor was added",
    ]
    client.call("delete", f"{PASSKEYS}/{first['passkeyId']}")
    assert me(client)["twoFactorEnabled"] is True
    client.call("delete", f"{PASSKEYS}/{second['passkeyId']}")
    dto = me(client)
    assert (dto["twoFactorEnabled"], dto["twoFactorMethod"]) == (False, None)
    assert notices()[-1] == "Two-factor sign-in was turned off"
    # A password alone signs in again.
    response = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200, response.json()


def test_a_password_sign_in_asks_for_the_passkey_and_its_answer_signs_in(grace):
    authenticator = SoftAuthenticator()
    passkey = passkey_added(signed_in(EMAIL), authenticator)

    asked = password_step()

    assert (asked["confirmMethod"], asked["otherMethods"]) == ("PASSKEY", [])
    assert "retryAfterSeconds" not in asked
    options = asked["options"]
    assert options["rpId"] == "localhost"
    assert options["userVerification"] == "preferred"
    assert [c["id"] for c in options["allowCredentials"]] == [authenticator.get(options)["id"]]
    done = confirmed_by(asked, authenticator)
    assert done.status_code == 200, done.json()
    assert list(done.json()) == SIGNED_IN_FIELDS
    assert done.json()["userDto"]["twoFactorMethod"] == "PASSKEY"
    assert Passkey.objects.get(pk=passkey["passkeyId"]).last_used_at is not None
    # The challenge is used: the same answer cannot sign in again.
    assert outcome(confirmed_by(asked, authenticator)) == (400, "PASSKEY_INVALID")


def test_the_second_step_needs_no_user_verification(grace):
    authenticator = SoftAuthenticator()
    passkey_added(signed_in(EMAIL), authenticator)
    asked = password_step()

    credential = authenticator.get(asked["options"], verified=False)
    done = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], "credential": credential}
    )

    assert done.status_code == 200, done.json()


def test_a_sign_in_switches_between_sms_and_passkey_keeping_its_request_id(grace):
    client = signed_in(EMAIL)
    sms_on(client)
    authenticator = SoftAuthenticator()
    passkey_added(client, authenticator)
    assert me(client)["twoFactorMethod"] == "SMS"  # the factor chosen first stays
    asked = password_step()
    assert (asked["confirmMethod"], asked["otherMethods"]) == ("SMS", ["PASSKEY"])
    sms_code = last_code(PHONE)
    sent = OutboxMessage.objects.filter(to=PHONE).count()

    to_passkey = switched(asked["requestId"], "PASSKEY")
    back_to_sms = switched(asked["requestId"], "SMS")

    assert to_passkey.status_code == 200, to_passkey.json()
    answer = to_passkey.json()
    assert answer["requestId"] == asked["requestId"]
    assert (answer["confirmMethod"], answer["retryAfterSeconds"]) == ("PASSKEY", None)
    assert answer["otherMethods"] == ["SMS"]
    assert answer["options"]["allowCredentials"]
    # Back to SMS within the cooldown: the code already sent stays good, no other is sent.
    assert back_to_sms.status_code == 200, back_to_sms.json()
    assert back_to_sms.json()["confirmMethod"] == "SMS"
    assert 0 < back_to_sms.json()["retryAfterSeconds"] <= 60
    assert "options" not in back_to_sms.json()
    assert OutboxMessage.objects.filter(to=PHONE).count() == sent
    done = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], "token": sms_code}
    )
    assert done.status_code == 200, done.json()


def test_a_switched_sign_in_is_confirmed_by_the_passkey_and_not_by_the_sms_code(grace):
    client = signed_in(EMAIL)
    sms_on(client)
    authenticator = SoftAuthenticator()
    passkey_added(client, authenticator)
    asked = password_step()
    sms_code = last_code(PHONE)

    answer = switched(asked["requestId"], "PASSKEY").json()
    by_code = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], "token": sms_code}
    )
    by_passkey = confirmed_by(answer, authenticator)

    assert outcome(by_code) == (400, "CODE_INVALID")
    assert by_passkey.status_code == 200, by_passkey.json()


def test_switching_to_sms_after_the_cooldown_sends_a_new_code(grace, settings):
    settings.ACCOUNTS_CODE_RESEND_SECONDS = 0
    client = signed_in(EMAIL)
    sms_on(client)
    passkey_added(client, SoftAuthenticator())
    client.call("patch", "/api/users/me", {"twoFactorMethod": "PASSKEY"})
    asked = password_step()
    sent = OutboxMessage.objects.filter(to=PHONE).count()

    answer = switched(asked["requestId"], "SMS")

    assert answer.status_code == 200, answer.json()
    assert OutboxMessage.objects.filter(to=PHONE).count() == sent + 1
    done = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], "token": last_code(PHONE)}
    )
    assert done.status_code == 200, done.json()


def test_the_person_chooses_the_factor_asked_first_among_those_held(grace):
    client = signed_in(EMAIL)
    sms_on(client)
    passkey_added(client, SoftAuthenticator())

    chosen = client.call("patch", "/api/users/me", {"twoFactorMethod": "PASSKEY"})
    refused = client.call("patch", "/api/users/me", {"twoFactorMethod": "TOTP"})

    assert chosen.status_code == 200, chosen.json()
    assert chosen.json()["twoFactorMethod"] == "PASSKEY"
    assert outcome(refused) == (400, "VALIDATION_FAILED")
    assert "twoFactorMethod" in refused.json()["errors"]
    asked = password_step()
    assert (asked["confirmMethod"], asked["otherMethods"]) == ("PASSKEY", ["SMS"])
    assert "options" in asked


def test_switching_to_a_factor_not_held_is_refused(grace):
    passkey_added(signed_in(EMAIL), SoftAuthenticator())
    asked = password_step()

    response = switched(asked["requestId"], "SMS")

    assert outcome(response) == (400, "VALIDATION_FAILED")
    assert "method" in response.json()["errors"]
    assert Challenge.objects.get(pk=asked["requestId"]).method == "PASSKEY"


def test_turning_the_code_factor_off_keeps_the_passkey_and_two_factor_on(grace):
    client = signed_in(EMAIL)
    sms_on(client)
    passkey_added(client, SoftAuthenticator())

    response = client.call("delete", "/api/users/two-factor-authentication")

    assert response.json() == {"twoFactorEnabled": True}
    dto = me(client)
    assert (dto["twoFactorEnabled"], dto["twoFactorMethod"]) == (True, "PASSKEY")
    assert dto["recoveryCodesRemaining"] == 10  # a factor is left: so are its recovery codes
    assert notices()[-1] == "A second factor was removed"
    assert password_step()["confirmMethod"] == "PASSKEY"


def test_a_recovery_code_completes_a_passkey_step(grace):
    client = signed_in(EMAIL)
    passkey_added(client, SoftAuthenticator())
    codes = client.call("post", "/api/users/two-factor-authentication/recovery-codes").json()
    asked = password_step()

    done = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], "token": codes["recoveryCodes"][0]}
    )

    assert done.status_code == 200, done.json()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="neither"),
        pytest.param({"token": "123456", "credential": {"id": "x"}}, id="both"),
    ],
)
def test_a_confirmation_takes_a_code_or_a_credential(grace, body):
    passkey_added(signed_in(EMAIL), SoftAuthenticator())
    asked = password_step()

    response = ApiClient(device_id="laptop").call(
        "post", CONFIRM, {"requestId": asked["requestId"], **body}
    )

    assert outcome(response) == (400, "VALIDATION_FAILED")


def test_another_persons_passkey_a_clone_and_a_code_step_are_refused(grace):
    authenticator = SoftAuthenticator()
    passkey_added(signed_in(EMAIL), authenticator)
    stranger = UserFactory.create(email="mallory@example.com")
    strangers = SoftAuthenticator()
    passkey_added(signed_in(stranger.email), strangers)
    copy = authenticator.clone()
    assert confirmed_by(password_step(), authenticator).status_code == 200

    not_hers = confirmed_by(password_step(), strangers)
    cloned = confirmed_by(password_step(), copy)
    sms_step = UserFactory.create(
        email="sms@example.com", phone="+4915123456780", two_factor_enabled=True, code_factor="SMS"
    )
    code_asked = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": sms_step.email, "password": DEFAULT_PASSWORD}
    )
    not_a_passkey_step = confirmed_by(
        {**password_step(), "requestId": code_asked.json()["requestId"]}, authenticator
    )

    assert outcome(not_hers) == (400, "PASSKEY_INVALID")
    assert outcome(cloned) == (400, "PASSKEY_INVALID")
    assert outcome(not_a_passkey_step) == (400, "PASSKEY_INVALID")
    assert AuditEvent.objects.filter(kind="PASSKEY_CLONED", user=grace).count() == 1


def test_wrong_answers_spend_the_sign_in_and_lock_nothing(grace):
    authenticator = SoftAuthenticator()
    passkey_added(signed_in(EMAIL), authenticator)
    forger = SoftAuthenticator()
    forger.credential_id = authenticator.credential_id  # the right id, another key
    asked = password_step()

    answers = [confirmed_by(asked, forger) for _ in range(6)]

    assert [outcome(answer) for answer in answers] == [(400, "PASSKEY_INVALID")] * 6
    assert Challenge.objects.get(pk=asked["requestId"]).attempts_left == 0
    # The five attempts are spent, even by the right passkey; the account is not locked.
    assert outcome(confirmed_by(asked, authenticator)) == (400, "PASSKEY_INVALID")
    assert not SignInGate.objects.filter(locked_until__isnull=False).exists()
    assert confirmed_by(password_step(), authenticator).status_code == 200


def test_an_administrators_reset_removes_passkeys_too(grace):
    client = signed_in(EMAIL)
    sms_on(client)
    passkey_added(client, SoftAuthenticator())

    two_factor_reset(user=grace, actor=None)

    grace.refresh_from_db()
    assert (grace.two_factor_enabled, grace.code_factor) == (False, "")
    assert not Passkey.objects.filter(user=grace).exists()
    response = ApiClient(device_id="laptop").call(
        "post", "/api/auth/login/email", {"email": EMAIL, "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200


def test_enabling_sms_beside_a_passkey_is_allowed_and_keeps_the_choice(grace):
    client = signed_in(EMAIL)
    passkey_added(client, SoftAuthenticator())

    sms_on(client)

    dto = me(client)
    assert (dto["twoFactorMethod"], dto["recoveryCodesRemaining"]) == ("PASSKEY", 10)
    assert notices()[-1] == "A second factor was added"
    assert password_step()["otherMethods"] == ["SMS"]
