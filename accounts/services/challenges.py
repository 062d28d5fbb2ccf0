"""Confirmation codes: one mechanism for registration, 2FA sign-in, 2FA enabling and password
reset (docs/sessions.md, "Confirmation codes"), and for the codes of authenticator apps, which
the platform does not send (method TOTP).

A code is 6 digits from ``secrets``; only its keyed hash is stored, bound to the challenge's id
(the ``requestId``). Checking one against its challenge is accounts.services.code_checks.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.crypto import salted_hmac

from accounts.errors import (
    AttemptsExceeded,
    ChallengeNotFound,
    NothingToResend,
    ResendTooEarly,
)
from accounts.models import Authenticator, Challenge, User
from accounts.ratelimits import auth_limits_consume
from accounts.services.outbox import outbox_email, outbox_sms

Purpose = Challenge.Purpose

CODE_DIGITS = 6

# How each flow's code travels, and the template that carries it.
DELIVERY = {
    Purpose.REGISTRATION: (Challenge.Method.EMAIL, "registration_code"),
    Purpose.PASSWORD_RESET: (Challenge.Method.EMAIL, "password_reset_code"),
    Purpose.SIGN_IN: (Challenge.Method.SMS, "sign_in_code"),
    Purpose.ENABLE_TWO_FACTOR: (Challenge.Method.SMS, "enable_two_factor_code"),
    Purpose.REAUTHENTICATION: (Challenge.Method.SMS, "reauthentication_code"),
    Purpose.EMAIL_CHANGE: (Challenge.Method.EMAIL, "email_change_code"),
}


@dataclass(frozen=True)
class Started:
    """What a response that starts or resends a confirmation says."""

    challenge: Challenge
    retry_after_seconds: int

    def as_json(self) -> dict[str, object]:
        return {
            "requestId": str(self.challenge.pk),
            "confirmMethod": self.challenge.method,
            "retryAfterSeconds": self.retry_after_seconds,
        }


def code_hash_of(challenge_id: uuid.UUID, code: str) -> str:
    return salted_hmac(
        "accounts.challenge", f"{challenge_id}:{code}", algorithm="sha256"
    ).hexdigest()


def _code_new() -> str:
    return f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"


def _send(challenge: Challenge, code: str) -> None:
    method, template = DELIVERY[Purpose(challenge.purpose)]
    context = {"code": code, "minutes": max(1, settings.ACCOUNTS_CODE_TTL_SECONDS // 60)}
    if method == Challenge.Method.SMS:
        if challenge.user is None:
            raise ValueError("an SMS code always goes to a known user")
        outbox_sms(to=challenge.address, template=template, context=context, user=challenge.user)
    else:
        outbox_email(
            to=challenge.address,
            template=template,
            context=context,
            user=challenge.user,
            requires_account=True,
        )


def challenge_start(
    *, purpose: Challenge.Purpose, user: User | None, address: str, device_key: str = ""
) -> Started:
    """A new challenge with a fresh code, sent through the outbox (after the commit).

    ``user`` None makes a challenge that can never be confirmed, written and "sent" exactly like
    a real one (the outbox skips it): for e-mails that must not be told apart.
    """
    now = timezone.now()
    challenge = Challenge(
        purpose=purpose,
        method=DELIVERY[purpose][0],
        user=user,
        address=address,
        attempts_left=settings.ACCOUNTS_CODE_ATTEMPTS,
        created_at=now,
        sent_at=now,
        expires_at=now + timedelta(seconds=settings.ACCOUNTS_CODE_TTL_SECONDS),
        device_key=device_key,
    )
    code = _code_new()
    challenge.code_hash = code_hash_of(challenge.pk, code)
    challenge.save(force_insert=True)
    _send(challenge, code)
    return Started(challenge, settings.ACCOUNTS_CODE_RESEND_SECONDS)


def challenge_open(
    *,
    purpose: Challenge.Purpose,
    method: Challenge.Method,
    user: User,
    device_key: str = "",
    authenticator: Authenticator | None = None,
    passkey_challenge: bytes | None = None,
) -> Challenge:
    """A challenge that nothing is sent for: an authenticator app's code confirms it (TOTP), or
    a passkey's assertion of ``passkey_challenge`` (PASSKEY). The attempt budget and the expiry
    are those of every challenge."""
    now = timezone.now()
    return Challenge.objects.create(
        purpose=purpose,
        method=method,
        user=user,
        address="",
        code_hash="",
        attempts_left=settings.ACCOUNTS_CODE_ATTEMPTS,
        created_at=now,
        sent_at=now,
        expires_at=now + timedelta(seconds=settings.ACCOUNTS_CODE_TTL_SECONDS),
        device_key=device_key,
        authenticator=authenticator,
        passkey_challenge=passkey_challenge,
    )


def challenge_pending(
    *, purpose: Challenge.Purpose, user: User | None = None, address: str | None = None
) -> Started | None:
    """The newest open challenge of ``user`` (or sent to ``address``) for ``purpose`` still in
    its resend cooldown: starting the flow again within the cooldown answers with it instead of
    sending another code."""
    now = timezone.now()
    cooldown = timedelta(seconds=settings.ACCOUNTS_CODE_RESEND_SECONDS)
    challenges = Challenge.objects.filter(
        method__in=[Challenge.Method.EMAIL, Challenge.Method.SMS],
        purpose=purpose,
        used_at__isnull=True,
        attempts_left__gt=0,
        expires_at__gt=now,
        sent_at__gt=now - cooldown,
    )
    if user is not None:
        challenges = challenges.filter(user=user)
    if address is not None:
        challenges = challenges.filter(address__iexact=address)
    challenge = challenges.order_by("-sent_at").first()
    if challenge is None:
        return None
    return Started(challenge, _seconds_left(challenge.sent_at + cooldown - now))


def _seconds_left(delta: timedelta) -> int:
    return max(1, int(-(-delta.total_seconds() // 1)))  # rounded up: never "0, but wait"


def challenge_resend_wait(challenge: Challenge) -> int:
    """Seconds until ``challenge`` may be sent again (ACCOUNTS_CODE_RESEND_SECONDS after its last
    sending); 0 once it may."""
    wait = challenge.sent_at + timedelta(seconds=settings.ACCOUNTS_CODE_RESEND_SECONDS)
    left = wait - timezone.now()
    return _seconds_left(left) if left > timedelta(0) else 0


def challenge_sms_switch(challenge: Challenge) -> int:
    """A sign-in's ``challenge`` (locked by the caller, which saves it) switched to an SMS code
    to its user's phone: a new code is sent, unless one went to that phone within the resend
    cooldown, which stays good. Seconds until another may be sent."""
    if challenge.user is None:
        raise ValueError("an SMS code always goes to a known user")
    phone = challenge.user.phone
    sent_here = bool(challenge.code_hash) and challenge.address == phone
    if sent_here and (wait := challenge_resend_wait(challenge)):
        return wait
    code = _code_new()
    challenge.code_hash = code_hash_of(challenge.pk, code)
    challenge.address = phone
    challenge.sent_at = timezone.now()
    _send(challenge, code)
    return settings.ACCOUNTS_CODE_RESEND_SECONDS


def challenge_resend(
    *,
    request_id: uuid.UUID,
    purpose: Challenge.Purpose,
    request: HttpRequest | None,
    user: User | None = None,
) -> Started:
    """A new code for the challenge, replacing the old one, once its cooldown has passed.

    The attempt budget is kept: resending is not a way to more guesses. ``user`` (for flows of a
    signed-in user) must own the challenge; without one, the resend counts against the auth
    rate limits of the client's IP and of the challenge (a signed-in user's requests count
    against the user's).
    """
    if user is None:
        auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    with transaction.atomic():
        challenge = (
            # Only the challenge's row: the user is a nullable join, which FOR UPDATE refuses.
            Challenge.objects.select_for_update(of=("self",))
            .select_related("user")
            .filter(pk=request_id, purpose=purpose, used_at__isnull=True)
            .first()
        )
        if challenge is None or (user is not None and challenge.user_id != user.pk):
            raise ChallengeNotFound()
        if challenge.method not in (Challenge.Method.EMAIL, Challenge.Method.SMS):
            raise NothingToResend()
        if challenge.attempts_left == 0:
            raise AttemptsExceeded()
        if wait := challenge_resend_wait(challenge):
            raise ResendTooEarly(retry_after_seconds=wait)
        now = timezone.now()
        code = _code_new()
        challenge.code_hash = code_hash_of(challenge.pk, code)
        challenge.sent_at = now
        challenge.expires_at = now + timedelta(seconds=settings.ACCOUNTS_CODE_TTL_SECONDS)
        challenge.save(update_fields=["code_hash", "sent_at", "expires_at"])
        _send(challenge, code)
    return Started(challenge, settings.ACCOUNTS_CODE_RESEND_SECONDS)
