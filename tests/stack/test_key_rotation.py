"""Rotating the token signing key under live sessions, with real gunicorn restarts: nobody is signed
out before their refresh token would end anyway (docs/operations.md, "Rotating the token signing
key")."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.stack.conftest import Gunicorn, StackDatabase
from tests.stack.processes import running_gunicorn
from tests.stack.test_auth_races import PASSWORD, create_adapter

pytestmark = pytest.mark.stack

KEY_A = "0a" * 32  # openssl rand -hex 32, as docs/deployment.md has operators generate them
KEY_B = "0b" * 32
CABINET_EMAIL = "rotation-cabinet@example.com"
LIMITS = {"ACCOUNTS_RATE_LIMIT_IP": "10000/m", "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m"}


def kid(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def kid_of(token: str) -> str | None:
    return jwt.get_unverified_header(token).get("kid")


class Principal:
    """An adapter or a cabinet user of the test: its device and the pair it holds."""

    def __init__(self, device: str, check: str) -> None:
        self.device = device
        self.check = check  # a GET its role may call
        self.tokens: dict[str, Any] = {}

    def sign_in(self, server: Gunicorn, path: str, body: Mapping[str, str]) -> None:
        answer = httpx.post(
            f"{server.base_url}{path}", json=body, headers={"X-Device-ID": self.device}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        self.tokens = answer.json()

    def call(self, server: Gunicorn, access_token: str | None = None) -> tuple[int, str | None]:
        token = access_token or self.tokens["accessToken"]
        answer = httpx.get(
            f"{server.base_url}{self.check}",
            headers={"Authorization": f"Bearer {token}", "X-Device-ID": self.device},
            timeout=30,
        )
        return answer.status_code, answer.json().get("code")

    def refresh(self, server: Gunicorn, refresh_token: str | None = None) -> httpx.Response:
        answer = httpx.post(
            f"{server.base_url}/api/auth/refresh",
            json={"refreshToken": refresh_token or self.tokens["refreshToken"]},
            headers={"X-Device-ID": self.device},
            timeout=30,
        )
        if answer.status_code == 200:
            self.tokens = answer.json()
        return answer

    def kids(self) -> tuple[str | None, str | None]:
        return kid_of(self.tokens["accessToken"]), kid_of(self.tokens["refreshToken"])


def adapter(server: Gunicorn, database: StackDatabase, login: str) -> Principal:
    create_adapter(database, login)
    principal = Principal(f"{login}-device", "/api/exchange/whoami")
    principal.sign_in(server, "/api/auth/login/username", {"username": login, "password": PASSWORD})
    return principal


def cabinet_user(server: Gunicorn, database: StackDatabase) -> Principal:
    database.shell(
        "from accounts.models import User\n"
        f"User.objects.create_user(username='rotation-cabinet', email={CABINET_EMAIL!r},\n"
        f"    password={PASSWORD!r}, email_confirmed=True)\n"
    )
    principal = Principal("rotation-browser", "/api/users/me")
    principal.sign_in(
        server, "/api/auth/login/email", {"email": CABINET_EMAIL, "password": PASSWORD}
    )
    return principal


def keys(current: str, *previous: str) -> dict[str, str]:
    return {**LIMITS, "JWT_SIGNING_KEY": current, "JWT_PREVIOUS_SIGNING_KEYS": ",".join(previous)}


def test_rotating_the_signing_key_under_live_sessions_signs_nobody_out(
    stack_database: StackDatabase, tmp_path: Path
) -> None:
    # 1. Key A alone: two adapters and a cabinet user sign in.
    with running_gunicorn(stack_database, tmp_path / "a", keys(KEY_A)) as server:
        early = adapter(server, stack_database, "rotation-early")
        late = adapter(server, stack_database, "rotation-late")
        idle = adapter(server, stack_database, "rotation-idle")
        person = cabinet_user(server, stack_database)
        everyone = (early, late, idle, person)
        assert {principal.kids() for principal in everyone} == {(kid(KEY_A), kid(KEY_A))}
        signed_with_a = {id(principal): dict(principal.tokens) for principal in everyone}

    # 2. Key B signs, A still verifies: every pair signed with A keeps working; a refresh gives a
    # pair signed with B, also to a session that refreshes only after others did.
    with running_gunicorn(stack_database, tmp_path / "b-and-a", keys(KEY_B, KEY_A)) as server:
        assert [principal.call(server) for principal in everyone] == [(200, None)] * 4
        for principal in (early, person, late):
            assert principal.refresh(server).status_code == 200
            assert principal.kids() == (kid(KEY_B), kid(KEY_B))
            assert principal.call(server) == (200, None)
        assert idle.call(server) == (200, None)  # never refreshes: its pair stays signed with A

    # 3. A removed (JWT_REFRESH_TTL_SECONDS later, in production): the refreshed sessions keep
    # working; whatever A signed is refused, and refusing it ends no session.
    with running_gunicorn(stack_database, tmp_path / "b", keys(KEY_B)) as server:
        for principal in (early, person, late):
            assert principal.call(server) == (200, None)
            assert principal.refresh(server).status_code == 200
            assert principal.call(server) == (200, None)
        for principal in everyone:
            old = signed_with_a[id(principal)]
            assert principal.call(server, old["accessToken"]) == (401, "TOKEN_MALFORMED")
            refused = principal.refresh(server, old["refreshToken"])
            assert (refused.status_code, refused.json()["code"]) == (401, "TOKEN_MALFORMED")
        assert [principal.call(server) for principal in (early, person, late)] == [(200, None)] * 3


def test_replicas_on_both_sides_of_a_rotation_accept_each_others_tokens(
    stack_database: StackDatabase, tmp_path: Path
) -> None:
    # A rolling deploy of step 2 with B already listed everywhere (step 1): a replica still
    # signing with A and one signing with B serve the same clients at once.
    with (
        running_gunicorn(stack_database, tmp_path / "a-and-b", keys(KEY_A, KEY_B)) as before,
        running_gunicorn(stack_database, tmp_path / "b-and-a", keys(KEY_B, KEY_A)) as after,
        running_gunicorn(stack_database, tmp_path / "a", keys(KEY_A)) as unprepared,
    ):
        on_before = adapter(before, stack_database, "replica-before")
        on_after = adapter(after, stack_database, "replica-after")
        assert (on_before.kids()[0], on_after.kids()[0]) == (kid(KEY_A), kid(KEY_B))

        for server in (before, after):
            assert on_before.call(server) == (200, None)
            assert on_after.call(server) == (200, None)
        assert on_after.refresh(before).status_code == 200
        assert on_after.kids()[0] == kid(KEY_A)
        assert on_before.refresh(after).status_code == 200
        assert on_before.kids()[0] == kid(KEY_B)

        # Without step 1, a replica that knows only A refuses what B signed: a sign-out.
        assert on_before.call(unprepared) == (401, "TOKEN_MALFORMED")
