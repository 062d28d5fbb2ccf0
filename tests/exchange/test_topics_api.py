"""Topics, their grants and subscriptions through the owner's API (/api/users/topics...;
docs/exchange.md, "Topics")."""

from __future__ import annotations

import pytest

from accounts.models import User
from exchange.models import Subscription, TopicSubscriber
from tests.conftest import ApiClient
from tests.exchange.topics import TOPICS, cabinet_of, subscribe, topic_create
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def partner() -> User:
    """Another owner, with an adapter ("partner-erp")."""
    person = UserFactory.create(email="partner@example.com")
    AdapterFactory.create(username="partner-erp", owner=person)
    return person


@pytest.fixture
def partner_cabinet(partner: User) -> ApiClient:
    return cabinet_of(partner)


def partner_adapter(partner: User) -> User:
    return User.objects.get(owner=partner, username="partner-erp")


def test_a_topic_is_created_listed_and_its_name_is_unique_per_owner(cabinet, partner_cabinet):
    topic_id = topic_create(cabinet, "prices")

    again = cabinet.call("post", TOPICS, {"name": "prices"})
    elsewhere = partner_cabinet.call("post", TOPICS, {"name": "prices"})

    assert again.status_code == 409
    assert again.json()["code"] == "TOPIC_NAME_TAKEN"
    assert elsewhere.status_code == 201
    [listed] = cabinet.call("get", TOPICS).json()["topics"]
    assert listed["topicId"] == topic_id
    assert listed["name"] == "prices"
    assert listed["own"] is True
    assert listed["publishers"] == listed["subscribers"] == listed["subscriptions"] == []


@pytest.mark.parametrize("name", ["", "x" * 101, None, 5])
def test_a_topic_name_is_1_to_100_characters(cabinet, name):
    response = cabinet.call("post", TOPICS, {"name": name})

    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_FAILED"
    assert "name" in response.json()["errors"]


def test_another_owners_topic_is_404_until_it_is_open_to_one_of_your_adapters(
    cabinet, partner, partner_cabinet
):
    topic_id = topic_create(cabinet)

    hidden = partner_cabinet.call("get", f"{TOPICS}/{topic_id}")
    missing = partner_cabinet.call("get", f"{TOPICS}/{topic_id + 1000}")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["code"] == missing.json()["code"] == "NOT_FOUND"
    assert hidden.json()["detail"] == missing.json()["detail"]
    assert partner_cabinet.call("get", TOPICS).json()["topics"] == []

    allowed = cabinet.call(
        "post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": partner_adapter(partner).pk}
    )
    assert allowed.status_code == 201

    [seen] = partner_cabinet.call("get", TOPICS).json()["topics"]
    assert seen["topicId"] == topic_id
    assert seen["own"] is False
    assert [s["login"] for s in seen["subscribers"]] == ["partner-erp"]


def test_only_the_owner_changes_a_topic_another_owner_may_see(cabinet, partner, partner_cabinet):
    topic_id = topic_create(cabinet)
    mine = partner_adapter(partner)
    cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": mine.pk})

    attempts = [
        partner_cabinet.call("delete", f"{TOPICS}/{topic_id}"),
        partner_cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": mine.pk}),
        partner_cabinet.call("delete", f"{TOPICS}/{topic_id}/publishers/{mine.pk}"),
        partner_cabinet.call("post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": mine.pk}),
    ]

    assert [r.status_code for r in attempts] == [403] * 4
    assert {r.json()["code"] for r in attempts} == {"PERMISSION_DENIED"}


def test_grants_name_another_owners_adapter(cabinet, adapter, partner):
    topic_id = topic_create(cabinet)
    theirs = partner_adapter(partner)

    own = cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": adapter.pk})
    unknown = cabinet.call("post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": 10**9})
    person = cabinet.call("post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": partner.pk})
    first = cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": theirs.pk})
    second = cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": theirs.pk})

    assert own.status_code == 400
    assert "adapterId" in own.json()["errors"]
    assert unknown.status_code == person.status_code == 404
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == {"adapterId": theirs.pk}
    revoked = cabinet.call("delete", f"{TOPICS}/{topic_id}/publishers/{theirs.pk}")
    again = cabinet.call("delete", f"{TOPICS}/{topic_id}/publishers/{theirs.pk}")
    assert (revoked.status_code, again.status_code) == (200, 404)


