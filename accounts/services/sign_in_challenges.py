"""Which second factor a sign-in asks for, and switching to another one (docs/sessions.md,
"Second factors").

A sign-in's challenge (its ``requestId``) asks first for the factor the person chose
(``two_factor_method``): an SMS code, the authenticator app's code, or a passkey. The person may
switch it to any other factor they hold at once: no cooldown, the same ``requestId``, and the
same attempt budget, so switching is not a way to more guesses; nor to more SMS, since a
switch back to SMS within the resend cooldown keeps the code already sent.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts.devices import Device
from accounts.errors import AttemptsExceeded, ChallengeNotFound
from accounts.models import Challenge, TwoFactorMethod, User
from accounts.ratelimits import auth_limits_consume
from accounts.services.authenticators import authenticator_confirmed
from accounts.services.challenges import (
    challenge_open,
    challenge_pending,
    challenge_resend,
    challenge_sms_switch,
    challenge_start,
)
from accounts.services.factors import NOT_HELD, factors_held
from accounts.services.passkey_assertions import assertion_ask
from platform_site.errors import ValidationFailed

# What a sign-in's challenge sends again (challenge_resend) rather than switches to.
RESENT = (Challenge.Method.SMS, Challenge.Method.TOTP)


@dataclass(frozen=True)
class Asked:
    """A sign-in's second step as the client sees it: the factor asked for, the seconds until
    another SMS code may be sent (None: nothing was sent), a passkey's request options, and
    the person's other factors, which the sign-in may switch to."""

    challenge: Challenge
    retry_after_seconds: int | None
    options: dict[str, Any] | None
    other_methods: list[str]

    def as_json(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "requestId": str(self.challenge.pk),
            "confirmMethod": self.challenge.method,
            "retryAfterSeconds": self.retry_after_seconds,
            "otherMethods": self.other_methods,
        }
        if self.options is not None:
            answer["options"] = self.options
        return answer


def _others(held: list[TwoFactorMethod], method: str) -> list[str]:
    return [factor.value for factor in held if factor != method]


def factor_challenge_open(
    *,
    user: User,
    device: Device,
    purpose: Challenge.Purpose = Challenge.Purpose.SIGN_IN,
    method: str | None = None,
) -> Asked:
    """The second step of ``user``'s sign-in from ``device`` (or, with ``purpose``
    REAUTHENTICATION, a signed-in person's proof), asking for ``method`` or the factor chosen
    first: a passkey, the authenticator app (both bound to nothing sent), or an SMS code (the
    one pending within its cooldown, or a new one sent)."""
    held = factors_held(user)
    if method is not None and method not in held:
        raise ValidationFailed({"method": [str(NOT_HELD)]})
    first = user.two_factor_method if user.two_factor_method in held else None
    method = method or first or (held[0] if held else TwoFactorMethod.SMS)
    if method == TwoFactorMethod.PASSKEY:
        asked = assertion_ask(user=user)
        challenge = challenge_open(
            purpose=purpose,
            method=Challenge.Method.PASSKEY,
            user=user,
            device_key=device.key,
            passkey_challenge=asked.challenge,
        )
        return Asked(challenge, None, asked.options, _others(held, method))
    authenticator = authenticator_confirmed(user=user) if method == TwoFactorMethod.TOTP else None
    if authenticator is not None:
        challenge = challenge_open(
            purpose=purpose,
            method=Challenge.Method.TOTP,
            user=user,
            device_key=device.key,
            authenticator=authenticator,
        )
        return Asked(challenge, None, None, _others(held, method))
    started = challenge_pending(purpose=purpose, user=user)
    if started is None:
        started = challenge_start(
            purpose=purpose, user=user, address=user.phone, device_key=device.key
        )
    return Asked(
        started.challenge, started.retry_after_seconds, None, _others(held, TwoFactorMethod.SMS)
    )


def sign_in_two_factor_resend(
    *, request_id: uuid.UUID, method: str | None, request: HttpRequest | None
) -> Asked:
    """The sign-in's SMS code sent again (after its cooldown), or the sign-in switched to
    ``method``, another of the person's factors, at once; a passkey asked for again gets a new
    challenge. Without ``method``, the factor it asks for now."""
    current = (
        Challenge.objects.filter(pk=request_id, purpose=Challenge.Purpose.SIGN_IN)
        .values_list("method", flat=True)
        .first()
    )
    if (method is None or method == current) and current in RESENT:
        started = challenge_resend(
            request_id=request_id, purpose=Challenge.Purpose.SIGN_IN, request=request
        )
        assert started.challenge.user is not None  # noqa: S101 (a sign-in's challenge has one)
        held = factors_held(started.challenge.user)
        return Asked(started.challenge, started.retry_after_seconds, None, _others(held, current))
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    return _switched(request_id=request_id, method=method or current)


@transaction.atomic
def _switched(*, request_id: uuid.UUID, method: str | None) -> Asked:
    challenge = (
        # Only the challenge's row: the user is a nullable join, which FOR UPDATE refuses.
        Challenge.objects.select_for_update(of=("self",))
        .select_related("user")
        .filter(pk=request_id, purpose=Challenge.Purpose.SIGN_IN, used_at__isnull=True)
        .first()
    )
    if challenge is None or challenge.user is None:
        raise ChallengeNotFound()
    if challenge.attempts_left == 0:
        raise AttemptsExceeded()
    user = challenge.user
    held = factors_held(user)
    if method not in held:
        raise ValidationFailed({"method": [str(NOT_HELD)]})
    challenge.method = Challenge.Method(method)
    challenge.expires_at = timezone.now() + timedelta(seconds=settings.ACCOUNTS_CODE_TTL_SECONDS)
    challenge.authenticator = (
        authenticator_confirmed(user=user) if method == TwoFactorMethod.TOTP else None
    )
    challenge.passkey_challenge = None
    retry_after_seconds = options = None
    if method == TwoFactorMethod.PASSKEY:
        asked = assertion_ask(user=user)
        challenge.passkey_challenge, options = asked.challenge, asked.options
    elif method == TwoFactorMethod.SMS:
        retry_after_seconds = challenge_sms_switch(challenge)
    challenge.save()
    return Asked(challenge, retry_after_seconds, options, _others(held, method))
