"""The four flows of confirmation codes (docs/sessions.md, "Confirmation codes"), started the
same way for every test that runs over them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.accounts.api import NEW_PASSWORD, PASSWORD, SIGNED_IN_FIELDS, outcome, signed_in
from tests.conftest import ApiClient, last_code
from tests.factories import DEFAULT_PASSWORD, UserFactory

PHONES = {"a": "+4915123456781", "b": "+4915123456782"}


@dataclass
class Pending:
    """A started confirmation: where its code went, and how to confirm and resend it."""

    flow: str
    request_id: str
    address: str
    client: ApiClient
    confirm_path: str
    resend_path: str
    confirm_extra: dict[str, Any] = field(default_factory=dict)
    succeeded: Callable[[Any], bool] = lambda response: False

    def code(self) -> str:
        return last_code(self.address)

    def confirm(self, token: str, request_id: str | None = None) -> Any:
        body = {"requestId": request_id or self.request_id, "token": token, **self.confirm_extra}
        return self.client.call("post", self.confirm_path, body)

    def resend(self) -> Any:
        return self.client.call("post", self.resend_path, {"requestId": self.request_id})


def _login_success(response: Any) -> bool:
    return response.status_code == 200 and list(response.json()) == SIGNED_IN_FIELDS


def start_registration(tag: str) -> Pending:
    email = f"new-{tag}@example.com"
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call(
        "post",
        "/api/auth/register",
        {"email": email, "password": PASSWORD, "confirmPassword": PASSWORD},
    )
    assert response.status_code == 200, response.json()
    return Pending(
        flow="registration",
        request_id=response.json()["requestId"],
        address=email,
        client=client,
        confirm_path="/api/auth/register/verify-email/confirm",
        resend_path="/api/auth/register/verify-email/resend",
        succeeded=lambda r: _login_success(r) and r.json()["userDto"]["emailConfirmed"] is True,
    )


def start_sign_in(tag: str) -> Pending:
    user = UserFactory.create(
        email=f"two-factor-{tag}@example.com",
        phone=PHONES[tag],
        two_factor_enabled=True,
        code_factor="SMS",
    )
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call(
        "post", "/api/auth/login/email", {"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert outcome(response) == (428, "TWO_FACTOR_REQUIRED")
    return Pending(
        flow="sign-in",
        request_id=response.json()["requestId"],
        address=user.phone,
        client=client,
        confirm_path="/api/auth/login/two-factor/confirm",
        resend_path="/api/auth/login/two-factor/resend",
        succeeded=_login_success,
    )


def start_enabling(tag: str) -> Pending:
    user = UserFactory.create(email=f"enabling-{tag}@example.com", phone=PHONES[tag])
    client = signed_in(user.email, device=f"browser-{tag}")
    response = client.call("patch", "/api/users/two-factor-authentication")
    assert response.status_code == 200, response.json()
    assert response.json()["confirmMethod"] == "SMS"
    return Pending(
        flow="enabling",
        request_id=response.json()["requestId"],
        address=user.phone,
        client=client,
        confirm_path="/api/users/two-factor-authentication/confirm",
        resend_path="/api/users/two-factor-authentication/resend",
        succeeded=lambda r: (
            r.status_code == 200
            and list(r.json()) == ["twoFactorEnabled", "recoveryCodes"]
            and r.json()["twoFactorEnabled"] is True
            and len(r.json()["recoveryCodes"]) == 10
        ),
    )


def start_reset(tag: str) -> Pending:
    user = UserFactory.create(email=f"forgetful-{tag}@example.com")
    client = ApiClient(device_id=f"browser-{tag}")
    response = client.call("post", "/api/auth/reset-password", {"email": user.email})
    assert response.status_code == 200, response.json()
    return Pending(
        flow="reset",
        request_id=response.json()["requestId"],
        address=user.email,
        client=client,
        confirm_path="/api/auth/reset-password/confirm",
        resend_path="/api/auth/reset-password/resend",
        confirm_extra={"newPassword": NEW_PASSWORD, "confirmPassword": NEW_PASSWORD},
        succeeded=lambda r: r.status_code == 200 and r.json() == {"confirmed": True},
    )


FLOWS: dict[str, Callable[[str], Pending]] = {
    "registration": start_registration,
    "sign-in": start_sign_in,
    "enabling": start_enabling,
    "reset": start_reset,
}


flows = pytest.mark.parametrize("start", list(FLOWS.values()), ids=list(FLOWS))
