"""The account API as the account tests call it, and the values they share.

Each request goes out from a client of its own (tests/conftest.py's ApiClient), so nothing but the
database and the cache carries over from one call to the next.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jwt

from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

# Where a test stops the clock.
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
# Passwords a person chooses (the factories' users have DEFAULT_PASSWORD).
PASSWORD = "a-long-and-unusual-passphrase"
NEW_PASSWORD = "another-long-unusual-passphrase"
PHONE = "+4915123456789"
# The members of a successful sign-in's answer, in their order.
SIGNED_IN_FIELDS = [
    "accessToken",
    "accessTokenExpiresAt",
    "refreshToken",
    "refreshTokenExpiresAt",
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
