"""Disabling an owner (docs/sessions.md, "A disabled owner's adapters"): an administrator's disable action, or the admin's change form,
disables the sign-in of the owner's adapters and ends their sessions; enabling the owner enables
those adapters again, but not one the owner had disabled themselves."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import User
from accounts.models.audit import AuditEvent
from tests.accounts.api import outcome
from tests.conftest import ApiClient
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def idle(owner: User) -> User:
    """An adapter its owner disabled themselves."""
    return AdapterFactory.create(username="old-erp", owner=owner)


def owner_disabled_in_the_admin(admin_client: Client, owner: User) -> None:
    response = admin_client.post(
        "/admin/accounts/user/", {"action": "disable", "_selected_action": [owner.pk]}
    )
    assert response.status_code == 302


def owner_enabled_in_the_admin(admin_client: Client, owner: User) -> None:
    response = admin_client.post(
        "/admin/accounts/user/", {"action": "enable", "_selected_action": [owner.pk]}
    )
    assert response.status_code == 302


def owner_active_on_the_change_form(admin_client: Client, owner: User, active: bool) -> None:
    page = admin_client.get(f"/admin/accounts/user/{owner.pk}/change/")
    form = page.context["adminform"].form
    data: dict[str, Any] = {
        name: value
        for name, value in form.initial.items()
        if value is not None and name not in ("groups", "user_permissions", "password")
    }
    data["is_active"] = "on" if active else ""
    joined = timezone.localtime(owner.date_joined)
    data["date_joined_0"] = joined.strftime("%Y-%m-%d")
    data["date_joined_1"] = joined.strftime("%H:%M:%S")
    data = {key: value for key, value in data.items() if value not in ("", None)}
    response = admin_client.post(f"/admin/accounts/user/{owner.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors


def disabled_by_its_owner(cabinet: ApiClient, adapter: User) -> None:
    response = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"active": False})
    assert response.status_code == 200


def disable_on_the_change_form(admin_client: Client, owner: User) -> None:
    owner_active_on_the_change_form(admin_client, owner, active=False)


def enable_on_the_change_form(admin_client: Client, owner: User) -> None:
    owner_active_on_the_change_form(admin_client, owner, active=True)


WAYS = [
    pytest.param(owner_disabled_in_the_admin, owner_enabled_in_the_admin, id="admin-action"),
    pytest.param(disable_on_the_change_form, enable_on_the_change_form, id="change-form"),
]


@pytest.mark.parametrize(("disable", "enable"), WAYS)
def test_disabling_an_owner_stops_their_adapters_sign_in_and_ends_their_sessions(
    admin_client, owner, adapter, consumer, disable, enable
):
    disable(admin_client, owner)

    assert outcome(consumer.call("get", "/api/exchange/whoami")) == (401, "TOKEN_REVOKED")
    assert outcome(consumer.refresh()) == (401, "TOKEN_REVOKED")
    assert outcome(ApiClient(device_id="x").sign_in("erp")) == (403, "ACCOUNT_DISABLED")
    adapter.refresh_from_db()
    assert (adapter.is_active, adapter.disabled_with_owner) == (False, True)


@pytest.mark.parametrize(("disable", "enable"), WAYS)
def test_enabling_the_owner_enables_the_adapters_its_disabling_disabled(
    admin_client, owner, adapter, consumer, disable, enable
):
    disable(admin_client, owner)
    enable(admin_client, owner)

    signed_in = ApiClient(device_id="x")
    assert signed_in.sign_in("erp").status_code == 200
    assert signed_in.call("get", "/api/exchange/whoami").status_code == 200
    adapter.refresh_from_db()
    assert (adapter.is_active, adapter.disabled_with_owner) == (True, False)


@pytest.mark.parametrize(("disable", "enable"), WAYS)
def test_an_adapter_the_owner_disabled_stays_disabled_when_the_owner_is_enabled(
    admin_client, cabinet, owner, adapter, idle, disable, enable
):
    disabled_by_its_owner(cabinet, idle)

    disable(admin_client, owner)
    enable(admin_client, owner)

    assert outcome(ApiClient(device_id="x").sign_in("old-erp")) == (403, "ACCOUNT_DISABLED")
    assert ApiClient(device_id="y").sign_in("erp").status_code == 200
    idle.refresh_from_db()
    assert (idle.is_active, idle.disabled_with_owner) == (False, False)


def test_an_adapter_an_administrator_disables_while_its_owner_is_disabled_stays_disabled(
    admin_client, owner, adapter
):
    owner_disabled_in_the_admin(admin_client, owner)
    admin_client.post(
        "/admin/accounts/user/", {"action": "disable", "_selected_action": [adapter.pk]}
    )
    owner_enabled_in_the_admin(admin_client, owner)

    adapter.refresh_from_db()
    assert adapter.is_active is False


def test_each_adapter_disabled_with_its_owner_is_audited_with_the_administrator(
    admin_client, admin_user, owner, adapter
):
    owner_disabled_in_the_admin(admin_client, owner)

    event = AuditEvent.objects.get(user=adapter, kind=AuditEvent.Kind.ACCOUNT_DISABLED)
    assert event.actor == admin_user
    assert event.details == {"with_owner": True}
