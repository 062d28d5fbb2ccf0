"""The route form of an adapter's card on /bus in Chromium (docs/cabinet.md): the owner types another
owner's adapter's login; a login that names no adapter, or one of their own, stays typed with the
reason under the field; the granted route is listed by login and display name."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts.models import User
from exchange.models import Route
from tests.browser.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


def test_an_owner_grants_a_route_by_login_after_fixing_a_refused_one(
    page: Page, live_server: Any, person: User
) -> None:
    billing = AdapterFactory.create(username="billing", owner=person, display_name="Invoices")
    AdapterFactory.create(username="crm", owner=person)
    other = UserFactory.create(username="other", email="other@example.com")
    shop = AdapterFactory.create(username="shop-7", owner=other, display_name="Web shop")
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)

    card = page.locator('section.adapter[data-login="billing"]')
    expect(card.get_by_role("heading", level=2)).to_contain_text("billing Invoices")
    card.get_by_text("Routes from other owners' adapters").click()
    sender = card.get_by_label("Login of the adapter that may send", exact=True)
    error = page.locator(f"#id_route_{billing.pk}_sender_error")

    sender.fill("shop-8")
    card.get_by_role("button", name="Grant", exact=True).click()
    expect(error).to_have_text("There is no adapter with this login.")
    expect(sender).to_have_value("shop-8")
    expect(sender).to_be_visible()  # the section stays open on its error

    sender.fill("crm")
    card.get_by_role("button", name="Grant", exact=True).click()
    expect(error).to_contain_text("This is one of your adapters")
    expect(sender).to_have_value("crm")

    sender.fill("shop-7")
    card.get_by_role("button", name="Grant", exact=True).click()
    expect(page.get_by_text("shop-7 may now send to billing.")).to_be_visible()
    card.get_by_text("Routes from other owners' adapters").click()
    expect(card.locator(f'li[data-sender="{shop.pk}"]')).to_contain_text("shop-7 Web shop")
    assert Route.objects.get(recipient=billing).sender == shop
