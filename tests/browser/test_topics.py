"""The topics of /bus in Chromium: an owner creates a topic (a name taken told on its field),
grants another owner's adapter publishing, allows it to subscribe, subscribes an adapter of their
own to some types; the other owner sees their part of it and subscribes their adapter; the owner
deletes it after a confirmation. The section fits a 1280-px window in both languages."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from exchange.models import Subscription, Topic
from tests.browser.conftest import HEIGHT, Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser

WINDOW = 1280


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


@pytest.fixture
def partner(transactional_db: None) -> User:
    return UserFactory.create(username="lin", email="lin@example.com", phone="+4915123456780")


def fits_the_window(page: Page) -> bool:
    return bool(page.evaluate(f"document.documentElement.scrollWidth <= {WINDOW}"))


def test_an_owner_shares_a_topic_the_other_owner_subscribes_and_the_owner_deletes_it(
    page: Page, live_server: Any, person: User, partner: User, screenshots: Screenshots
) -> None:
    billing = AdapterFactory.create(username="billing", owner=person)
    erp = AdapterFactory.create(username="erp", owner=partner)
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    topics = page.locator("#topics")

    name = topics.get_by_label("Name", exact=True)
    name.fill("prices")
    topics.get_by_role("button", name="Create a topic", exact=True).click()
    expect(page.locator(".message.success")).to_contain_text("The topic prices is created")
    name.fill("prices")
    topics.get_by_role("button", name="Create a topic", exact=True).click()
    expect(page.locator("#id_topic_name_error")).to_have_text(
        "You have a topic with this name already."
    )
    expect(name).to_have_value("prices")

    topic = Topic.objects.get(owner=person, name="prices")
    card = page.locator(f"#topic-{topic.pk}")
    expect(card.locator(".badge.ok")).to_have_text("yours")
    card.locator("summary", has_text="Grant publishing").click()
    card.get_by_label("Number of the adapter that may publish", exact=True).fill(str(erp.pk))
    card.get_by_role("button", name="Grant publishing", exact=True).click()
    expect(page.locator(".message.success")).to_have_text(
        f"Adapter {erp.pk} may now publish to prices."
    )
    card.locator("summary", has_text="Allow a subscriber").click()
    card.get_by_label("Number of the adapter that may subscribe", exact=True).fill(str(erp.pk))
    card.get_by_role("button", name="Allow to subscribe", exact=True).click()
    card.get_by_label("Adapter", exact=True).select_option(str(billing.pk))
    card.get_by_label("Message types (optional)", exact=True).fill("order.paid, order.created")
    card.get_by_role("button", name="Subscribe", exact=True).click()
    expect(card.locator(f'ul.subscriptions li[data-adapter="{billing.pk}"] .types')).to_have_text(
        "order.created, order.paid"
    )
    expect(card.locator(f'ul.granted li[data-adapter="{erp.pk}"]')).to_have_count(2)
    screenshots.take(page, "bus-topics")
    assert screenshots.wider_than_the_phone == {}
    page.set_viewport_size({"width": WINDOW, "height": HEIGHT})
    assert fits_the_window(page)
    page.context.add_cookies([{"name": "django_language", "value": "ru", "url": live_server.url}])
    page.reload()
    expect(page.locator("#topics-title")).to_have_text("Темы")
    assert fits_the_window(page)
    page.context.clear_cookies()

    sign_in(page, "lin@example.com", DEFAULT_PASSWORD)
    expect(card.locator(".badge")).to_have_text("shared with you")
    expect(card.get_by_text("Grant publishing")).to_have_count(0)
    expect(card.get_by_role("button", name="Delete the topic…")).to_have_count(0)
    expect(card.get_by_text("billing")).to_have_count(0)
    card.get_by_role("button", name="Subscribe", exact=True).click()  # erp, the one allowed
    expect(card.locator(f'ul.subscriptions li[data-adapter="{erp.pk}"] .types')).to_have_text(
        "every type"
    )
    assert Subscription.objects.get(topic=topic, adapter=erp).types is None
    page.context.clear_cookies()

    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(card.locator("ul.subscriptions li")).to_have_count(2)
    card.get_by_role("button", name="Delete the topic…").click()
    expect(page.get_by_role("heading", name="Delete the topic prices?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    expect(card).to_be_visible()
    card.get_by_role("button", name="Delete the topic…").click()
    page.get_by_role("button", name="Delete the topic", exact=True).click()
    expect(page.locator(".message.success")).to_contain_text("The topic prices is deleted")
    expect(page.locator("section.topic")).to_have_count(0)
    assert not Subscription.objects.exists()
