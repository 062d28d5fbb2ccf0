"""What a sign-in writes besides its session and audit event, written once by the sign-in service
whichever door it came through (docs/sessions.md, "What a sign-in writes"): the account's
last_login, and django-axes' record of the attempt for the admin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessLog
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from accounts.models import User
from tests.accounts.api import by_email
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "ops@example.com"


def through_the_api(password: str) -> None:
    by_email(EMAIL, password)


def through_the_cabinet(password: str) -> None:
    Client().post("/login", {"login": EMAIL, "password": password})


def through_the_admin(password: str) -> None:
    Client().post("/admin/login/?next=/admin/", {"username": EMAIL, "password": password})


DOORS: dict[str, Callable[[str], None]] = {
    "api": through_the_api,
    "cabinet": through_the_cabinet,
    "admin": through_the_admin,
}
doors = pytest.mark.parametrize("door", list(DOORS.values()), ids=list(DOORS))


@pytest.fixture
def staff(db: Any) -> User:
    return UserFactory.create(username="ops", email=EMAIL, is_staff=True)


def last_login_writes(queries: CaptureQueriesContext) -> int:
    return sum(
        query["sql"].startswith('UPDATE "accounts_user" SET "last_login"')
        for query in queries.captured_queries
    )


@doors
def test_a_sign_in_writes_last_login_and_one_axes_record_once(
    staff: User, door: Callable[[str], None]
) -> None:
    with CaptureQueriesContext(connection) as queries:
        door(DEFAULT_PASSWORD)

    staff.refresh_from_db()
    assert staff.last_login is not None
    assert last_login_writes(queries) == 1
    assert list(AccessLog.objects.values_list("username", flat=True)) == ["ops"]


@doors
def test_a_wrong_password_writes_one_axes_failure_and_no_last_login(
    staff: User, door: Callable[[str], None]
) -> None:
    with CaptureQueriesContext(connection) as queries:
        door("wrong")

    assert last_login_writes(queries) == 0
    assert [(a.username, a.failures_since_start) for a in AccessAttempt.objects.all()] == [
        ("ops", 1)
    ]
    assert not AccessLog.objects.exists()
