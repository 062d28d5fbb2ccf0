"""Staff must hold a second factor (ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR, docs/sessions.md): a
staff account without one is sent to set one up before any admin page opens."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def bare_staff(db: Any) -> Client:
    """A staff account without a second factor, signed in to the cabinet."""
    client = Client()
    client.force_login(UserFactory.create(username="operator", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize(
    "page", ["/admin/", "/admin/accounts/user/", "/admin/accounts/auditevent/"]
)
def test_a_staff_account_without_a_second_factor_is_sent_to_set_one_up(bare_staff, page):
    response = bare_staff.get(page)

    assert response.status_code == 302
    assert response["Location"].startswith("/settings/security?next=")
    assert page.replace("/", "%2F") in response["Location"]


def test_signing_out_of_the_admin_needs_no_second_factor(bare_staff):
    response = bare_staff.post("/admin/logout/")

    assert response.status_code == 200
    assert "_auth_user_id" not in bare_staff.session


def test_with_a_second_factor_the_admin_opens(admin_client):
    assert admin_client.get("/admin/").status_code == 200


def test_the_requirement_can_be_turned_off(bare_staff, settings):
    settings.ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR = False

    assert bare_staff.get("/admin/").status_code == 200


def test_it_is_on_by_default_unless_debug():
    from platform_site import settings as defaults

    assert defaults.ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR is not defaults.DEBUG
