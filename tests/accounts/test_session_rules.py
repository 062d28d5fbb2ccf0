"""One definition of when a session serves a request, and of what a required password change
allows (accounts/session_rules.py), applied alike by every door: the API's authentication and
refresh, the cabinet's pages, the session lists."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from accounts.api import urls as accounts_api_urls
from accounts.errors import DeviceMismatch, TokenExpired, TokenRevoked
from accounts.models import Session, User
from accounts.permissions import IsCabinetUserDoing
from accounts.session_rules import (
    WHILE_PASSWORD_CHANGE_REQUIRED,
    Action,
    action_of,
    live_sessions,
    session_refusal,
)
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

NOW = timezone.now()


def session_of(**changes: Any) -> Session:
    user = User(pk=7, username="u", email="u@example.com", is_active=changes.pop("active", True))
    session = Session(
        user=user,
        device_key="d:laptop",
        expires_at=NOW + timedelta(days=1),
        revoked_at=None,
    )
    for name, value in changes.items():
        setattr(session, name, value)
    return session


@pytest.mark.parametrize(
    ("session", "user_id", "device_key", "refusal"),
    [
        (session_of(), 7, "d:laptop", None),
        (session_of(), 7, None, None),  # the door binds otherwise (the cabinet's cookie)
        (None, 7, "d:laptop", TokenRevoked),
        (session_of(), 8, "d:laptop", TokenRevoked),
        (session_of(revoked_at=NOW), 7, "d:laptop", TokenRevoked),
        (session_of(active=False), 7, "d:laptop", TokenRevoked),
        (session_of(expires_at=NOW), 7, "d:laptop", TokenExpired),
        (session_of(), 7, "d:phone", DeviceMismatch),
    ],
)
def test_the_rule_says_why_a_session_may_not_serve_a_request(session, user_id, device_key, refusal):
    found = session_refusal(session, user_id=user_id, device_key=device_key, now=NOW)

    assert type(found) is refusal if refusal else found is None


def revoke(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(revoked_at=timezone.now())


def disable(session: Session) -> None:
    User.objects.filter(pk=session.user_id).update(is_active=False)


def expire(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(expires_at=timezone.now())


ENDINGS: list[Callable[[Session], None]] = [revoke, disable, expire]


@pytest.mark.parametrize("end", ENDINGS, ids=lambda end: end.__name__)
def test_every_door_refuses_the_sessions_the_rule_refuses(sessions_in_postgres, person, end):
    """Written behind the services' backs (raw updates), so that only the rule decides."""
    api = ApiClient(device_id="laptop")
    api.tokens = api.call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    ).json()
    browser = Client()
    assert (
        browser.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD}).status_code
        == 302
    )
    assert browser.get("/settings/security").status_code == 200
    sessions = list(Session.objects.filter(user=person))
    assert len(sessions) == 2
    assert Session.objects.filter(live_sessions(timezone.now()), user=person).count() == 2

    for session in sessions:
        end(session)

    assert api.call("get", "/api/users/me").status_code == 401
    assert api.refresh().status_code == 401
    page = browser.get("/settings/security")
    assert (page.status_code, page["Location"]) == (302, "/login?next=/settings/security")
    assert not Session.objects.filter(live_sessions(timezone.now()), user=person).exists()


def cabinet_actions() -> dict[str, Action]:
    """The cabinet's pages that name an action, by route."""
    found: dict[str, Action] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and action_of(pattern.callback) is not None:
                found[prefix + str(pattern.pattern)] = action_of(pattern.callback)  # type: ignore[assignment]

    walk(get_resolver().url_patterns, "/")
    return found


def api_actions() -> set[Action]:
    """The actions the API's views name for their permission (IsCabinetUserDoing)."""
    found = set()
    for pattern in accounts_api_urls.urlpatterns:
        view_class = pattern.callback.cls  # type: ignore[attr-defined]
        for method in ("get", "post", "patch", "put", "delete"):
            if not hasattr(view_class, method):
                continue
            view = view_class()
            view.request = type("R", (), {"method": method.upper()})()
            found |= {
                permission.action
                for permission in view.get_permissions()
                if isinstance(permission, IsCabinetUserDoing)
            }
    return found


def test_the_allow_list_of_a_required_password_change_is_one_for_both_doors():
    pages = cabinet_actions()

    assert set(pages.values()) <= WHILE_PASSWORD_CHANGE_REQUIRED
    assert api_actions() <= WHILE_PASSWORD_CHANGE_REQUIRED
    # Both doors name the two things such a user comes to do; signing out needs no access token
    # in the API (logout takes the refresh token).
    assert {Action.READ_PROFILE, Action.CHANGE_PASSWORD} <= api_actions()
    assert {Action.CHANGE_PASSWORD, Action.SIGN_OUT} <= set(pages.values())
    assert pages["/settings/password"] == Action.CHANGE_PASSWORD


def test_a_required_password_change_keeps_both_doors_to_the_allow_list(
    sessions_in_postgres, person
):
    browser = Client()
    browser.post("/login", {"login": person.email, "password": DEFAULT_PASSWORD})
    api = ApiClient(device_id="laptop")
    api.tokens = api.call(
        "post", "/api/auth/login/email", {"email": person.email, "password": DEFAULT_PASSWORD}
    ).json()
    User.objects.filter(pk=person.pk).update(reset_password_required=True)

    assert browser.get("/bus")["Location"] == "/settings/password"
    assert browser.get("/settings/password").status_code == 200
    assert api.call("get", "/api/users/me").status_code == 200
    assert api.call("get", "/api/users/sessions").json()["code"] == "PASSWORD_CHANGE_REQUIRED"
