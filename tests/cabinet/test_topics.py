"""The topics of /bus (exchange/web/topics.py) with Django's test client: creating one and a
refused name on its field, granting publishing and allowing subscribers and withdrawing them, a
refused adapter number on its field, subscriptions with and without types, deleting after a
confirmation, the queries, and the Russian of it all. Who sees which topic:
test_topic_access.py."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from accounts.models import User
from exchange.models import Subscription, Topic, TopicPublisher, TopicSubscriber
from exchange.web import topic_cards
from tests.cabinet.topics import card, cards, field_error, flashed, signed_in, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def topic(person: User) -> Topic:
    return Topic.objects.create(owner=person, name="prices")


@pytest.fixture
def partner(owner: User) -> Client:
    """The other owner (whose adapter is ``adapter``, "erp"), signed in."""
    return signed_in(owner)


def test_the_bus_offers_to_create_a_topic(browser):
    page = text(browser.get("/bus"))

    assert '<h2 id="topics-title">Topics</h2>' in page
    assert '<form method="post" action="/bus/topics" novalidate>' in page
    assert '<label for="id_topic_name">Name</label>' in page
    assert "Create a topic</button>" in page
    assert 'class="card topic"' not in page


def test_a_topic_is_created_and_shown_as_yours(browser, person):
    answered = browser.post("/bus/topics", {"name": "prices"})
    page = browser.get("/bus")

    [topic] = Topic.objects.filter(owner=person)
    assert answered.status_code == 302
    assert answered["Location"] == "/bus"
    assert topic.name == "prices"
    assert flashed(page) == [
        "The topic prices is created: your adapters may publish to it and subscribe to it."
    ]
    shown = card(page, topic)
    assert 'data-own="yes"' in shown
    assert '<span class="badge ok">yours</span>' in shown
    assert "No other owner's adapter may publish to it." in shown
    assert "No adapter is subscribed." in shown
    assert f'<form method="get" action="/bus/topics/{topic.pk}/delete">' in shown
    assert " style=" not in shown  # the pages' CSP: no inline style, no inline script
    assert "<script" not in shown


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        ("prices", "You have a topic with this name already."),
        ("", "This field is required."),
        ("   ", "This field is required."),
        ("p" * 101, "Ensure this value has at most 100 characters (it has 101)."),
    ],
)
def test_a_refused_name_is_told_on_its_field_and_stays_typed(browser, topic, name, sentence):
    page = browser.post("/bus/topics", {"name": name})

    assert page.status_code == 200
    assert field_error(text(page), "id_topic_name") == sentence
    assert re.search(rf'name="name"[^>]*value="{re.escape(name)}"', text(page)) or not name.strip()
    assert Topic.objects.count() == 1


def test_another_owner_may_have_a_topic_of_the_same_name(browser, partner, topic, owner):
    partner.post("/bus/topics", {"name": "prices"})

    assert Topic.objects.filter(name="prices", owner=owner).exists()


def test_publishing_is_granted_to_another_owners_adapter_and_withdrawn(browser, topic, adapter):
    granted = browser.post(f"/bus/topics/{topic.pk}/publishers", {"adapter": str(adapter.pk)})
    after_grant = browser.get("/bus")
    browser.post(f"/bus/topics/{topic.pk}/publishers", {"adapter": str(adapter.pk)})
    again = browser.get("/bus")
    withdrawn = browser.post(f"/bus/topics/{topic.pk}/publishers/{adapter.pk}/withdraw")
    after_withdrawal = browser.get("/bus")
    browser.post(f"/bus/topics/{topic.pk}/publishers/{adapter.pk}/withdraw")

    assert granted["Location"] == withdrawn["Location"] == "/bus"
    assert flashed(after_grant) == [f"Adapter {adapter.pk} may now publish to prices."]
    assert f'<li data-adapter="{adapter.pk}">erp <small>#{adapter.pk}</small>' in card(
        after_grant, topic
    )
    assert f'action="/bus/topics/{topic.pk}/publishers/{adapter.pk}/withdraw"' in card(
        after_grant, topic
    )
    assert flashed(again) == [f"Adapter {adapter.pk} could publish to prices already."]
    assert flashed(after_withdrawal) == [f"Adapter {adapter.pk} may no longer publish to prices."]
    assert 'data-adapter="' not in card(after_withdrawal, topic)
    assert flashed(browser.get("/bus")) == ["This adapter has no grant to publish to this topic."]
    assert not TopicPublisher.objects.exists()


def test_a_subscriber_is_allowed_and_withdrawing_the_allowance_ends_its_subscription(
    browser, topic, adapter, partner
):
    allowed = browser.post(f"/bus/topics/{topic.pk}/subscribers", {"adapter": str(adapter.pk)})
    after = browser.get("/bus")
    partner.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(adapter.pk)})
    subscribed = Subscription.objects.filter(topic=topic, adapter=adapter).exists()
    browser.post(f"/bus/topics/{topic.pk}/subscribers/{adapter.pk}/withdraw")
    withdrawn = browser.get("/bus")
    browser.post(f"/bus/topics/{topic.pk}/subscribers/{adapter.pk}/withdraw")

    assert allowed["Location"] == "/bus"
    assert flashed(after) == [f"The owner of adapter {adapter.pk} may now subscribe it to prices."]
    assert f'<li data-adapter="{adapter.pk}">erp' in card(after, topic)
    assert subscribed
    assert flashed(withdrawn) == [
        f"Adapter {adapter.pk} may no longer subscribe to prices: its subscription, if it had one, "
        "ended."
    ]
    assert not Subscription.objects.exists()
    assert not TopicSubscriber.objects.exists()
    assert flashed(browser.get("/bus")) == [
        "This adapter is not allowed to subscribe to this topic."
    ]


@pytest.mark.parametrize("role", ["publishers", "subscribers"])
@pytest.mark.parametrize(
    ("typed", "sentence"),
    [
        ("", "Enter the number of another owner's adapter."),
        ("seven", "Enter the number of another owner's adapter."),
        ("7.5", "Enter the number of another owner's adapter."),
        ("0", "There is no adapter with this number."),
        ("9" * 30, "There is no adapter with this number."),
        ("2147483000", "There is no adapter with this number."),
        (
            "mine",
            "Your own adapters need no grant: they may publish to your topics and "
            "subscribe to them already.",
        ),
    ],
)
def test_a_refused_adapter_number_is_told_on_its_field_and_stays_typed(
    browser, topic, mine, role, typed, sentence
):
    value = str(mine.pk) if typed == "mine" else typed

    page = browser.post(f"/bus/topics/{topic.pk}/{role}", {"adapter": value})

    assert page.status_code == 200
    shown = card(page, topic)
    assert field_error(shown, f"id_topic_{topic.pk}_{role}_adapter") == sentence
    assert re.search(rf'name="adapter" value="{re.escape(value)}"', shown) or not value
    assert (
        f"<details open> <summary>{'Grant publishing' if role == 'publishers' else 'Allow a subscriber'}"
        in shown
    )
    assert not TopicPublisher.objects.exists()
    assert not TopicSubscriber.objects.exists()


def test_your_adapter_is_subscribed_to_every_type_then_to_some_and_unsubscribed(
    browser, topic, mine
):
    shown = card(browser.get("/bus"), topic)
    browser.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(mine.pk), "types": ""})
    every = browser.get("/bus")
    browser.post(
        f"/bus/topics/{topic.pk}/subscriptions",
        {"adapter": str(mine.pk), "types": "order.paid, order.created order.paid"},
    )
    some = browser.get("/bus")
    types = Subscription.objects.get(topic=topic, adapter=mine).types
    unsubscribed = browser.post(f"/bus/topics/{topic.pk}/subscriptions/{mine.pk}/delete")
    after = browser.get("/bus")
    browser.post(f"/bus/topics/{topic.pk}/subscriptions/{mine.pk}/delete")

    assert f'<option value="{mine.pk}">billing (#{mine.pk})</option>' in shown
    assert flashed(every) == [
        "billing is subscribed to prices: it gets a copy of every publication."
    ]
    assert (
        f'<li data-adapter="{mine.pk}">billing <small>#{mine.pk}</small>: '
        '<span class="types">every type</span>'
    ) in card(every, topic)
    assert types == ["order.created", "order.paid"]
    assert flashed(some) == [
        "billing now gets a copy of each publication to prices of the types order.created, "
        "order.paid."
    ]
    assert '<span class="types"><code>order.created</code>, <code>order.paid</code></span>' in card(
        some, topic
    )
    assert unsubscribed["Location"] == "/bus"
    assert flashed(after) == [f"Adapter {mine.pk} is no longer subscribed to prices."]
    assert "No adapter is subscribed." in card(after, topic)
    assert flashed(browser.get("/bus")) == ["This adapter has no subscription to this topic."]


def test_a_subscription_with_types_says_so_when_new(browser, topic, mine):
    browser.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(mine.pk), "types": "a b"})

    assert flashed(browser.get("/bus")) == [
        "billing is subscribed to prices: it gets a copy of each publication of the types a, b."
    ]


@pytest.mark.parametrize(
    ("adapter_of", "types", "field", "sentence"),
    [
        (
            "mine",
            " ".join(f"t{n}" for n in range(101)),
            "types",
            "Enter at most 100 message types.",
        ),
        ("mine", "ok " + "x" * 129, "types", "A message type is at most 128 characters long."),
        ("theirs", "", "adapter", "You have no adapter with this id."),
        ("nobody", "", "adapter", "You have no adapter with this id."),
        ("none", "", "adapter", "Choose one of your adapters."),
    ],
)
def test_a_refused_subscription_is_told_on_its_field_and_stays_typed(
    browser, topic, mine, adapter, adapter_of, types, field, sentence
):
    value = {"mine": str(mine.pk), "theirs": str(adapter.pk), "nobody": "2147483000"}.get(
        adapter_of, ""
    )

    page = browser.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": value, "types": types})

    assert page.status_code == 200
    shown = card(page, topic)
    assert field_error(shown, f"id_topic_{topic.pk}_subscriptions_{field}") == sentence
    if types:
        assert f'name="types" value="{types}"' in shown
    if adapter_of == "mine":
        assert f'<option value="{mine.pk}" selected>' in shown
    assert not Subscription.objects.exists()


def test_deleting_asks_first_and_deletes_only_on_the_confirmation(browser, topic, mine, adapter):
    TopicPublisher.objects.create(topic=topic, adapter=adapter)
    Subscription.objects.create(topic=topic, adapter=mine, types=None)

    asked = browser.get(f"/bus/topics/{topic.pk}/delete")
    kept = Topic.objects.filter(pk=topic.pk).exists()
    done = browser.post(f"/bus/topics/{topic.pk}/delete")
    page = browser.get("/bus")

    assert asked.status_code == 200
    assert "<h1>Delete the topic prices?</h1>" in text(asked)
    assert "<li>1 other owner's adapter granted publishing;</li>" in text(asked)
    assert "<li>0 other owners' adapters allowed to subscribe;</li>" in text(asked)
    assert "<li>1 subscription.</li>" in text(asked)
    assert '<button type="submit" class="danger">Delete the topic</button>' in text(asked)
    assert f'<a href="/bus#topic-{topic.pk}">Cancel</a>' in text(asked)
    assert kept
    assert done["Location"] == "/bus"
    assert not Topic.objects.exists()
    assert not Subscription.objects.exists()
    assert flashed(page) == [
        "The topic prices is deleted with its grants and subscriptions; the copies already in "
        "queues stay."
    ]
    assert cards(page) == []


def test_more_topics_cost_the_bus_no_more_queries(browser, person, mine, adapter):
    def queries_of_bus() -> int:
        with CaptureQueriesContext(connection) as run:
            assert browser.get("/bus").status_code == 200
        return len(run.captured_queries)

    def topic_with_everything(name: str) -> None:
        topic = Topic.objects.create(owner=person, name=name)
        TopicPublisher.objects.create(topic=topic, adapter=adapter)
        TopicSubscriber.objects.create(topic=topic, adapter=adapter)
        Subscription.objects.create(topic=topic, adapter=mine, types=["a"])

    topic_with_everything("first")
    one = queries_of_bus()
    for n in range(3):
        topic_with_everything(f"more-{n}")

    assert queries_of_bus() == one


def test_every_refusal_of_the_topic_forms_has_a_russian_sentence():
    tables = [
        topic_cards.TOPIC_CREATE,
        topic_cards.TOPIC_OWNER_ONLY,
        topic_cards.TOPIC_GRANT,
        topic_cards.PUBLISHER_REVOKE,
        topic_cards.SUBSCRIBER_DISALLOW,
        topic_cards.SUBSCRIPTION_PUT,
        topic_cards.SUBSCRIPTION_DELETE,
    ]
    for table in tables:
        for code, sentence in table.items():
            with translation.override("en"):
                english = str(sentence)
            with translation.override("ru"):
                assert str(sentence) != english, code


# What the Russian page may still show in Latin letters: names, logins, types, and the
# placeholder of the types' field.
LATIN = re.compile(r"[A-Za-z]{2,}")
NAMES = {"prices", "erp", "billing", "order", "paid"}


def latin_words(shown: str) -> set[str]:
    words = re.sub(r"<[^>]+>", " ", shown)
    return set(LATIN.findall(html.unescape(words))) - NAMES


def test_the_topics_speak_russian_on_the_bus_and_the_delete_page(
    person, owner, topic, mine, adapter
):
    TopicPublisher.objects.create(topic=topic, adapter=adapter)
    TopicSubscriber.objects.create(topic=topic, adapter=adapter)
    Subscription.objects.create(topic=topic, adapter=mine, types=["order.paid"])
    Subscription.objects.create(topic=topic, adapter=adapter, types=None)
    russian = signed_in(person, "ru")
    partner = signed_in(owner, "ru")

    page = russian.get("/bus")
    section = re.search(
        r'<section class="card" id="topics".*?(?=<section class="card topic")', text(page)
    )
    refused = russian.post(f"/bus/topics/{topic.pk}/publishers", {"adapter": "seven"})
    taken = russian.post("/bus/topics", {"name": "prices"})
    asked = russian.get(f"/bus/topics/{topic.pk}/delete")
    shared = partner.get("/bus")
    russian.post(f"/bus/topics/{topic.pk}/subscriptions", {"adapter": str(mine.pk)})

    assert section is not None
    assert '<h2 id="topics-title">Темы</h2>' in section.group(0)
    assert latin_words(section.group(0)) == set()
    assert latin_words(card(page, topic)) == set()
    assert latin_words(card(refused, topic)) == set()
    assert latin_words(card(shared, topic)) == set()
    main = re.search(r"<main.*</main>", text(asked))
    assert main is not None
    assert "<h1>Удалить тему prices?</h1>" in main.group(0)
    assert latin_words(main.group(0)) == set()
    assert field_error(text(taken), "id_topic_name") == (
        "У вас уже есть тема с таким названием."  # noqa: RUF001
    )
    assert flashed(russian.get("/bus")) == [
        "billing теперь получает копию каждой публикации в тему prices."
    ]
