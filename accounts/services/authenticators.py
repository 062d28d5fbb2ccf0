"""Authenticator apps (TOTP, RFC 6238, with pyotp): their secrets, their codes, and the rule that
no code passes twice (docs/sessions.md, "Second factors").

Codes are the apps' defaults: 6 digits, a new one every 30 seconds, HMAC-SHA-1. A code is taken
for the step before and after the server's as well, for clocks a little apart (Keycloak's
look-ahead of 1). Accepting a code records its step in one conditional UPDATE that only moves
forward, so a code that passed once, and every older one, fails from then on, however many
requests present it at once.
"""

from __future__ import annotations

import enum
import hmac
import uuid
from datetime import datetime

import pyotp
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from accounts.factor_secrets import SecretUnreadable, secret_decrypt, secret_encrypt
from accounts.models import Authenticator, User

DIGITS = 6
PERIOD_SECONDS = 30
WINDOW_STEPS = 1


class AppCode(enum.Enum):
    """What an app's code turned out to be."""

    ACCEPTED = "accepted"
    WRONG = "wrong"
    # The code of a step accepted before, or of an older one: right once, never again.
    USED = "used"


def authenticator_create(*, user: User) -> tuple[Authenticator, str]:
    """A pending authenticator with a fresh 160-bit secret; the secret is returned to be shown
    once, and stored only encrypted."""
    secret = pyotp.random_base32()
    authenticator = Authenticator.objects.create(
        user=user, secret=secret_encrypt(user_id=user.pk, secret=secret)
    )
    return authenticator, secret


def otpauth_uri(*, user: User, secret: str) -> str:
    """The otpauth:// URI apps read from the QR code (Key Uri Format)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=PERIOD_SECONDS).provisioning_uri(
        name=user.email or user.username, issuer_name=settings.PLATFORM_NAME
    )


def _matching_step(secret: str, code: str, now: datetime) -> int | None:
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=PERIOD_SECONDS)
    current = totp.timecode(now)
    found = None
    # Every step is compared, whatever matched: the time taken says nothing about which did.
    for offset in range(-WINDOW_STEPS, WINDOW_STEPS + 1):
        step = current + offset
        if hmac.compare_digest(totp.generate_otp(step), code):
            found = step
    return found


def authenticator_code_accept(*, authenticator_id: uuid.UUID, code: str) -> AppCode:
    """ACCEPTED if ``code`` is the app's code for a step around now that is later than every
    step accepted before; that step is then recorded. USED if it is the code of a step around
    now that is not. Runs in the caller's transaction."""
    authenticator = Authenticator.objects.filter(pk=authenticator_id).select_related("user").first()
    if authenticator is None or not (code.isascii() and code.isdigit() and len(code) == DIGITS):
        return AppCode.WRONG
    try:
        secret = secret_decrypt(user_id=authenticator.user_id, stored=authenticator.secret)
    except SecretUnreadable:
        return AppCode.WRONG
    step = _matching_step(secret, code, timezone.now())
    if step is None:
        return AppCode.WRONG
    # The row lock makes parallel acceptances of one step take turns; the loser's re-check sees
    # the winner's step and updates nothing.
    accepted = (
        Authenticator.objects.filter(pk=authenticator_id)
        .filter(Q(last_used_step__isnull=True) | Q(last_used_step__lt=step))
        .update(last_used_step=step)
    )
    return AppCode.ACCEPTED if accepted else AppCode.USED


def authenticator_confirmed(*, user: User) -> Authenticator | None:
    return Authenticator.objects.filter(user=user, confirmed_at__isnull=False).first()
