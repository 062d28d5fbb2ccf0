"""Proof that the person at the keyboard owns the account, for what would hand it over: turning a
second factor off or replacing the app, new recovery codes, removing a passkey, changing the
e-mail address, deleting the account (docs/sessions.md, "Reauthentication"; django-allauth calls
it reauthentication).

The proof travels in the request that needs it: the current password, a code of a second factor
(``token``: the authenticator app's code or a recovery code; or, with the ``requestId`` of
``POST /api/users/me/reauthentication``, the SMS code it sent), or a passkey's answer
(``credential`` with that ``requestId``). Without one, a session that began with a sign-in (not a
refresh) within ACCOUNTS_REAUTH_SECONDS passes. A proof that is sent is always checked: a wrong
password counts toward the lock like a sign-in's, a wrong code toward the second factors' run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.devices import Device
from accounts.errors import (
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    CodeAlreadyUsed,
    CodeExpired,
    CodeInvalid,
    PasskeyInvalid,
    ReauthenticationRequired,
    SignInBusy,
)
from accounts.models import Challenge, Session, User
from accounts.services.audit import Kind
from accounts.services.authenticators import authenticator_confirmed
from accounts.services.challenges import challenge_open
from accounts.services.second_factors import (
    recovery_code_told,
    second_factor_code_check,
    second_factor_passkey_check,
)
from accounts.services.sign_in import credentials_check
from accounts.services.sign_in_challenges import Asked, factor_challenge_open
from platform_site.errors import ValidationFailed

# What a proof is refused with, whichever door it came through (the API declares them, the
# cabinet's pages tell them under the field).
PROOF_REFUSALS = (
    ReauthenticationRequired,
    BadCredentials,
    AccountLocked,
    SignInBusy,
    CodeInvalid,
    CodeExpired,
    CodeAlreadyUsed,
    AttemptsExceeded,
    PasskeyInvalid,
)

REQUEST_ID_NEEDED = _("A passkey's answer needs the requestId its options came with.")


@dataclass(frozen=True)
class Proof:
    """What a request sent to prove its owner: any of them, or none."""

    password: str | None = None
    token: str | None = None
    credential: dict[str, Any] | None = None
    request_id: uuid.UUID | None = None

    @property
    def of_factor(self) -> bool:
        return self.token is not None or self.credential is not None

    @property
    def sent(self) -> bool:
        return self.password is not None or self.of_factor


@dataclass(frozen=True)
class Reauthentication:
    """A request's claim to be the owner: its session (the sign-in it began with), the proof it
    sent, and its device."""

    session: Session | None
    proof: Proof
    device: Device


def session_fresh(session: Session | None) -> bool:
    """Whether ``session`` began with a sign-in within ACCOUNTS_REAUTH_SECONDS (a refresh keeps
    the session's start)."""
    if session is None:
        return False
    window = timedelta(seconds=settings.ACCOUNTS_REAUTH_SECONDS)
    return session.created_at > timezone.now() - window


def reauthentication_start(*, user: User, method: str | None, device: Device) -> Asked:
    """A challenge for a second factor's proof (``method``, or the one the person asks for
    first): an SMS code sent, the app's code awaited, or a passkey's options."""
    return factor_challenge_open(
        user=user, device=device, purpose=Challenge.Purpose.REAUTHENTICATION, method=method
    )


def reauthenticated(*, user: User, reauth: Reauthentication, request: HttpRequest | None) -> None:
    """The proof sent, checked; without one, a fresh session; else ReauthenticationRequired.
    Runs before the transaction of what it guards, not inside it: a wrong password's or code's
    count must outlive the refusal."""
    _proof_checked(user=user, reauth=reauth, request=request)
    if not reauth.proof.sent and not session_fresh(reauth.session):
        raise ReauthenticationRequired()


def reauthenticated_fully(
    *, user: User, reauth: Reauthentication, request: HttpRequest | None
) -> None:
    """For deleting the account, whatever the session's age: the password, and a second
    factor's proof as well while one is on."""
    proof = reauth.proof
    if proof.password is None or (user.two_factor_enabled and not proof.of_factor):
        raise ReauthenticationRequired()
    _proof_checked(user=user, reauth=reauth, request=request)


def _proof_checked(*, user: User, reauth: Reauthentication, request: HttpRequest | None) -> None:
    proof = reauth.proof
    if proof.password is not None:  # BadCredentials, counted toward the lock; or AccountLocked
        credentials_check(
            kind="username",
            identifier=user.username,
            password=proof.password,
            request=request,
            failure=Kind.REAUTHENTICATION_FAILED,
        )
    if proof.credential is not None:
        if proof.request_id is None:
            raise ValidationFailed({"requestId": [str(REQUEST_ID_NEEDED)]})
        second_factor_passkey_check(
            request_id=proof.request_id,
            purpose=Challenge.Purpose.REAUTHENTICATION,
            credential=proof.credential,
            request=request,
            owner=user,
        )
    elif proof.token is not None:
        request_id = proof.request_id or _app_challenge(user, reauth.device)
        confirmed = second_factor_code_check(
            request_id=request_id,
            purpose=Challenge.Purpose.REAUTHENTICATION,
            code=proof.token,
            device=reauth.device,
            request=request,
            owner=user,
        )
        recovery_code_told(confirmed, device=reauth.device, request=request)


def _app_challenge(user: User, device: Device) -> uuid.UUID:
    """A challenge for a code sent without a ``requestId``: the app's code (when the person has
    an app) or a recovery code, with the attempt budget and the run of every second factor."""
    challenge = challenge_open(
        purpose=Challenge.Purpose.REAUTHENTICATION,
        method=Challenge.Method.TOTP,
        user=user,
        device_key=device.key,
        authenticator=authenticator_confirmed(user=user),
    )
    return challenge.pk
