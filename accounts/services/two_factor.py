"""Two-factor sign-in: turning a second factor on (an SMS code to the profile's phone, or an
authenticator app), off, and the recovery codes that come with it (docs/sessions.md, "Second
factors").

One code factor at a time (``code_factor``), beside any passkeys (accounts.services.passkeys);
``two_factor_enabled`` and ``two_factor_method`` follow from both (accounts.services.factors).
Turning a code factor on (or an app replacing it) makes a new set of recovery codes, shown once;
every change is audited and the person told by e-mail.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts import liveness
from accounts.errors import (
    CodeInvalid,
    PhoneRequired,
    TwoFactorAlreadyEnabled,
    TwoFactorNotEnabled,
)
from accounts.factor_secrets import SecretUnreadable, secret_decrypt
from accounts.models import Authenticator, Challenge, CodeFactor, Passkey, User
from accounts.services.audit import Kind, audit
from accounts.services.authenticators import authenticator_create, otpauth_uri
from accounts.services.challenges import Started, challenge_open, challenge_pending, challenge_start
from accounts.services.code_checks import challenge_confirm
from accounts.services.factors import factor_change_tell, factors_settle, user_locked
from accounts.services.notices import Notice, notice_send
from accounts.services.reauthentication import Reauthentication, reauthenticated
from accounts.services.recovery_codes import recovery_codes_replace


@dataclass(frozen=True)
class Enabled:
    """A second factor turned on, and its recovery codes (shown only here)."""

    user: User
    recovery_codes: list[str]


@dataclass(frozen=True)
class TotpStarted:
    """An authenticator app to add: its secret and otpauth URI, shown only here."""

    challenge: Challenge
    secret: str
    otpauth_uri: str


def two_factor_enable_start(*, user: User) -> Started:
    """An SMS code to the profile's phone; confirming it makes SMS codes the code factor."""
    if user.code_factor:
        raise TwoFactorAlreadyEnabled()
    if not user.phone:
        raise PhoneRequired()
    pending = challenge_pending(purpose=Challenge.Purpose.ENABLE_TWO_FACTOR, user=user)
    if pending is not None and pending.challenge.address == user.phone:
        return pending
    return challenge_start(
        purpose=Challenge.Purpose.ENABLE_TWO_FACTOR, user=user, address=user.phone
    )


def two_factor_enable_confirm(
    *, user: User, request_id: uuid.UUID, code: str, request: HttpRequest | None
) -> Enabled:
    challenge = challenge_confirm(
        request_id=request_id,
        purpose=Challenge.Purpose.ENABLE_TWO_FACTOR,
        code=code,
        user=user,
    ).challenge
    user.refresh_from_db(fields=["phone"])
    if challenge.address != user.phone:  # the phone changed since: the code proved another one
        raise CodeInvalid(
            attempts_remaining=0, detail="The phone number changed since this code was sent."
        )
    return _turn_on(user=user, method=CodeFactor.SMS, request=request)


def totp_enable_start(
    *, user: User, reauth: Reauthentication, request: HttpRequest | None
) -> TotpStarted:
    """A new authenticator app for ``user``: a secret to put into the app, and a challenge that
    the app's first code confirms. An app being added before and not confirmed is dropped; a
    confirmed one stays the factor until the new one is confirmed. Replacing a code factor
    needs a fresh proof of the owner (accounts.services.reauthentication)."""
    if user.code_factor:
        reauthenticated(user=user, reauth=reauth, request=request)
    with transaction.atomic():
        Authenticator.objects.filter(user=user, confirmed_at__isnull=True).delete()
        authenticator, secret = authenticator_create(user=user)
        challenge = challenge_open(
            purpose=Challenge.Purpose.ENABLE_TOTP,
            method=Challenge.Method.TOTP,
            user=user,
            authenticator=authenticator,
        )
    return TotpStarted(
        challenge=challenge, secret=secret, otpauth_uri=otpauth_uri(user=user, secret=secret)
    )


def totp_enrolment(*, user: User, request_id: uuid.UUID) -> TotpStarted | None:
    """``user``'s app being added under ``request_id``, with its secret, while it waits for its
    first code: the cabinet's page shows the QR code again after a wrong code."""
    challenge = (
        Challenge.objects.select_related("authenticator")
        .filter(
            pk=request_id,
            user=user,
            purpose=Challenge.Purpose.ENABLE_TOTP,
            used_at__isnull=True,
            authenticator__confirmed_at__isnull=True,
        )
        .first()
    )
    if challenge is None or challenge.authenticator is None:
        return None
    try:
        secret = secret_decrypt(user_id=user.pk, stored=challenge.authenticator.secret)
    except SecretUnreadable:
        return None
    return TotpStarted(
        challenge=challenge, secret=secret, otpauth_uri=otpauth_uri(user=user, secret=secret)
    )


