"""Staff sign in to the Django admin through the platform's gate: the same lock, counter, rate
limits, audit and second factor as the API and the cabinet; the lock is seen and lifted on the
user's admin page; a password an administrator sets acts like any other password change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client

from accounts.models import AuditEvent, Session, SignInGate, User
from tests.accounts.api import by_email, by_username
from tests.conftest import last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind
LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def staff(db: Any) -> User:
    return UserFactory.create(
        username="ops", email="ops@example.com", is_staff=True, is_superuser=True
    )


def admin_sign_in(client: Client, username: str, password: str) -> Any:
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})


def page_text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_a_staff_member_signs_in_to_the_admin_with_a_platform_session(staff, settings):
    settings.ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR = False  # tests/accounts/test_staff_two_factor.py
    client = Client()

    response = admin_sign_in(client, "ops", DEFAULT_PASSWORD)

    assert (response.status_code, response["Location"]) == (302, "/admin/")
    assert client.get("/admin/").status_code == 200
    assert Session.objects.filter(user=staff, revoked_at__isnull=True).count() == 1
    assert AuditEvent.objects.filter(user=staff, kind=Kind.SIGN_IN).exists()


def test_the_sixth_wrong_password_at_the_admin_says_locked_until_and_the_right_one_stays_out(
    staff,
):
    client = Client()

    answers = [admin_sign_in(client, "ops", f"wrong-{n}") for n in range(6)]
    right = admin_sign_in(client, "ops", DEFAULT_PASSWORD)

    for answer in answers[:5]:
        assert answer.status_code == 200
        assert "The e-mail, login or password is wrong." in page_text(answer)
    for answer in (answers[5], right):
        assert answer.status_code == 200
        assert "the account is locked until" in page_text(answer)
    assert client.get("/admin/").status_code == 302  # still signed out
    kinds = list(AuditEvent.objects.filter(user=staff).values_list("kind", flat=True))
    assert kinds.count(Kind.SIGN_IN_FAILED) == 5
    assert Kind.LOCKED in kinds


def test_the_admin_and_the_api_count_on_one_counter(staff):
    for _ in range(3):
        by_username("ops", "wrong")
    for _ in range(2):
        admin_sign_in(Client(), "ops@example.com", "wrong")

    api = by_username("ops")

    assert (api.status_code, api.json()["code"]) == (423, "ACCOUNT_LOCKED")


def test_the_admin_sign_in_is_rate_limited_per_account_like_the_api(staff, settings):
    settings.ACCOUNTS_RATE_LIMIT_ACCOUNT = "2/m"
    client = Client()

    answers = [admin_sign_in(client, "ops", "wrong") for _ in range(3)]

    assert "Too many attempts" not in page_text(answers[1])
    assert "Too many attempts. Try again in" in page_text(answers[2])
    assert SignInGate.objects.get().failures == 2  # the limited try never reached the gate


def test_an_account_that_is_not_staff_is_refused_at_the_admin_and_keeps_no_session(owner):
    client = Client()

    response = admin_sign_in(client, "owner", DEFAULT_PASSWORD)

    assert response.status_code == 200
    assert "This account cannot sign in to the administration." in page_text(response)
    assert not Session.objects.filter(user=owner).exists()
    assert client.get("/admin/").status_code == 302


def test_a_staff_member_with_two_factor_on_is_asked_for_the_sms_code_first(staff):
    staff.phone, staff.two_factor_enabled = "+4915123456789", True
    staff.save()
    client = Client()

    asked = admin_sign_in(client, "ops", DEFAULT_PASSWORD)

    assert asked.status_code == 302
    assert asked["Location"].startswith("/login/two-factor?requestId=")
    assert "next=%2Fadmin%2F" in asked["Location"]
    assert client.get("/admin/").status_code == 302  # not in before the code
    confirmed = client.post(asked["Location"], {"code": last_code("+4915123456789")})
    assert (confirmed.status_code, confirmed["Location"]) == (302, "/admin/")
    assert client.get("/admin/").status_code == 200


def test_revoking_the_admins_session_signs_the_admin_out(staff, admin_client):
    client = Client()
    admin_sign_in(client, "ops", DEFAULT_PASSWORD)
    session = Session.objects.get(user=staff)

    admin_client.post(
        "/admin/accounts/session/", {"action": "revoke", "_selected_action": [session.pk]}
    )

    assert client.get("/admin/").status_code == 302


def test_the_users_admin_page_shows_the_lock_and_its_unlock_button_lifts_it(
    staff, owner, admin_client
):
    for _ in range(5):
        by_email(owner.email, "x")
    page = admin_client.get(f"/admin/accounts/user/{owner.pk}/change/")
    assert AccessAttempt.objects.filter(username=owner.username).exists()

    unlocked = admin_client.post(f"/admin/accounts/user/{owner.pk}/unlock/")

    assert "Locked until" in page_text(page)
    assert f'formaction="/admin/accounts/user/{owner.pk}/unlock/"' in page.content.decode()
    assert unlocked.status_code == 302
    assert not SignInGate.objects.exists()
    assert not AccessAttempt.objects.filter(username=owner.username).exists()
    assert AuditEvent.objects.filter(user=owner, kind=Kind.UNLOCKED, actor__username="root")
    after = admin_client.get(f"/admin/accounts/user/{owner.pk}/change/")
    assert "Not locked (0 wrong passwords in a row)." in page_text(after)
    signed_in = by_email(owner.email)
    assert signed_in.status_code == 200


def test_unlock_answers_only_a_post(owner, admin_client):
    assert admin_client.get(f"/admin/accounts/user/{owner.pk}/unlock/").status_code == 405


@pytest.mark.parametrize(
    "path",
    ["/admin/axes/accessattempt/", "/admin/axes/accesslog/", "/admin/axes/accessfailurelog/"],
)
def test_django_axes_pages_say_the_lock_is_the_platforms_gate(admin_client, path):
    page = admin_client.get(path)

    assert page.status_code == 200
    assert "The lock itself is the platform's sign-in gate" in page_text(page)


def test_a_password_set_by_an_administrator_ends_the_users_sessions_and_is_audited(
    owner, cabinet, admin_client
):
    response = admin_client.post(
        f"/admin/accounts/user/{owner.pk}/password/",
        {
            "usable_password": "true",
            "password1": "a-new-and-unusual-passphrase",
            "password2": "a-new-and-unusual-passphrase",
        },
    )

    assert response.status_code == 302
    assert (cabinet.call("get", "/api/users/me").json()["code"]) == "TOKEN_REVOKED"
    assert AuditEvent.objects.filter(
        user=owner, kind=Kind.PASSWORD_CHANGED, actor__username="root"
    ).exists()
    signed_in = by_email(owner.email, "a-new-and-unusual-passphrase")
    assert signed_in.status_code == 200


def test_an_invalid_password_in_the_admins_form_changes_nothing(owner, cabinet, admin_client):
    response = admin_client.post(
        f"/admin/accounts/user/{owner.pk}/password/",
        {"usable_password": "true", "password1": "short", "password2": "short"},
    )

    assert response.status_code == 200
    assert cabinet.call("get", "/api/users/me").status_code == 200
    assert not AuditEvent.objects.filter(user=owner, kind=Kind.PASSWORD_CHANGED).exists()
