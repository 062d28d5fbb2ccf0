"""The administration: the users' list and forms, administrators' actions on cabinet users, each
audited; the audit log and its counter (docs/sessions.md, "The audit log"); the development
outbox. Staff signing in to it: test_admin_sign_in.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from accounts.models import AuditEvent, OutboxMessage, Session, SignInGate, User
from tests.accounts import api
from tests.accounts.api import by_email, outcome, reset
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD, AdapterFactory

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind


@pytest.fixture
def signed_in(person: User) -> ApiClient:
    return api.signed_in(person.email, device="grace-laptop")


def act(admin_client: Any, action: str, user: User) -> None:
    response = admin_client.post(
        "/admin/accounts/user/", {"action": action, "_selected_action": [user.pk]}
    )
    assert response.status_code == 302


def events(user: User) -> list[tuple[str, str | None]]:
    return [
        (event.kind, event.actor.username if event.actor else None)
        for event in AuditEvent.objects.filter(user=user).order_by("pk")
    ]


def test_admin_lists_and_edits_users(admin_client):
    adapter = AdapterFactory.create(username="billing-bridge")

    listing = admin_client.get("/admin/accounts/user/?kind__exact=ADAPTER")
    change = admin_client.get(f"/admin/accounts/user/{adapter.pk}/change/")

    assert listing.status_code == 200
    assert "billing-bridge" in listing.content.decode()
    assert change.status_code == 200
    assert "reset_password_required" in change.content.decode()


def test_admin_creates_a_cabinet_user(admin_client):
    response = admin_client.post(
        "/admin/accounts/user/add/",
        {
            "username": "grace",
            "email": "grace@example.com",
            "usable_password": "true",
            "password1": "a long and unusual passphrase",
            "password2": "a long and unusual passphrase",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    grace = User.objects.get(username="grace")
    assert grace.kind == User.Kind.USER
    assert grace.check_password("a long and unusual passphrase")


@pytest.mark.parametrize(
    "path",
    [
        "/admin/accounts/auditevent/",
        "/admin/accounts/outboxmessage/",
        "/admin/accounts/challenge/",
        "/admin/accounts/auditevent/?kind__exact=SIGN_IN",
    ],
)
def test_the_audit_log_outbox_and_challenges_are_readable_in_the_admin(
    admin_client, signed_in, person, path
):
    reset(person.email)

    page = admin_client.get(path)

    assert page.status_code == 200
    assert b"grace" in page.content


def test_audit_records_are_read_only_in_the_admin(admin_client, signed_in, person):
    event = AuditEvent.objects.get(user=person, kind=Kind.SIGN_IN)

    assert admin_client.get("/admin/accounts/auditevent/add/").status_code == 403
    assert admin_client.post(f"/admin/accounts/auditevent/{event.pk}/delete/").status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_requiring_a_password_change_restricts_the_live_session_at_once(
    admin_client, admin_user, signed_in, person
):
    act(admin_client, "require_password_change", person)

    assert outcome(signed_in.call("get", "/api/users/sessions")) == (
        403,
        "PASSWORD_CHANGE_REQUIRED",
    )
    assert signed_in.refresh().status_code == 200
    assert signed_in.call("get", "/api/users/me").json()["roles"] == [
        "USER_PASSWORD_RESET_REQUIRED"
    ]
    assert (Kind.PASSWORD_CHANGE_REQUIRED, "root") in events(person)


def test_disabling_ends_sessions_and_sign_in_says_disabled(admin_client, signed_in, person):
    act(admin_client, "disable", person)

    assert outcome(signed_in.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    again = by_email(person.email)
    assert outcome(again) == (403, "ACCOUNT_DISABLED")
    act(admin_client, "enable", person)
    assert (Kind.ACCOUNT_DISABLED, "root") in events(person)
    assert (Kind.ACCOUNT_ENABLED, "root") in events(person)


def test_expiring_credentials_sends_the_next_sign_in_to_password_reset(admin_client, person):
    act(admin_client, "expire_credentials", person)

    response = by_email(person.email)
    assert outcome(response) == (401, "ACTION_RESET_PASSWORD")
    assert (Kind.CREDENTIALS_EXPIRY_SET, "root") in events(person)


def test_expiring_an_account_ends_its_sessions(admin_client, signed_in, person):
    act(admin_client, "expire_account", person)

    assert outcome(signed_in.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    response = by_email(person.email)
    assert outcome(response) == (403, "ACCOUNT_EXPIRED")
    assert (Kind.ACCOUNT_EXPIRY_SET, "root") in events(person)


def test_unlock_and_revoke_sessions_are_audited(admin_client, signed_in, person):
    for _ in range(5):
        by_email(person.email, "x")
    assert SignInGate.objects.get().locked_until is not None

    act(admin_client, "unlock", person)
    act(admin_client, "revoke_sessions", person)

    assert not SignInGate.objects.exists()
    assert outcome(signed_in.call("get", "/api/users/me")) == (401, "TOKEN_REVOKED")
    kinds = [kind for kind, _ in events(person)]
    assert kinds.count(Kind.SIGN_IN_FAILED) == 5
    assert Kind.LOCKED in kinds
    assert (Kind.UNLOCKED, "root") in events(person)
    assert (Kind.SESSION_REVOKED, "root") in events(person)


def test_edits_on_the_change_form_are_audited_and_take_effect(admin_client, signed_in, person):
    page = admin_client.get(f"/admin/accounts/user/{person.pk}/change/")
    form = page.context["adminform"].form
    data = {
        name: value
        for name, value in form.initial.items()
        if value is not None and name not in ("groups", "user_permissions", "password")
    }
    expiry = timezone.now() - timedelta(minutes=1)
    data.update(
        {
            "is_active": "",  # unchecked: disabled
            "reset_password_required": "on",
            "account_expires_at_0": "",
            "account_expires_at_1": "",
            "credentials_expire_at_0": expiry.strftime("%Y-%m-%d"),
            "credentials_expire_at_1": expiry.strftime("%H:%M:%S"),
            "date_joined_0": person.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": person.date_joined.strftime("%H:%M:%S"),
        }
    )
    data = {key: value for key, value in data.items() if value != ""}
    response = admin_client.post(f"/admin/accounts/user/{person.pk}/change/", data)

    assert response.status_code == 302, response.context["adminform"].form.errors
    person.refresh_from_db()
    assert person.is_active is False
    assert person.reset_password_required is True
    assert Session.objects.get(user=person).revoked_reason == "disabled"
    kinds = {kind for kind, actor in events(person) if actor == "root"}
    assert {
        Kind.ACCOUNT_DISABLED,
        Kind.PASSWORD_CHANGE_REQUIRED,
        Kind.CREDENTIALS_EXPIRY_SET,
    } <= kinds


def test_every_audit_kind_is_counted_in_prometheus(signed_in):
    before = REGISTRY.get_sample_value("platform_security_events_total", {"kind": "SIGN_IN"})

    ApiClient(device_id="second").call(
        "post",
        "/api/auth/login/email",
        {"email": "grace@example.com", "password": DEFAULT_PASSWORD},
    )

    after = REGISTRY.get_sample_value("platform_security_events_total", {"kind": "SIGN_IN"})
    assert after == (before or 0) + 1


def test_the_development_outbox_shows_the_last_messages_only_with_debug(client, settings, person):
    reset(person.email)
    message = OutboxMessage.objects.get(to=person.email)

    settings.DEBUG = False
    assert client.get("/dev/outbox").status_code == 404
    settings.DEBUG = True
    page = client.get("/dev/outbox")

    assert page.status_code == 200
    assert message.text.split()[5].encode() in page.content  # the code's sentence
    assert b"grace@example.com" in page.content


def admin_messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.parametrize(
    ("language", "one", "two"),
    [
        ("en", "1 account unlocked.", "2 accounts unlocked."),
        ("ru", "1 аккаунт разблокирован.", "2 аккаунта разблокированы."),
    ],
)
def test_an_action_counts_its_accounts_in_the_administrators_language(
    admin_client, person, owner, language, one, two
):
    def unlock(*users: User) -> list[str]:
        response = admin_client.post(
            "/admin/accounts/user/",
            {"action": "unlock", "_selected_action": [user.pk for user in users]},
            HTTP_ACCEPT_LANGUAGE=language,
            follow=True,
        )
        return admin_messages(response)

    assert unlock(person) == [one]
    assert unlock(person, owner) == [two]


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "1 user must change their password."),
        ("ru", "1 пользователь должен сменить пароль."),
    ],
)
def test_requiring_a_password_change_counts_the_users_in_the_administrators_language(
    admin_client, person, language, said
):
    response = admin_client.post(
        "/admin/accounts/user/",
        {"action": "require_password_change", "_selected_action": [person.pk]},
        HTTP_ACCEPT_LANGUAGE=language,
        follow=True,
    )

    assert admin_messages(response) == [said]


@pytest.mark.parametrize(
    ("language", "header"),
    [("en", "Exchange platform administration"), ("ru", "Exchange platform: администрирование")],
)
@pytest.mark.parametrize("path", ["/admin/", "/admin/accounts/user/", "/admin/login/"])
def test_the_administration_is_named_after_the_platform(admin_client, language, header, path):
    page = admin_client.get(path, HTTP_ACCEPT_LANGUAGE=language, follow=True).content.decode()

    assert f'<div id="site-name"><a href="/admin/">{header}</a></div>' in page
    assert "Django" not in page


def test_resetting_two_factor_turns_it_off_is_audited_and_tells_the_person(
    admin_client, admin_user, person
):
    User.objects.filter(pk=person.pk).update(
        two_factor_enabled=True, code_factor="TOTP", two_factor_method="TOTP"
    )

    response = admin_client.post(
        "/admin/accounts/user/",
        {"action": "reset_two_factor", "_selected_action": [person.pk]},
        follow=True,
    )

    assert admin_messages(response) == ["Two-factor sign-in of 1 user is reset."]
    person.refresh_from_db()
    assert person.two_factor_enabled is False
    event = AuditEvent.objects.get(user=person, kind="TWO_FACTOR_RESET")
    assert event.actor == admin_user
    notice = OutboxMessage.objects.get(to=person.email, template="notice_two_factor_reset")
    assert "An administrator turned two-factor sign-in off" in notice.text
    assert "the platform's administration" in notice.text
