"""The administration in Chromium at a laptop's 1280 x 800: the users' list fits the window, every
column's header in sight."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Page

from accounts.models import SignInGate, User
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.browser


@pytest.fixture
def admin_page(page: Page, live_server: Any, transactional_db: None) -> Page:
    """``page`` at 1280 x 800, signed in to the administration as a superuser with a second
    factor (the session cookie of Django's test client)."""
    root = UserFactory.create(
        username="root",
        email="root@example.com",
        is_staff=True,
        is_superuser=True,
        phone="+4915199999999",
        two_factor_enabled=True,
        code_factor="SMS",
    )
    client = Client()
    client.force_login(root)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies(
        [{"name": django_settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
    )
    page.set_viewport_size({"width": 1280, "height": 800})
    return page


def test_the_users_list_fits_a_1280_pixel_window_with_every_header_in_sight(
    admin_page: Page,
) -> None:
    signed_in = timezone.now()
    owner: User = UserFactory.create(
        username="margaret.hamilton-long-login@example-software-house.com",
        email="margaret.hamilton-long-login@example-software-house.com",
        last_login=signed_in,
    )
    AdapterFactory.create(
        username="erp-billing-bridge-production-eu-central", owner=owner, last_login=signed_in
    )
    SignInGate.objects.create(
        key=f"user:{owner.pk}", failures=5, locked_until=signed_in + timedelta(minutes=15)
    )

    admin_page.goto("/admin/accounts/user/")

    window = admin_page.evaluate("window.innerWidth")
    right = admin_page.evaluate(
        "document.querySelector('#result_list').getBoundingClientRect().right"
    )
    # Each header whole inside the list's box, which scrolls what is wider than it: nothing cut
    # off at its right edge, nothing under the filters.
    hidden = admin_page.evaluate(
        """(() => {
            const shown = document.querySelector('#changelist .results').getBoundingClientRect();
            return Array.from(document.querySelectorAll('#result_list thead th')).filter((th) => {
                const box = th.getBoundingClientRect();
                return box.width === 0 || box.left < shown.left || box.right > shown.right;
            }).map((th) => th.textContent.trim());
        })()"""
    )
    headers = admin_page.locator("#result_list thead th").all_text_contents()
    assert right <= window
    assert hidden == []
    assert [header.strip() for header in headers] == [
        "",
        "Login and e-mail",
        "Kind",
        "Owner",
        "Active",
        "2FA",
        "Locked",
        "Last login",
    ]
