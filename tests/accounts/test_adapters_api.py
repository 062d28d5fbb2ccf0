"""Cabinet users manage their adapters over the API: create, list, rotate, disable, delete, routes."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from accounts.models import User
from exchange.models import Message, Route
from tests.conftest import ApiClient
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


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
    body = cabinet.call("post", "/api/users/adapters", {}).json()

    assert body["login"].startswith("adapter-")


def test_a_taken_login_is_409(cabinet, adapter):
    response = cabinet.call("post", "/api/users/adapters", {"login": "erp"})

    assert (response.status_code, response.json()["code"]) == (409, "LOGIN_TAKEN")


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


def test_rotating_the_password_ends_the_adapters_sessions(cabinet, adapter, consumer):
    response = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password")

    assert response.status_code == 200
    assert consumer.call("get", "/api/exchange/whoami").json()["code"] == "TOKEN_REVOKED"
    assert ApiClient(device_id="x").sign_in("erp", response.json()["password"]).status_code == 200


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

    assert (granted.status_code, granted.json()) == (201, {"senderAdapterId": stranger.pk})
    assert again.status_code == 200
    assert withdrawn.status_code == 200
    assert gone.status_code == 404
    assert not Route.objects.exists()


def test_a_route_needs_another_adapter(cabinet, adapter):
    response = cabinet.call(
        "post", f"/api/users/adapters/{adapter.pk}/routes", {"senderAdapterId": adapter.pk}
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {
        "senderAdapterId": ["An adapter needs no route to itself."]
    }


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


def test_rotation_renews_an_adapters_expired_credentials(cabinet, adapter):
    from django.utils import timezone

    adapter.credentials_expire_at = timezone.now()
    adapter.save()
    assert ApiClient(device_id="x").sign_in("erp").json()["code"] == "ACTION_RESET_PASSWORD"

    password = cabinet.call("post", f"/api/users/adapters/{adapter.pk}/password").json()["password"]

    assert ApiClient(device_id="x").sign_in("erp", password).status_code == 200
