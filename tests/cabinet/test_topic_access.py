"""Who sees which topic on /bus, and may do what with it: another owner's topic open to your
adapters shows your part of it only, its owner's actions are theirs alone, and a topic neither
yours nor open to your adapters is 404, exactly as one that does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import User
from exchange.models import Subscription, Topic, TopicPublisher, TopicSubscriber
from tests.cabinet.topics import card, cards, field_error, flashed, signed_in, text
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def topic(person: User) -> Topic:
    return Topic.objects.create(owner=person, name="prices")


@pytest.fixture
def partner(owner: User) -> Client:
    """The other owner (whose adapter is ``adapter``, "erp"), signed in."""
    return signed_in(owner)


def test_a_topic_shared_with_another_owner_shows_them_their_part_only(
    browser, partner, person, topic, mine, adapter, owner
):
    other = AdapterFactory.create(username="erp-2", owner=owner)
    browser.post(f"/bus/topics/{topic.pk}/subscribers", {"adapter": str(adapter.pk)})
    Subscription.objects.create(topic=topic, adapter=mine, types=None)
    Topic.objects.create(owner=person, name="hidden")  # the owner's, open to nobody else

    shown = card(partner.get("/bus"), topic)
    partner.post(
        f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(adapter.pk), "types": "price"}
    )
    subscribed = partner.get("/bus")
    owner_sees = card(browser.get("/bus"), topic)
    partner.post(f"/bus/topics/{topic.pk}/subscriptions/{adapter.pk}/delete")
    unsubscribed = partner.get("/bus")

    assert cards(partner.get("/bus")) == ["prices"]
    assert 'data-own="no"' in shown
    assert '<span class="badge">shared with you</span>' in shown
    assert f'<li data-adapter="{adapter.pk}">erp' in shown
    assert "None of your adapters may publish to it." in shown
    assert "None of your adapters is subscribed." in shown  # the owner's billing is not shown
    assert "billing" not in shown
    assert f'<option value="{adapter.pk}">erp (#{adapter.pk})</option>' in shown
    assert f'value="{other.pk}"' not in shown  # not allowed: not offered
    assert "/publishers" not in shown
    assert "/withdraw" not in shown
    assert "/delete" not in shown
    assert "Grant publishing" not in shown
    assert flashed(subscribed) == [
        "erp is subscribed to prices: it gets a copy of each publication of the types price."
    ]
    assert f'<li data-adapter="{adapter.pk}">erp <small>#{adapter.pk}</small>: ' in owner_sees
    assert "billing <small>" in owner_sees
    assert flashed(unsubscribed) == [f"Adapter {adapter.pk} is no longer subscribed to prices."]
    assert not Subscription.objects.filter(adapter=adapter).exists()


def test_the_topic_owner_ends_another_owners_subscription(browser, topic, adapter):
    TopicSubscriber.objects.create(topic=topic, adapter=adapter)
    Subscription.objects.create(topic=topic, adapter=adapter, types=["a"])

    browser.post(f"/bus/topics/{topic.pk}/subscriptions/{adapter.pk}/delete")

    assert not Subscription.objects.exists()


def test_a_shared_topic_tells_who_may_not_subscribe_a_not_allowed_adapter(partner, topic, adapter):
    TopicPublisher.objects.create(topic=topic, adapter=adapter)

    shown = card(partner.get("/bus"), topic)
    page = partner.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(adapter.pk)})

    assert f'<li data-adapter="{adapter.pk}">erp' in shown  # may publish
    assert "None of your adapters may subscribe to it." in shown
    assert "Subscribe an adapter" not in shown
    assert field_error(text(page), f"id_topic_{topic.pk}_subscriptions_adapter") == (
        "The topic's owner has not allowed this adapter to subscribe."
    )


def test_only_the_owner_changes_a_shared_topic(partner, topic, adapter):
    TopicSubscriber.objects.create(topic=topic, adapter=adapter)
    TopicPublisher.objects.create(topic=topic, adapter=adapter)
    other = AdapterFactory.create()

    tried = {
        "grant": lambda: partner.post(
            f"/bus/topics/{topic.pk}/publishers", {"adapter": str(other.pk)}
        ),
        "allow": lambda: partner.post(
            f"/bus/topics/{topic.pk}/subscribers", {"adapter": str(other.pk)}
        ),
        "revoke": lambda: partner.post(f"/bus/topics/{topic.pk}/publishers/{adapter.pk}/withdraw"),
        "disallow": lambda: partner.post(
            f"/bus/topics/{topic.pk}/subscribers/{adapter.pk}/withdraw"
        ),
        "ask to delete": lambda: partner.get(f"/bus/topics/{topic.pk}/delete"),
        "delete": lambda: partner.post(f"/bus/topics/{topic.pk}/delete"),
    }

    for action, attempt in tried.items():
        assert attempt()["Location"] == "/bus", action
        assert flashed(partner.get("/bus")) == ["Only the topic's owner may do this."], action
    assert Topic.objects.filter(pk=topic.pk).exists()
    assert TopicPublisher.objects.count() == TopicSubscriber.objects.count() == 1


def test_a_topic_you_may_not_see_is_404_whether_or_not_it_exists(browser, mine, owner):
    theirs = Topic.objects.create(owner=owner, name="theirs")
    missing = Topic.objects.order_by("-pk").first().pk + 1000  # type: ignore[union-attr]

    def answers(topic_id: int) -> list[Any]:
        return [
            browser.post(f"/bus/topics/{topic_id}/publishers", {"adapter": str(mine.pk)}),
            browser.post(f"/bus/topics/{topic_id}/subscribers", {"adapter": str(mine.pk)}),
            browser.post(f"/bus/topics/{topic_id}/publishers/{mine.pk}/withdraw"),
            browser.post(f"/bus/topics/{topic_id}/subscribers/{mine.pk}/withdraw"),
            browser.post(f"/bus/topics/{topic_id}/subscriptions", {"adapter": str(mine.pk)}),
            browser.post(f"/bus/topics/{topic_id}/subscriptions/{mine.pk}/delete"),
            browser.get(f"/bus/topics/{topic_id}/delete"),
            browser.post(f"/bus/topics/{topic_id}/delete"),
        ]

    hidden, absent = answers(theirs.pk), answers(missing)

    assert [answer.status_code for answer in hidden] == [404] * 8
    assert [answer.content for answer in hidden] == [answer.content for answer in absent]
    assert [answer.status_code for answer in absent] == [404] * 8
    assert Topic.objects.filter(pk=theirs.pk).exists()
    assert not Subscription.objects.exists()
    assert not TopicPublisher.objects.exists()
    assert cards(browser.get("/bus")) == []


def test_other_methods_and_parts_are_refused(browser, topic, mine):
    assert browser.get("/bus/topics").status_code == 405
    assert browser.get(f"/bus/topics/{topic.pk}/publishers").status_code == 405
    assert browser.get(f"/bus/topics/{topic.pk}/subscriptions").status_code == 405
    assert browser.get(f"/bus/topics/{topic.pk}/publishers/{mine.pk}/withdraw").status_code == 405
    assert browser.post(f"/bus/topics/{topic.pk}/owners", {"adapter": "1"}).status_code == 404
    assert browser.post(f"/bus/topics/{topic.pk}/owners/{mine.pk}/withdraw").status_code == 404


def test_a_signed_out_person_is_sent_to_sign_in(topic):
    answered = Client().post("/bus/topics", {"name": "prices"})

    assert answered.status_code == 302
    assert answered["Location"].startswith("/login")