def totp_enable_confirm(
    *, user: User, request_id: uuid.UUID, code: str, request: HttpRequest | None
) -> Enabled:
    """The app's first code makes it the account's second factor, in place of the SMS code or
    of another app."""
    challenge = challenge_confirm(
        request_id=request_id, purpose=Challenge.Purpose.ENABLE_TOTP, code=code, user=user
    ).challenge
    assert challenge.authenticator_id is not None  # noqa: S101 (a TOTP challenge has one)
    return _turn_on(
        user=user,
        method=CodeFactor.TOTP,
        request=request,
        authenticator_id=challenge.authenticator_id,
    )


@transaction.atomic
def _turn_on(
    *,
    user: User,
    method: CodeFactor,
    request: HttpRequest | None,
    authenticator_id: uuid.UUID | None = None,
) -> Enabled:
    # The user's row, locked: two factors confirmed at once take turns, and the second finds
    # the state the first left.
    locked = user_locked(user)
    replaced_factor = locked.code_factor
    if replaced_factor and method == CodeFactor.SMS:
        raise TwoFactorAlreadyEnabled()
    with liveness.changing([user.pk]):
        # The factor this one replaces goes first: a user has one confirmed app at most.
        replaced = Authenticator.objects.filter(user=user)
        if authenticator_id is not None:
            replaced = replaced.exclude(pk=authenticator_id)
        replaced.delete()
        if authenticator_id is not None:
            confirmed = Authenticator.objects.filter(pk=authenticator_id, user=user).update(
                confirmed_at=timezone.now()
            )
            if not confirmed:  # another app was added and confirmed meanwhile
                raise CodeInvalid(
                    attempts_remaining=0, detail="Another authenticator app replaced this one."
                )
        locked.code_factor = method
        was_on = factors_settle(locked)
        codes = recovery_codes_replace(user=locked)
        # One event for one act: a code factor replacing another changes the factor, it does
        # not turn two-factor sign-in on a second time.
        if replaced_factor:
            audit(
                Kind.TWO_FACTOR_CHANGED,
                user=locked,
                request=request,
                method=method.value,
                replaced=replaced_factor,
            )
            notice_send(
                Notice.TWO_FACTOR_CHANGED, user=locked, request=request, method=method.value
            )
        else:
            factor_change_tell(
                user=locked, was_on=was_on, method=method.value, added=True, request=request
            )
    return Enabled(user=locked, recovery_codes=codes)


def _code_factor_off(locked: User) -> bool:
    """The code factor and its app gone (the recovery codes too once no factor is left);
    whether there was one."""
    had = bool(locked.code_factor)
    Authenticator.objects.filter(user=locked).delete()
    locked.code_factor = ""
    factors_settle(locked)
    return had


def two_factor_disable(
    *, user: User, reauth: Reauthentication, request: HttpRequest | None
) -> User:
    """Turn the code factor off (an SMS code or an app), with a fresh proof of the owner;
    passkeys stay, and with them two-factor sign-in. The person is told by e-mail."""
    reauthenticated(user=user, reauth=reauth, request=request)
    return _two_factor_disabled(user=user, request=request)


@transaction.atomic
def _two_factor_disabled(*, user: User, request: HttpRequest | None) -> User:
    locked = user_locked(user)
    method = locked.code_factor
    if not method:
        return locked
    with liveness.changing([user.pk]):
        _code_factor_off(locked)
        factor_change_tell(user=locked, was_on=True, method=method, added=False, request=request)
    return locked


@transaction.atomic
def two_factor_reset(*, user: User, actor: User | None) -> User:
    """An administrator's help for a person who lost the second factor and the recovery codes:
    two-factor sign-in off, every factor gone (passkeys too), audited with the administrator,
    the person told by e-mail."""
    locked = user_locked(user)
    with liveness.changing([user.pk]):
        was_on = locked.two_factor_enabled
        Passkey.objects.filter(user=locked).delete()
        _code_factor_off(locked)
        audit(Kind.TWO_FACTOR_RESET, user=locked, actor=actor, was_on=was_on)
        notice_send(Notice.TWO_FACTOR_RESET, user=locked)
    return locked


def recovery_codes_regenerate(
    *, user: User, reauth: Reauthentication, request: HttpRequest | None
) -> list[str]:
    """A new set of recovery codes, shown once, with a fresh proof of the owner; the old set
    stops working."""
    if not user.two_factor_enabled:
        raise TwoFactorNotEnabled()
    reauthenticated(user=user, reauth=reauth, request=request)
    return _recovery_codes_replaced(user=user, request=request)


@transaction.atomic
def _recovery_codes_replaced(*, user: User, request: HttpRequest | None) -> list[str]:
    codes = recovery_codes_replace(user=user)
    audit(Kind.RECOVERY_CODES_GENERATED, user=user, request=request)
    notice_send(Notice.RECOVERY_CODES_REPLACED, user=user, request=request)
    return codes
