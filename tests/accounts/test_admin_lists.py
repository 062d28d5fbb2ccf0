"""The administration's lists as an administrator reads them: every time with its zone, the users'
lock as a column and a filter, and the sign-in gates named by the accounts they count for
(docs/operations.md, "The administration")."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import AuditEvent, Session, SignInGate, User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 21, 9, 30, 5, tzinfo=UTC)
SHOWN = "2026-11-21 09:30:05 UTC"
# The list's first column: the login, a link, and under it the address when it is not the login.
ACCOUNT = r'<th class="field-account"><a href="[^"]+">([^<]+)(?:<br>[^<]*)?</a>'


def text(response: Any) -> str:
    assert response.status_code == 200
    return str(response.content.decode())


def listed(page: str) -> list[str]:
    """The logins in the users' list, in its order."""
    return re.findall(ACCOUNT, page)


@pytest.fixture
def ada() -> User:
    return UserFactory.create(username="ada", email="ada@example.com", last_login=NOW)


def test_every_time_in_the_lists_and_on_the_forms_says_its_zone(admin_client, ada):
    AuditEvent.objects.create(kind=AuditEvent.Kind.SIGN_IN, user=ada, created_at=NOW)
    Session.objects.filter(user=ada).delete()
    User.objects.filter(pk=ada.pk).update(date_joined=NOW)

    users = text(admin_client.get("/admin/accounts/user/"))
    change = text(admin_client.get(f"/admin/accounts/user/{ada.pk}/change/"))
    audit = text(admin_client.get("/admin/accounts/auditevent/"))
    event = AuditEvent.objects.get(user=ada)
    audit_event = text(admin_client.get(f"/admin/accounts/auditevent/{event.pk}/change/"))

    assert f'<td class="field-last_login nowrap">{SHOWN}</td>' in users
    assert f'<div class="readonly">{SHOWN}</div>' in change  # last login, date joined
    assert f"{SHOWN}</a></th>" in audit  # the list's first column, a link
    assert f'<div class="readonly">{SHOWN}</div>' in audit_event


def test_the_users_list_says_who_is_locked_now_and_filters_by_it(admin_client, ada):
    grace = UserFactory.create(username="grace", email="grace@example.com")
    UserFactory.create(username="lovelace", email="lovelace@example.com")
    with time_machine.travel(NOW, tick=False):
        SignInGate.objects.create(
            key=f"user:{ada.pk}", failures=5, locked_until=NOW + timedelta(minutes=15)
        )
        # A lock that has run out is no lock: the next sign-in counts afresh.
        SignInGate.objects.create(
            key=f"user:{grace.pk}", failures=5, locked_until=NOW - timedelta(seconds=1)
        )

        everyone = text(admin_client.get("/admin/accounts/user/"))
        locked = text(admin_client.get("/admin/accounts/user/?locked=yes"))
        not_locked = text(admin_client.get("/admin/accounts/user/?locked=no"))

    assert '<th scope="col" class="sortable column-locked">' in everyone
    rows = dict(
        re.findall(
            ACCOUNT + r'.*?<td class="field-locked"><img src="[^"]+icon-(yes|no)\.svg"',
            everyone,
            re.S,
        )
    )
    assert rows == {"ada": "yes", "grace": "no", "lovelace": "no", "root": "no"}
    assert listed(locked) == ["ada"]
    assert listed(not_locked) == ["grace", "lovelace", "root"]


def test_the_sign_in_gates_name_the_accounts_they_count_for_in_one_query(admin_client, ada):
    SignInGate.objects.create(key=f"user:{ada.pk}", failures=2)
    SignInGate.objects.create(key="unknown:ghost@example.com", failures=1)
    SignInGate.objects.create(key="device:7f3a", failures=1)
    admin_client.get("/admin/accounts/signingate/")

    with CaptureQueriesContext(connection) as three_gates:
        page = text(admin_client.get("/admin/accounts/signingate/"))
    for failures in range(5):
        SignInGate.objects.create(key=f"user:{UserFactory.create().pk}", failures=failures)
    with CaptureQueriesContext(connection) as eight_gates:
        text(admin_client.get("/admin/accounts/signingate/"))

    assert len(eight_gates.captured_queries) == len(three_gates.captured_queries)
    shown = re.findall(r'<th class="field-counts_for"><a href="[^"]+">([^<]+)</a>', page)
    assert sorted(shown) == ["ada", "device:7f3a", "unknown:ghost@example.com"]