def test_the_owner_subscribes_own_adapters_with_types_and_changes_them(cabinet, adapter):
    topic_id = topic_create(cabinet)

    created = subscribe(cabinet, topic_id, adapter, types=["b", "a", "a"])
    changed = subscribe(cabinet, topic_id, adapter)

    assert created.status_code == 201
    assert created.json()["types"] == ["a", "b"]
    assert created.json()["login"] == "erp"
    assert changed.status_code == 200
    assert changed.json()["types"] is None
    [subscription] = cabinet.call("get", f"{TOPICS}/{topic_id}").json()["subscriptions"]
    assert subscription["adapterId"] == adapter.pk
    assert subscription["types"] is None


@pytest.mark.parametrize(
    "types", [[], ["x" * 129], [""], "order", [1], [f"t{n}" for n in range(101)]]
)
def test_types_are_a_list_of_1_to_100_message_types(cabinet, adapter, types):
    topic_id = topic_create(cabinet)

    response = subscribe(cabinet, topic_id, adapter, types=types)

    assert response.status_code == 400
    assert all(name.startswith("types") for name in response.json()["errors"])


def test_another_owners_adapter_is_subscribed_by_its_owner_once_allowed(
    cabinet, partner, partner_cabinet, adapter
):
    topic_id = topic_create(cabinet)
    theirs = partner_adapter(partner)
    cabinet.call("post", f"{TOPICS}/{topic_id}/publishers", {"adapterId": theirs.pk})

    before = subscribe(partner_cabinet, topic_id, theirs)
    by_topic_owner = subscribe(cabinet, topic_id, theirs)
    cabinet.call("post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": theirs.pk})
    after = subscribe(partner_cabinet, topic_id, theirs)
    not_theirs = subscribe(partner_cabinet, topic_id, adapter)

    assert before.status_code == 403
    assert before.json()["code"] == "SUBSCRIBE_NOT_ALLOWED"
    assert by_topic_owner.status_code == 404  # the adapter is not the topic owner's
    assert after.status_code == 201
    assert not_theirs.status_code == 404
    # The partner sees its own adapters' part of the topic, not the owner's other subscribers.
    subscribe(cabinet, topic_id, adapter)
    seen = partner_cabinet.call("get", f"{TOPICS}/{topic_id}").json()
    assert [s["login"] for s in seen["subscriptions"]] == ["partner-erp"]
    assert [
        s["login"] for s in cabinet.call("get", f"{TOPICS}/{topic_id}").json()["subscriptions"]
    ] == ["erp", "partner-erp"]


def test_either_owner_ends_a_subscription_and_withdrawing_the_allowance_ends_it(
    cabinet, partner, partner_cabinet
):
    topic_id = topic_create(cabinet)
    theirs = partner_adapter(partner)
    cabinet.call("post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": theirs.pk})
    subscribe(partner_cabinet, topic_id, theirs)

    by_topic_owner = cabinet.call("delete", f"{TOPICS}/{topic_id}/subscriptions/{theirs.pk}")
    subscribe(partner_cabinet, topic_id, theirs)
    by_adapter_owner = partner_cabinet.call(
        "delete", f"{TOPICS}/{topic_id}/subscriptions/{theirs.pk}"
    )
    subscribe(partner_cabinet, topic_id, theirs)
    withdrawn = cabinet.call("delete", f"{TOPICS}/{topic_id}/subscribers/{theirs.pk}")

    assert by_topic_owner.status_code == by_adapter_owner.status_code == 200
    assert withdrawn.status_code == 200
    assert not Subscription.objects.filter(adapter=theirs).exists()
    assert partner_cabinet.call("get", f"{TOPICS}/{topic_id}").status_code == 404


def test_deleting_a_topic_ends_its_grants_and_subscriptions(cabinet, adapter, partner):
    topic_id = topic_create(cabinet)
    subscribe(cabinet, topic_id, adapter)
    cabinet.call(
        "post", f"{TOPICS}/{topic_id}/subscribers", {"adapterId": partner_adapter(partner).pk}
    )

    deleted = cabinet.call("delete", f"{TOPICS}/{topic_id}")

    assert deleted.status_code == 200
    assert cabinet.call("get", f"{TOPICS}/{topic_id}").status_code == 404
    assert not Subscription.objects.exists()
    assert not TopicSubscriber.objects.exists()


def test_an_adapter_cannot_manage_topics(consumer):
    response = consumer.call("post", TOPICS, {"name": "prices"})

    assert response.status_code == 403
