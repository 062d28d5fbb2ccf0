"""The traffic charts in Chromium (docs/cabinet.md, "Traffic charts"): drawn on /bus and on an
adapter's page, switched between ranges by a link, inside their cards at 1280 px, in both
languages, and nothing the pages' Content-Security-Policy refuses."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from accounts.models import User
from exchange.services.messages import messages_ack, messages_receive
from exchange.services.sending import message_send
from tests.browser.conftest import HEIGHT, sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


@pytest.fixture
def billing(person: User) -> User:
    """An adapter with traffic this minute: 5 sent to it, 3 received, 2 acknowledged."""
    adapter = AdapterFactory.create(username="billing", owner=person)
    crm = AdapterFactory.create(username="crm", owner=person)
    for n in range(5):
        message_send(
            sender=crm, to=adapter.pk, type="t", payload={"n": n}, headers={}, idempotency_key=None
        )
    held = messages_receive(adapter=adapter, device_key="d:1", max_messages=3, lease_seconds=60)
    messages_ack(adapter=adapter, device_key="d:1", message_ids=[d.message_id for d in held[:2]])
    return adapter


def test_bus_draws_each_adapters_traffic_and_switches_its_range(
    page: Page, live_server: Any, billing: User, refused_by_the_csp: list[str]
) -> None:
    page.set_viewport_size({"width": 1280, "height": HEIGHT})
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)

    card = page.locator(f"#adapter-{billing.pk}")
    messages = card.locator(f"#traffic-{billing.pk}-messages")
    expect(messages).to_contain_text("Messages per minute (last hour)")
    expect(messages.locator("svg")).to_have_accessible_name(
        "Messages per minute (last hour) In all: sent 0, received 3, acknowledged 2, "
        "dead-lettered 0, refused 0."
    )
    for label in ("Sent", "Received", "Acknowledged", "Dead-lettered", "Refused"):
        expect(messages.locator(".legend")).to_contain_text(label)
    depth = card.locator(f"#traffic-{billing.pk}-depth")
    expect(depth.locator("svg")).to_have_accessible_name(
        "Queue depth (last hour) Messages in the queue now: 3."
    )
    drawn = messages.locator("svg").bounding_box()
    inside = card.bounding_box()
    assert drawn is not None
    assert inside is not None
    assert drawn["width"] > 200
    assert drawn["height"] > 50
    assert drawn["x"] + drawn["width"] <= inside["x"] + inside["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    page.get_by_role("link", name="7 days", exact=True).click()

    expect(page).to_have_url(f"{live_server.url}/bus?range=7d#traffic")
    expect(messages).to_contain_text("Messages per hour (7 days)")
    expect(page.get_by_role("link", name="7 days", exact=True)).to_have_attribute(
        "aria-current", "true"
    )
    assert refused_by_the_csp == []


def test_an_adapters_page_draws_its_traffic_in_russian(
    browser: Browser, live_server: Any, billing: User
) -> None:
    context = browser.new_context(
        base_url=live_server.url, locale="ru-RU", viewport={"width": 1280, "height": HEIGHT}
    )
    page = context.new_page()
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    try:
        sign_in_russian(page)
        page.goto(f"/bus/adapters/{billing.pk}?range=24h")

        section = page.locator("#traffic")
        expect(section.locator("#traffic-messages")).to_contain_text(
            "Сообщений за 5 минут (24 часа)"
        )
        expect(section.locator("#traffic-depth")).to_contain_text("Глубина очереди")
        expect(section.get_by_role("link", name="24 часа", exact=True)).to_have_attribute(
            "aria-current", "true"
        )
        for label in ("Отправлено", "Получено", "Подтверждено", "Недоставлено", "Отклонено"):
            expect(section.locator("#traffic-messages .legend")).to_contain_text(label)
        # The x axis of a day: every three hours, in UTC.
        labels = section.locator("#traffic-messages .x-label").all_text_contents()
        assert len(labels) in {8, 9}
        assert all(label.endswith(":00") for label in labels)
        assert refused == []
    finally:
        context.close()


def sign_in_russian(page: Page) -> None:
    page.goto("/login")
    page.get_by_label("Электронная почта или логин", exact=True).fill("grace@example.com")
    page.get_by_label("Пароль", exact=True).fill(DEFAULT_PASSWORD)
    page.get_by_role("button", name="Войти", exact=True).click()
    expect(page.locator("h1")).to_have_text("Адаптеры")
