"""The second step of a sign-in with two-factor sign-in on: a code (SMS, authenticator app or
recovery code) or a passkey's assertion against the sign-in's challenge, checked as every second
factor is (accounts.services.second_factors), then the sign-in's last steps (docs/sessions.md,
"Second factors")."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest

from accounts.devices import Device
from accounts.models import Challenge
from accounts.ratelimits import auth_limits_consume
from accounts.services.second_factors import (
    recovery_code_told,
    second_factor_code_check,
    second_factor_passkey_check,
)
from accounts.services.sign_in import SignIn, sign_in_continue


def sign_in_two_factor_confirm(
    *, request_id: uuid.UUID, code: str, device: Device, request: HttpRequest | None
) -> SignIn:
    """The second step of a sign-in with 2FA: the SMS code, the authenticator app's code, or
    one of the user's recovery codes (used up, and the user told by e-mail); then a session.

    Every kind of code counts toward one run of wrong codes per account, across sign-ins; that
    many in a row lock the account like wrong passwords. With a valid device token of the
    account, the run and the lock are the token's own.
    """
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    confirmed = second_factor_code_check(
        request_id=request_id,
        purpose=Challenge.Purpose.SIGN_IN,
        code=code,
        device=device,
        request=request,
    )
    recovery_code_told(confirmed, device=device, request=request)
    user = confirmed.user
    return sign_in_continue(user=user, device=device, request=request, two_factor_done=True)


def sign_in_passkey_confirm(
    *,
    request_id: uuid.UUID,
    credential: dict[str, Any],
    device: Device,
    request: HttpRequest | None,
) -> SignIn:
    """The second step answered by one of the person's passkeys, then a session."""
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    user = second_factor_passkey_check(
        request_id=request_id,
        purpose=Challenge.Purpose.SIGN_IN,
        credential=credential,
        request=request,
    )
    return sign_in_continue(user=user, device=device, request=request, two_factor_done=True)
