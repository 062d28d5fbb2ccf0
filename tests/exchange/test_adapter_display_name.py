"""An adapter's display name (docs/exchange.md): its owner sets it with PATCH /api/users/adapters/{id},
which takes active and/or displayName, and the adapters' list and the PATCH's answer carry it."""

from __future__ import annotations

import pytest

from tests.conftest import ApiClient

pytestmark = pytest.mark.django_db


def test_an_adapter_is_named_and_the_answer_and_the_list_carry_the_name(cabinet, adapter):
    named = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"displayName": "Orders"})

    [listed] = cabinet.call("get", "/api/users/adapters").json()["adapters"]
    assert named.status_code == 200
    assert named.json() == listed
    assert (listed["login"], listed["displayName"], listed["active"]) == ("erp", "Orders", True)


def test_an_adapter_has_no_display_name_until_its_owner_gives_it_one(cabinet, adapter):
    [listed] = cabinet.call("get", "/api/users/adapters").json()["adapters"]

    assert listed["displayName"] == ""


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("x" * 100, "x" * 100), ("", ""), ("  Orders  ", "Orders")],
    ids=["100 characters", "empty", "trimmed"],
)
def test_a_display_name_of_up_to_100_characters_is_kept(cabinet, adapter, sent, kept):
    adapter.display_name = "Before"
    adapter.save()

    response = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"displayName": sent})

    assert (response.status_code, response.json()["displayName"]) == (200, kept)


def test_a_display_name_of_101_characters_is_refused(cabinet, adapter):
    response = cabinet.call(
        "patch", f"/api/users/adapters/{adapter.pk}", {"displayName": "x" * 101}
    )

    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert list(response.json()["errors"]) == ["displayName"]
    adapter.refresh_from_db()
    assert adapter.display_name == ""


def test_active_and_display_name_change_together(cabinet, adapter, consumer):
    response = cabinet.call(
        "patch", f"/api/users/adapters/{adapter.pk}", {"active": False, "displayName": "Old ERP"}
    )

    assert response.status_code == 200
    assert (response.json()["active"], response.json()["displayName"]) == (False, "Old ERP")
    assert consumer.call("get", "/api/exchange/whoami").json()["code"] == "TOKEN_REVOKED"


def test_naming_an_adapter_leaves_it_enabled_and_signed_in(cabinet, adapter, consumer):
    cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {"displayName": "Orders"})

    assert consumer.call("get", "/api/exchange/whoami").status_code == 200
    assert ApiClient(device_id="x").sign_in("erp").status_code == 200


def test_a_patch_names_at_least_one_of_active_and_display_name(cabinet, adapter):
    response = cabinet.call("patch", f"/api/users/adapters/{adapter.pk}", {})

    sentence = ["Send active, displayName or both."]
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert response.json()["errors"] == {"active": sentence, "displayName": sentence}
