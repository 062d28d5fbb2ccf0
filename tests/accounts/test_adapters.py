"""Adapters: a cabinet user creates them (the API, the create_adapter command) with a generated
password shown once, lists, rotates, disables and deletes them and grants their routes; an adapter
may use the exchange API only, and a cabinet user everything but it.
"""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import User
from accounts.services.accounts import account_require_password_change
from accounts.services.adapters import adapter_create
from exchange.models import Message, Route
from platform_site.errors import ValidationFailed
from tests.accounts.api import outcome
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


# --- Created with a password shown once -----------------------------------------------------------


def test_an_adapter_is_created_for_its_owner_with_a_usable_password():
    owner = UserFactory.create()

    credentials = adapter_create(owner=owner, login="erp-bridge")

    adapter = User.objects.get(pk=credentials.adapter_id)
    assert (adapter.kind, adapter.owner, adapter.username) == (
        User.Kind.ADAPTER,
        owner,
        "erp-bridge",
    )
    assert credentials.login == "erp-bridge"
    assert adapter.check_password(credentials.password)
    assert credentials.password not in adapter.password


def test_a_generated_password_carries_at_least_128_bits():
    credentials = adapter_create(owner=UserFactory.create())

    # URL-safe base64: 6 bits a character.
    assert re.fullmatch(r"[A-Za-z0-9_-]+", credentials.password)
    assert len(credentials.password) * 6 >= 128


def test_creating_an_adapter_shows_its_password_once_and_it_can_sign_in(cabinet, owner):
    response = cabinet.call("post", "/api/users/adapters", {"login": "warehouse"})

    assert response.status_code == 201
    body = response.json()
    assert list(body) == ["adapterId", "login", "password"]
    assert body["login"] == "warehouse"
    adapter = User.objects.get(pk=body["adapterId"])
    assert (adapter.kind, adapter.owner) == (User.Kind.ADAPTER, owner)
    assert ApiClient(device_id="w").sign_in("warehouse", body["password"]).status_code == 200
    listing = cabinet.call("get", "/api/users/adapters").json()["adapters"]
    assert "password" not in listing[0]


def test_a_login_is_generated_when_none_is_given(cabinet):
    first = cabinet.call("post", "/api/users/adapters", {}).json()
    second = cabinet.call("post", "/api/users/adapters", {}).json()

    assert re.fullmatch(r"adapter-[0-9a-f]{8}", first["login"])
    assert re.fullmatch(r"adapter-[0-9a-f]{8}", second["login"])
    assert first["login"] != second["login"]


def test_a_taken_login_is_409_login_taken(cabinet, adapter):
    response = cabinet.call("post", "/api/users/adapters", {"login": "erp"})

    assert outcome(response) == (409, "LOGIN_TAKEN")
    assert User.objects.filter(username="erp").count() == 1


def test_a_login_with_spaces_is_invalid():
    with pytest.raises(ValidationFailed) as raised:
        adapter_create(owner=UserFactory.create(), login="erp bridge")

    assert "login" in raised.value.extra["errors"]


def test_an_adapter_cannot_own_adapters():
    with pytest.raises(ValidationFailed):
        adapter_create(owner=AdapterFactory.create())


# --- Managed by its owner -------------------------------------------------------------------------


def test_the_list_shows_each_adapter_with_its_queue_and_routes(cabinet, adapter, owner):
    stranger = AdapterFactory.create(
        username="foreign", owner=UserFactory.create(username="x", email="x@example.com")
    )
    Route.objects.create(recipient=adapter, sender=stranger, granted_by=owner)
    Message.objects.create(recipient=adapter, sender=stranger, type="t", payload={})
    ApiClient(device_id="d").sign_in("erp")

    [entry] = cabinet.call("get", "/api/users/adapters").json()["adapters"]

    assert entry["adapterId"] == adapter.pk
    assert entry["login"] == "erp"
    assert entry["active"] is True
    assert entry["activeSessions"] == 1
    assert entry["lastSignInAt"].endswith("Z")
    assert entry["allowedSenderIds"] == [stranger.pk]
    assert entry["queue"] == {
        "available": 1,
        "inFlight": 0,
        "delayed": 0,
        "deadLettered": 0,
        "oldestAgeSeconds": 0,
    }


def test_rotating_the_password_replaces_it_and_ends_the_adapters_sessions(
    cabinet, adapter, consumer
):
    response = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password")

    assert response.status_code == 200
    new_password = response.json()["password"]
    adapter.refresh_from_db()
    assert adapter.check_password(new_password)
    assert not adapter.check_password(DEFAULT_PASSWORD)
    assert outcome(consumer.call("get", "/api/exchange/whoami")) == (401, "TOKEN_REVOKED")
    assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")
    assert ApiClient(device_id="x").sign_in("erp", new_password).status_code == 200


def test_rotation_renews_an_adapters_expired_credentials(cabinet, adapter):
    adapter.credentials_expire_at = timezone.now()
    adapter.save()
    assert ApiClient(device_id="x").sign_in("erp").json()["code"] == "ACTION_RESET_PASSWORD"

    password = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password").json()["password"]

    assert ApiClient(device_id="x").sign_in("erp", password).status_code == 200


def test_disabling_ends_the_sessions_and_refuses_sign_in_until_enabled(cabinet, adapter, consumer):
    disabled = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"active": False})

    assert (disabled.status_code, disabled.json()["active"]) == (200, False)
    assert consumer.call("get", "/api/exchange/whoami").json()["code"] == "TOKEN_REVOKED"
    assert ApiClient(device_id="x").sign_in("erp").json()["code"] == "ACCOUNT_DISABLED"
    cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"active": True})
    assert ApiClient(device_id="x").sign_in("erp").status_code == 200


