"""The account API as the account tests call it, and the values they share.

Each request goes out from a client of its own (tests/conftest.py's ApiClient), so nothing but the
database and the cache carries over from one call to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from django.utils import timezone

from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

# Where a test stops the clock.
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
# Passwords a person chooses (the factories' users have DEFAULT_PASSWORD).
PASSWORD = "a-long-and-unusual-passphrase"
NEW_PASSWORD = "another-long-unusual-passphrase"
PHONE = "+4915123456789"
# Addresses that stand for others once normalised (NFKC, then case folding).
KELVIN = "\u212aev1@example.org"  # KELVIN SIGN, which NFKC reads as K
LONG_S = "\u017fam@example.org"  # LATIN SMALL LETTER LONG S, read as s
# The members of a successful sign-in's answer, in their order.
SIGNED_IN_FIELDS = [
    "accessToken",
    "accessTokenExpiresAt",
    "refreshToken",
    "refreshTokenExpiresAt",
    "deviceToken",
    "userDto",
]


def outcome(response: Any) -> tuple[int, str]:
    """The status and the problem's code ("" when the answer is not a problem)."""
    return response.status_code, response.json().get("code", "")


def by_email(email: str, password: str = DEFAULT_PASSWORD, **headers: Any) -> Any:
    return ApiClient(device_id="browser").call(
        "post", "/api/auth/login/email", {"email": email, "password": password}, **headers
    )


def by_username(username: str, password: str = DEFAULT_PASSWORD, **headers: Any) -> Any:
    return ApiClient(device_id="browser").call(
        "post", "/api/auth/login/username", {"username": username, "password": password}, **headers
    )


@dataclass(frozen=True)
class WayIn:
    """A way to sign in, and the account of tests/conftest.py it names (by its username)."""

    username: str
    identifier: str
    request: Callable[..., Any]

    def __call__(self, password: str = DEFAULT_PASSWORD, **headers: Any) -> Any:
        return self.request(self.identifier, password, **headers)


# The adapter by its login, and its owner, a cabinet user, by e-mail: a test taking ``way`` from
# ``ways_in`` also asks for the ``adapter`` fixture, which makes both.
WAYS_IN = {
    "adapter-by-login": WayIn(username="erp", identifier="erp", request=by_username),
    "user-by-email": WayIn(username="owner", identifier="owner@example.com", request=by_email),
}
ways_in = pytest.mark.parametrize("way", list(WAYS_IN.values()), ids=list(WAYS_IN))


def state(name: str) -> dict[str, Any]:
    """The fields that put an account in the state ``name``, one of the conditions sign-in checks."""
    long_ago = timezone.now() - timedelta(days=1)
    states: dict[str, dict[str, Any]] = {
        "unconfirmed": {"email_confirmed": False},
        "disabled": {"is_active": False},
        "expired": {"account_expires_at": long_ago},
        "credentials-expired": {"credentials_expire_at": long_ago},
        "two-factor": {"two_factor_enabled": True, "code_factor": "SMS", "phone": PHONE},
    }
    return states[name]


def signed_in(email: str, password: str = DEFAULT_PASSWORD, device: str = "browser") -> ApiClient:
    """A client of ``device`` holding the token pair of a sign-in by e-mail."""
    client = ApiClient(device_id=device)
    response = client.call("post", "/api/auth/login/email", {"email": email, "password": password})
    assert response.status_code == 200, response.json()
    client.tokens = response.json()
    return client


def register(email: str, password: str = PASSWORD, confirm: str | None = None, **extra: Any) -> Any:
    body = {"email": email, "password": password, "confirmPassword": confirm or password, **extra}
    return ApiClient().call("post", "/api/auth/register", body)


def reset(email: str) -> Any:
    return ApiClient().call("post", "/api/auth/reset-password", {"email": email})


def other_code(code: str) -> str:
    """A wrong code: ``code`` plus one."""
    return f"{(int(code) + 1) % 10**6:06d}"


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's claims, its signature unchecked."""
    return dict(jwt.decode(token, options={"verify_signature": False}))


def reset_confirm(request_id: str, token: str, password: str = NEW_PASSWORD, **extra: Any) -> Any:
    body = {
        "requestId": request_id,
        "token": token,
        "newPassword": password,
        "confirmPassword": password,
        **extra,
    }
    return ApiClient().call("post", "/api/auth/reset-password/confirm", body)


def change_password(client: ApiClient, current: str, new: str = NEW_PASSWORD) -> Any:
    return client.call(
        "patch",
        "/api/users/change-password",
        {"currentPassword": current, "newPassword": new, "confirmPassword": new},
    )


def whoami(client: ApiClient, **extra: Any) -> Any:
    return client.call("get", "/api/exchange/whoami", **extra)
