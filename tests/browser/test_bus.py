"""/bus in Chromium as an owner meets it: a refused login shown on its field, the new password
and the disabling that ask first, who is signed in, an adapter's webhook, and the icon every page
asks for."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.models import User
from exchange.models import WebhookAttempt
from tests.browser.conftest import HEIGHT, Screenshots, sign_in
from tests.factories import DEFAULT_PASSWORD, AdapterFactory, UserFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def person(transactional_db: None) -> User:
    return UserFactory.create(username="grace", email="grace@example.com", phone="+4915123456789")


def test_an_owner_fixes_a_refused_login_and_confirms_a_new_password_before_it_is_set(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    expect(page.locator("#signed-in-as")).to_have_text("Signed in as grace@example.com")

    login = page.get_by_label("Login (optional)", exact=True)
    login.fill("bad login!")
    page.get_by_role("button", name="Create an adapter", exact=True).click()
    expect(page.locator("#id_login_error")).to_contain_text("Enter a valid username.")
    expect(login).to_have_value("bad login!")
    screenshots.take(page, "bus-invalid-login")

    login.fill("billing")
    page.get_by_role("button", name="Create an adapter", exact=True).click()
    first = page.locator("#credential-password").inner_text().strip()
    adapter = page.locator('section.adapter[data-login="billing"]')

    adapter.get_by_role("button", name="New password…").click()
    expect(page.get_by_role("heading", name="Give billing a new password?")).to_be_visible()
    screenshots.take(page, "bus-rotate-confirm")
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator("#credential-password")).to_have_count(0)
    assert User.objects.get(username="billing").check_password(first)

    adapter.get_by_role("button", name="New password…").click()
    page.get_by_role("button", name="Set a new password", exact=True).click()
    second = page.locator("#credential-password").inner_text().strip()
    assert second != first
    assert User.objects.get(username="billing").check_password(second)

    adapter.get_by_role("button", name="Disable…").click()
    expect(page.get_by_role("heading", name="Disable billing?")).to_be_visible()
    assert User.objects.get(username="billing").is_active
    page.get_by_role("button", name="Disable", exact=True).click()
    expect(adapter.locator(".badge.off")).to_have_text("disabled")
    assert screenshots.wider_than_the_phone == {}


def test_an_owner_sets_up_a_webhook_sees_its_secret_once_and_sends_it_a_test_event(
    page: Page, live_server: Any, person: User, screenshots: Screenshots
) -> None:
    adapter = AdapterFactory.create(username="billing", owner=person)
    sign_in(page, "grace@example.com", DEFAULT_PASSWORD)
    webhook = page.locator(f"#webhook-{adapter.pk}")

    webhook.get_by_label("Webhook URL", exact=True).fill("https://hooks.example.com/billing")
    webhook.get_by_role("button", name="Set up a webhook", exact=True).click()

    expect(page.get_by_role("heading", name="Webhook secret of billing")).to_be_visible()
    expect(page.locator("#webhook-secret")).to_contain_text("whsec_")
    expect(webhook.locator(".badge.ok")).to_have_text("on")
    screenshots.take(page, "bus-webhook")
    webhook.get_by_role("button", name="Send a test event", exact=True).click()
    expect(page.locator(".message.success")).to_have_text(
        re.compile(r"A test event [0-9a-f-]{36} is queued for the webhook of billing\.")
    )
    expect(page.locator("#webhook-secret")).to_have_count(0)
    assert screenshots.wider_than_the_phone == {}

    # The log's twenty rows, with errors as long as the deliverer writes, fit a 1280-px window,
    # in both languages.
    now = timezone.now()
    WebhookAttempt.objects.bulk_create(
        WebhookAttempt(
            adapter=adapter,
            message_id=uuid.uuid4(),
            attempt=n + 1,
            at=now + timedelta(seconds=n),
            status=503,
            outcome="failed",
            latency_ms=15000,
            error="HTTP 503: " + "upstream unavailable " * 10,
        )
        for n in range(20)
    )
    page.set_viewport_size({"width": 1280, "height": HEIGHT})
    page.reload()
    webhook.get_by_text("Delivery log", exact=True).click()
    log = webhook.locator("table.log")
    expect(log.locator("tbody tr")).to_have_count(20)
    assert log.evaluate("table => table.scrollWidth <= table.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.context.add_cookies([{"name": "django_language", "value": "ru", "url": live_server.url}])
    page.reload()
    webhook.get_by_text("Журнал доставок", exact=True).click()
    assert log.evaluate("table => table.scrollWidth <= table.clientWidth")


def test_the_favicon_is_served_wherever_a_browser_asks(page: Page, live_server: Any) -> None:
    for path in ("/favicon.ico", "/static/favicon.ico"):
        answer = page.request.get(path)
        assert answer.status == 200, path
        assert answer.body()[:4] == b"\0\0\1\0"

    page.goto("/login")
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).status == 200