def test_deleting_an_adapter_removes_it_and_its_queue(cabinet, adapter):
    Message.objects.create(recipient=adapter, type="t", payload={})

    response = cabinet.call("delete", f"/api/users/adapters/{adapter.pk}")

    assert (response.status_code, response.json()) == (200, {})
    assert not User.objects.filter(pk=adapter.pk).exists()
    assert Message.objects.count() == 0


def test_granting_and_withdrawing_a_route(cabinet, adapter):
    stranger = AdapterFactory.create(
        username="foreign", owner=UserFactory.create(username="x", email="x@example.com")
    )

    granted = cabinet.call(
        "post", f"/api/users/adapters/{adapter.pk}/routes", {"senderAdapterId": stranger.pk}
    )
    again = cabinet.call(
        "post", f"/api/users/adapters/{adapter.pk}/routes", {"senderAdapterId": stranger.pk}
    )
    withdrawn = cabinet.call("delete", f"/api/users/adapters/{adapter.pk}/routes/{stranger.pk}")
    gone = cabinet.call("delete", f"/api/users/adapters/{adapter.pk}/routes/{stranger.pk}")

    assert (granted.status_code, granted.json()) == (
        201,
        {"senderAdapterId": stranger.pk, "senderLogin": "foreign", "senderDisplayName": ""},
    )
    assert again.status_code == 200
    assert withdrawn.status_code == 200
    assert gone.status_code == 404
    assert not Route.objects.exists()


def test_a_route_to_the_adapter_itself_is_not_needed(cabinet, adapter):
    response = cabinet.call(
        "post", f"/api/users/adapters/{adapter.pk}/routes", {"senderAdapterId": adapter.pk}
    )

    assert (response.status_code, response.json()["code"]) == (400, "ROUTE_NOT_NEEDED")


def test_a_route_from_an_adapter_that_does_not_exist_is_404(cabinet, adapter):
    response = cabinet.call(
        "post", f"/api/users/adapters/{adapter.pk}/routes", {"senderAdapterId": 999_999}
    )

    assert response.status_code == 404
    assert response.json()["code"] == "NOT_FOUND"
    assert response.json()["detail"] == "There is no adapter with this senderAdapterId."


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("patch", "", {"active": False}),
        ("delete", "", None),
        ("post", "/password", None),
        ("post", "/routes", {"senderAdapterId": 1}),
    ],
)
def test_another_owners_adapter_is_404_whatever_the_operation(cabinet, method, suffix, body):
    foreign = AdapterFactory.create(
        username="foreign", owner=UserFactory.create(username="x", email="x@example.com")
    )

    response = cabinet.call(method, f"/api/users/adapters/{foreign.pk}{suffix}", body)

    assert (response.status_code, response.json()["code"]) == (404, "NOT_FOUND")
    foreign.refresh_from_db()
    assert foreign.is_active is True


def test_unknown_fields_are_refused(cabinet, adapter):
    response = cabinet.call(
        "patch", f"/api/users/adapters/{adapter.pk}", {"active": False, "owner": 1}
    )

    assert response.json()["code"] == "UNKNOWN_FIELD"


# --- Each principal its own API -------------------------------------------------------------------


ADAPTER_FORBIDDEN = [
    ("get", "/api/users/me", None),
    ("patch", "/api/users/me", {"firstName": "x"}),
    ("patch", "/api/users/change-password", {"currentPassword": "x"}),
    ("get", "/api/users/sessions", None),
    ("get", "/api/users/adapters", None),
    ("patch", "/api/users/two-factor-authentication", None),
    ("post", "/api/users/two-factor-authentication/confirm", None),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), ADAPTER_FORBIDDEN, ids=[f"{m} {p}" for m, p, _ in ADAPTER_FORBIDDEN]
)
def test_adapters_get_403_on_the_users_api(consumer, method, path, body):
    response = consumer.call(method, path, body)

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "PERMISSION_DENIED"


def test_cabinet_users_get_403_on_the_exchange_api(cabinet):
    assert outcome(cabinet.call("get", "/api/exchange/whoami")) == (403, "PERMISSION_DENIED")


def test_an_adapter_owner_flagged_for_a_password_change_does_not_restrict_the_adapter(
    owner, adapter, consumer
):
    account_require_password_change(user=owner, actor=None)

    response = consumer.call("get", "/api/exchange/messages?waitSeconds=0")

    assert response.status_code == 200, response.json()


# --- Commands -------------------------------------------------------------------------------------


def test_create_adapter_command_prints_json_with_the_password(owner, capsys):
    call_command("create_adapter", "--owner", "OWNER@example.com", "--login", "scripted", "--json")

    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["adapterId", "login", "password"]
    assert User.objects.get(pk=printed["adapterId"]).check_password(printed["password"])


def test_create_adapter_command_names_a_missing_owner(db):
    with pytest.raises(
        CommandError, match=r"No cabinet user has the e-mail address ghost@example\.com"
    ):
        call_command("create_adapter", "--owner", "ghost@example.com")


def test_create_adapter_command_reports_a_taken_login(owner, adapter):
    with pytest.raises(CommandError, match="LOGIN_TAKEN"):
        call_command("create_adapter", "--owner", owner.email, "--login", "erp")
