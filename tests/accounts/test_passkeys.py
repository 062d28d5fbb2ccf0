"""Passkeys through the API, with a software authenticator (tests/authenticator.py): registering,
listing and removing them, and signing in with one alone (docs/users-api.md, "Passkeys")."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import AuditEvent, Passkey, PasskeyChallenge, User
from tests.accounts.api import SIGNED_IN_FIELDS
from tests.authenticator import SoftAuthenticator
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

pytestmark = pytest.mark.django_db

PASSKEYS = "/api/users/passkeys"
OPTIONS = "/api/auth/login/passkey/options"
SIGN_IN = "/api/auth/login/passkey"
ORIGIN = "http://localhost:8000"


@pytest.fixture(autouse=True)
def relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGINS = [ORIGIN]


def registered(cabinet: ApiClient, authenticator: SoftAuthenticator, name: str = "") -> Any:
    started = cabinet.call("post", f"{PASSKEYS}/registration/options").json()
    body = {
        "requestId": started["requestId"],
        "credential": authenticator.create(started["options"]),
    }
    return cabinet.call("post", PASSKEYS, {**body, "name": name} if name else body)


def signed_in(authenticator: SoftAuthenticator, **answer: Any) -> Any:
    client = ApiClient(device_id="laptop-1")
    started = client.call("post", OPTIONS).json()
    credential = authenticator.get(started["options"], **answer)
    return client.call(
        "post", SIGN_IN, {"requestId": started["requestId"], "credential": credential}
    )


def test_registration_options_are_the_webauthn_json_form(cabinet, owner):
    response = cabinet.call("post", f"{PASSKEYS}/registration/options")

    assert response.status_code == 200
    options = response.json()["options"]
    assert options["rp"] == {"id": "localhost", "name": "Exchange platform"}
    assert options["user"]["name"] == owner.email
    assert "=" not in options["challenge"]
    assert len(options["challenge"]) >= 43
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert {"type": "public-key", "alg": -7} in options["pubKeyCredParams"]
    assert options["excludeCredentials"] == []


def test_a_passkey_is_registered_listed_and_removed(cabinet, owner):
    authenticator = SoftAuthenticator()

    created = registered(cabinet, authenticator, "My laptop")

    assert created.status_code == 201, created.content
    passkey = created.json()
    assert passkey["name"] == "My laptop"
    assert passkey["lastUsedAt"] is None
    assert cabinet.call("get", PASSKEYS).json() == {"passkeys": [passkey]}
    again = cabinet.call("post", f"{PASSKEYS}/registration/options").json()["options"]
    assert [c["id"] for c in again["excludeCredentials"]] == [authenticator.create(again)["id"]]
    assert AuditEvent.objects.filter(kind="PASSKEY_ADDED", user=owner).count() == 1
    removed = cabinet.call("delete", f"{PASSKEYS}/{passkey['passkeyId']}")
    gone = cabinet.call("delete", f"{PASSKEYS}/{passkey['passkeyId']}")
    assert (removed.status_code, gone.status_code) == (200, 404)
    assert cabinet.call("get", PASSKEYS).json() == {"passkeys": []}


def test_a_passkey_without_a_name_is_numbered(cabinet):
    first = registered(cabinet, SoftAuthenticator())
    second = registered(cabinet, SoftAuthenticator())

    assert [first.json()["name"], second.json()["name"]] == ["Passkey 1", "Passkey 2"]


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(
            lambda body: {**body, "requestId": "5f0c6a55-0000-4000-8000-000000000000"},
            id="unknown-request",
        ),
        pytest.param(lambda body: {**body, "credential": {}}, id="empty-credential"),
        pytest.param(
            lambda body: {**body, "credential": {**body["credential"], "response": {"x": 1}}},
            id="no-attestation",
        ),
    ],
)
def test_an_attestation_that_does_not_verify_is_passkey_invalid(cabinet, spoil):
    started = cabinet.call("post", f"{PASSKEYS}/registration/options").json()
    body = {
        "requestId": started["requestId"],
        "credential": SoftAuthenticator().create(started["options"]),
    }

    response = cabinet.call("post", PASSKEYS, spoil(body))

    assert response.status_code == 400
    assert response.json()["code"] == "PASSKEY_INVALID"
    assert not Passkey.objects.exists()


def test_an_attestation_from_another_origin_or_for_another_person_is_refused(cabinet, person):
    other = ApiClient(device_id="browser-2")
    other.tokens = other.call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    ).json()
    started = cabinet.call("post", f"{PASSKEYS}/registration/options").json()
    phished = SoftAuthenticator(origin="https://exchange.example.net")

    from_elsewhere = cabinet.call(
        "post",
        PASSKEYS,
        {"requestId": started["requestId"], "credential": phished.create(started["options"])},
    )
    mine = cabinet.call("post", f"{PASSKEYS}/registration/options").json()
    by_another = other.call(
        "post",
        PASSKEYS,
        {"requestId": mine["requestId"], "credential": SoftAuthenticator().create(mine["options"])},
    )

    assert from_elsewhere.json()["code"] == by_another.json()["code"] == "PASSKEY_INVALID"
    assert not Passkey.objects.exists()


def test_a_challenge_answers_once(cabinet):
    started = cabinet.call("post", f"{PASSKEYS}/registration/options").json()
    body = {
        "requestId": started["requestId"],
        "credential": SoftAuthenticator().create(started["options"]),
    }

    first = cabinet.call("post", PASSKEYS, body)
    replay = cabinet.call("post", PASSKEYS, body)

    assert first.status_code == 201
    assert replay.status_code == 400
    assert replay.json()["code"] == "PASSKEY_INVALID"


def test_a_passkey_alone_signs_in_and_its_use_is_recorded(cabinet, owner):
    authenticator = SoftAuthenticator()
    registered(cabinet, authenticator)

    response = signed_in(authenticator)

    assert response.status_code == 200, response.content
    assert list(response.json()) == SIGNED_IN_FIELDS
    assert response.json()["userDto"]["email"] == owner.email
    session = ApiClient(device_id="laptop-1")
    session.tokens = response.json()
    assert session.call("get", "/api/users/me").status_code == 200
    passkey = Passkey.objects.get()
    assert passkey.sign_count == 1
    assert passkey.last_used_at is not None
    assert AuditEvent.objects.filter(kind="SIGN_IN", user=owner).count() == 2  # and cabinet's


def test_the_sign_in_options_name_no_account_and_require_user_verification():
    options = ApiClient().call("post", OPTIONS).json()["options"]

    assert options["userVerification"] == "required"
    assert options["allowCredentials"] == []
    assert options["rpId"] == "localhost"


def test_a_passwordless_sign_in_without_user_verification_is_refused(cabinet):
    authenticator = SoftAuthenticator()
    registered(cabinet, authenticator)

    response = signed_in(authenticator, verified=False)

    assert response.status_code == 400
    assert response.json()["code"] == "PASSKEY_INVALID"


def test_a_cloned_authenticator_is_refused_and_audited(cabinet, owner):
    original = SoftAuthenticator()
    registered(cabinet, original)
    clone = original.clone()
    assert signed_in(original).status_code == 200  # the count is 1 now

    copied = signed_in(clone)  # the copy's count is 1 too: not above what was seen

    assert copied.status_code == 400
    assert copied.json()["code"] == "PASSKEY_INVALID"
    event = AuditEvent.objects.get(kind="PASSKEY_CLONED")
    assert event.user == owner
    assert signed_in(original).status_code == 200  # the original goes on


def test_an_unknown_or_removed_passkey_and_a_forged_signature_are_refused(cabinet):
    stranger = SoftAuthenticator()
    stranger.create({"challenge": "AA", "user": {"id": "AA"}})
    removed = SoftAuthenticator()
    passkey_id = registered(cabinet, removed).json()["passkeyId"]
    cabinet.call("delete", f"{PASSKEYS}/{passkey_id}")
    forger = SoftAuthenticator()
    registered(cabinet, forger)
    forged = forger.clone()
    forged.key = SoftAuthenticator().key  # the same credential id, another key

    answers = [signed_in(stranger), signed_in(removed), signed_in(forged)]

    assert {response.json()["code"] for response in answers} == {"PASSKEY_INVALID"}
    assert not AuditEvent.objects.filter(kind="PASSKEY_CLONED").exists()


def test_a_password_lock_does_not_block_a_passkey(cabinet, owner, settings):
    authenticator = SoftAuthenticator()
    registered(cabinet, authenticator)
    for _ in range(settings.ACCOUNTS_LOCKOUT_THRESHOLD):
        ApiClient().call("post", "/api/auth/login/email", {"email": owner.email, "password": "x"})
    locked = ApiClient().call(
        "post", "/api/auth/login/email", {"email": owner.email, "password": DEFAULT_PASSWORD}
    )

    assert locked.status_code == 423
    assert signed_in(authenticator).status_code == 200


def test_a_sign_in_challenge_answers_once(cabinet):
    authenticator = SoftAuthenticator()
    registered(cabinet, authenticator)
    client = ApiClient(device_id="laptop-1")
    started = client.call("post", OPTIONS).json()
    body = {"requestId": started["requestId"], "credential": authenticator.get(started["options"])}

    first = client.call("post", SIGN_IN, body)
    replay = client.call("post", SIGN_IN, body)

    assert first.status_code == 200
    assert replay.json()["code"] == "PASSKEY_INVALID"
    assert PasskeyChallenge.objects.filter(used_at__isnull=True).count() == 0


def test_a_disabled_account_is_not_signed_in_by_its_passkey(cabinet, owner):
    authenticator = SoftAuthenticator()
    registered(cabinet, authenticator)
    User.objects.filter(pk=owner.pk).update(is_active=False)

    response = signed_in(authenticator)

    assert response.status_code == 403
    assert response.json()["code"] == "ACCOUNT_DISABLED"


def test_a_credential_registered_already_is_refused(cabinet):
    authenticator = SoftAuthenticator()  # one that ignores excludeCredentials
    assert registered(cabinet, authenticator).status_code == 201

    again = registered(cabinet, authenticator)

    assert again.status_code == 400
    assert again.json()["code"] == "PASSKEY_INVALID"
    assert Passkey.objects.count() == 1
