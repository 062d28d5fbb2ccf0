"""An adapter's own page in Chromium (docs/cabinet.md, "An adapter's page"): reached from its card
on /bus, whose buttons all stay; a test message whose payload is markup, shown as text; the dead
letters' table within a 1280-px window, its boxes unchecked; discarding a dead letter and
deleting the adapter, each asked first; the same in Russian; and nothing the CSP refuses."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from exchange.models import DeadLetter, Message, Route
from exchange.services.sending import message_send
from tests.browser.conftest import HEIGHT, Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser

HOSTILE = '{"html": "</pre><script>document.title = \'owned\'</script>"}'
CARD_BUTTONS = (
    "Send a test message",
    "New password…",
    "End its sessions",
    "Purge the queue…",
    "Disable…",
)


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


@pytest.fixture
def billing(person: User) -> User:
    """An adapter with something to show: two messages waiting, a dead letter with a long id in
    its headers, and a route from another owner's adapter."""
    adapter = AdapterFactory.create(username="billing", owner=person, display_name="Invoices")
    other = UserFactory.create(username="other", email="other@example.com")
    shop = AdapterFactory.create(username="shop-7", owner=other, display_name="Web shop")
    Route.objects.create(recipient=adapter, sender=shop)
    for n, kind in enumerate(("invoice.created", "invoice.paid")):
        message_send(
            sender=adapter,
            to=adapter.pk,
            type=kind,
            payload={"invoice": 1000 + n, "lines": [{"sku": "A-1", "amount": "12.50"}]},
            headers={"trace-id": str(uuid.uuid4())},
            idempotency_key=None,
        )
    DeadLetter.objects.create(
        message_id=uuid.uuid4(),
        recipient=adapter,
        sender=shop,
        type="order.rejected." + "very-long-segment-" * 6,
        payload={"order": 77, "note": "x" * 600},
        headers={"correlation-id": "c" * 200, "source": "shop-7"},
        enqueued_at=timezone.now(),
        receive_count=10,
        reason="MAX_DELIVERIES",
    )
    return adapter


def test_an_owner_opens_an_adapters_page_from_its_card_whose_buttons_all_stay(
    page: Page,
    live_server: Any,
    billing: User,
    screenshots: Screenshots,
    refused_by_the_csp: list[str],
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    card = page.locator('section.adapter[data-login="billing"]')
    for name in CARD_BUTTONS:
        expect(
            card.get_by_role("button", name=name, exact=True).or_(
                card.get_by_role("link", name=name, exact=True)
            )
        ).to_be_visible()

    card.get_by_role("link", name="billing Invoices").click()

    expect(page).to_have_url(f"{live_server.url}/bus/adapters/{billing.pk}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("billing Invoices")
    expect(page.locator('[data-figure="available"]')).to_have_text("2")
    expect(page.locator('[data-figure="dead-letters"]')).to_have_text("1")
    expect(page.locator("#routes li[data-sender]")).to_have_text(
        "shop-7 Web shop #" + str(Route.objects.get().sender_id) + " Withdraw"
    )
    expect(page.locator("#traffic h2")).to_have_text("Traffic")
    screenshots.take(page, "adapter")
    assert screenshots.wider_than_the_phone == {}
    assert refused_by_the_csp == []


def test_a_test_message_whose_payload_is_markup_is_shown_as_text(
    page: Page, live_server: Any, billing: User, refused_by_the_csp: list[str]
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto(f"/bus/adapters/{billing.pk}")
    title = page.title()
    send = page.locator("#send")

    send.get_by_label("Type", exact=True).fill("markup.test")
    send.get_by_label("Payload (JSON)", exact=True).fill(HOSTILE)
    send.get_by_role("button", name="Send", exact=True).click()

    expect(page.locator(".message.success")).to_contain_text("is waiting for billing.")
    shown = page.locator("#waiting tr", has_text="markup.test").locator("pre.payload")
    expect(shown).to_have_text(
        '{\n  "html": "</pre><script>document.title = \'owned\'</script>"\n}'
    )
    assert page.title() == title  # the script in the payload never ran
    assert Message.objects.filter(recipient=billing, type="markup.test").exists()
    assert refused_by_the_csp == []


def test_the_dead_letters_table_fits_a_1280_px_window_with_its_boxes_unchecked(
    page: Page, live_server: Any, billing: User
) -> None:
    page.set_viewport_size({"width": 1280, "height": HEIGHT})
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    page.goto(f"/bus/adapters/{billing.pk}")
    table = page.locator("#dead-letters table")

    expect(table.locator("tbody tr")).to_have_count(1)
    box = table.get_by_role("checkbox")
    expect(box).not_to_be_checked()
    right = table.evaluate("table => table.getBoundingClientRect().right")
    assert right <= page.evaluate("window.innerWidth")
    assert table.evaluate("table => table.scrollWidth <= table.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    box.check()
    page.get_by_role("button", name="Send the selected back to the queue").click()
    expect(page.locator(".message.success")).to_have_text("1 message is back in its queue.")
    expect(page).to_have_url(f"{live_server.url}/bus/adapters/{billing.pk}")
    expect(page.locator('[data-figure="dead-letters"]')).to_have_text("0")


def test_in_russian_a_bad_payload_is_explained_a_dead_letter_discarded_and_the_adapter_deleted(
    page: Page, live_server: Any, billing: User, refused_by_the_csp: list[str]
) -> None:
    page.context.add_cookies([{"name": "django_language", "value": "ru", "url": live_server.url}])
    sign_in_russian(page)
    page.goto(f"/bus/adapters/{billing.pk}")
    send = page.locator("#send")
    payload = send.get_by_label("Содержимое (JSON)", exact=True)

    payload.fill("{text: hello}")
    send.get_by_role("button", name="Отправить", exact=True).click()
    expect(page.locator("#id_payload_error")).to_have_text(
        'Это не JSON. Введите, например, {"text": "Привет"}.'
    )
    expect(page.locator("#send").get_by_label("Содержимое (JSON)", exact=True)).to_have_value(
        "{text: hello}"
    )

    page.get_by_role("link", name="Удалить…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Удалить недоставленное сообщение адаптера billing?"
    )
    assert DeadLetter.objects.count() == 1  # asking deleted nothing
    page.get_by_role("button", name="Удалить его").click()  # noqa: RUF001
    expect(page.locator(".message.success")).to_have_text(
        "Удалено 1 недоставленное сообщение адаптера billing."
    )
    assert not DeadLetter.objects.exists()

    page.get_by_role("link", name="Удалить billing…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Удалить billing?")
    expect(page.locator("ul.goes")).to_contain_text(
        "его очередь: 2 ожидающих сообщения;"  # noqa: RUF001
    )
    page.get_by_role("button", name="Удалить адаптер").click()
    expect(page).to_have_url(f"{live_server.url}/bus")
    expect(page.locator(".message.success")).to_have_text("Адаптер billing удалён.")
    assert not User.objects.filter(pk=billing.pk).exists()
    assert refused_by_the_csp == []


def sign_in_russian(page: Page) -> None:
    page.goto("/login")
    page.get_by_label("Электронная почта или логин", exact=True).fill("grace@example.com")
    page.get_by_label("Пароль", exact=True).fill(DEFAULT_PASSWORD)
    page.get_by_role("button", name="Войти", exact=True).click()
    expect(page).to_have_url(re.compile(r"/bus$"))
