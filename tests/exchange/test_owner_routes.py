"""Routes by login (docs/exchange.md, "Routes"): an owner names the sender by its login or by its id, exactly one;
a login that is no adapter's is as unknown as one nobody has; one of the owner's own adapters
needs no route; the adapters' list names each route's sender."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import User
from exchange.models import Route
from tests.conftest import ApiClient
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def stranger(db: Any) -> User:
    """Another owner's adapter, with a display name."""
    other = UserFactory.create(username="other", email="other@example.com")
    return AdapterFactory.create(username="shop-7", owner=other, display_name="Web shop")


def grant(cabinet: ApiClient, adapter: User, body: dict[str, Any]) -> Any:
    return cabinet.call("post", f"/api/users/adapters/{adapter.pk}/routes", body)


def test_a_route_is_granted_to_a_sender_named_by_its_login(cabinet, adapter, stranger):
    granted = grant(cabinet, adapter, {"senderLogin": "shop-7"})
    again = grant(cabinet, adapter, {"senderLogin": "shop-7"})

    expected = {
        "senderAdapterId": stranger.pk,
        "senderLogin": "shop-7",
        "senderDisplayName": "Web shop",
    }
    assert (granted.status_code, granted.json()) == (201, expected)
    assert (again.status_code, again.json()) == (200, expected)
    assert Route.objects.get().sender == stranger


def test_a_route_is_granted_to_a_sender_named_by_its_id_as_before(cabinet, adapter, stranger):
    granted = grant(cabinet, adapter, {"senderAdapterId": stranger.pk})

    assert granted.status_code == 201
    assert granted.json()["senderLogin"] == "shop-7"


@pytest.mark.parametrize(
    "body",
    [{}, {"senderLogin": "shop-7", "senderAdapterId": 1}],
    ids=["neither", "both"],
)
def test_a_route_names_its_sender_exactly_once(cabinet, adapter, stranger, body):
    if "senderAdapterId" in body:
        body["senderAdapterId"] = stranger.pk

    response = grant(cabinet, adapter, body)

    sentence = ["Send either senderLogin or senderAdapterId."]
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert response.json()["errors"] == {"senderLogin": sentence, "senderAdapterId": sentence}
    assert not Route.objects.exists()


def test_logins_are_compared_exactly_as_typed(cabinet, adapter, stranger):
    response = grant(cabinet, adapter, {"senderLogin": "SHOP-7"})

    assert (response.status_code, response.json()["code"]) == (404, "NOT_FOUND")


def test_an_unknown_login_and_a_cabinet_users_login_are_the_same_404(cabinet, adapter, stranger):
    unknown = grant(cabinet, adapter, {"senderLogin": "nobody-here"})
    person = grant(cabinet, adapter, {"senderLogin": "other"})  # stranger's owner's login

    assert (unknown.status_code, unknown.json()["code"]) == (404, "NOT_FOUND")
    assert person.status_code == unknown.status_code
    assert person.json() == unknown.json()
    assert unknown.json()["detail"] == "There is no adapter with this senderLogin."
    assert not Route.objects.exists()


def test_a_cabinet_users_id_is_the_same_404_as_an_unknown_one(cabinet, adapter, stranger):
    unknown = grant(cabinet, adapter, {"senderAdapterId": 999_999})
    person = grant(cabinet, adapter, {"senderAdapterId": stranger.owner_id})

    assert (unknown.status_code, unknown.json()["code"]) == (404, "NOT_FOUND")
    assert person.json() == unknown.json()


@pytest.mark.parametrize("by", ["senderLogin", "senderAdapterId"])
def test_a_route_from_one_of_the_owners_own_adapters_is_not_needed(cabinet, owner, adapter, by):
    sibling = AdapterFactory.create(username="crm", owner=owner)

    response = grant(
        cabinet, adapter, {by: sibling.username if by == "senderLogin" else sibling.pk}
    )
    itself = grant(cabinet, adapter, {by: adapter.username if by == "senderLogin" else adapter.pk})

    assert (response.status_code, response.json()["code"]) == (400, "ROUTE_NOT_NEEDED")
    assert (itself.status_code, itself.json()["code"]) == (400, "ROUTE_NOT_NEEDED")
    assert response.json()["detail"] == (
        "Your own adapters may send to each other already: a route names another owner's adapter."
    )
    assert not Route.objects.exists()


def test_the_adapters_list_names_each_routes_sender_by_login_and_display_name(
    cabinet, adapter, stranger
):
    grant(cabinet, adapter, {"senderLogin": "shop-7"})

    [entry] = cabinet.call("get", "/api/users/adapters").json()["adapters"]

    assert entry["allowedSenderIds"] == [stranger.pk]
    assert entry["allowedSenders"] == [
        {"adapterId": stranger.pk, "login": "shop-7", "displayName": "Web shop"}
    ]
