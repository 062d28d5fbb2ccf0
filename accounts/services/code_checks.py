"""Checking a confirmation code against its challenge (accounts.services.challenges makes and
sends them; docs/sessions.md, "Confirmation codes"): every confirmation spends an attempt with
one conditional UPDATE that commits before the code is compared, so parallel guesses share one
budget; marking the challenge used is a second conditional UPDATE, so of two parallel right codes
exactly one succeeds. An authenticator app's code and a recovery code pass by being used up.
"""

from __future__ import annotations

import hmac
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.errors import AttemptsExceeded, CodeAlreadyUsed, CodeExpired, CodeInvalid
from accounts.models import Challenge, User
from accounts.services.authenticators import AppCode, authenticator_code_accept
from accounts.services.challenges import code_hash_of
from accounts.services.recovery_codes import recovery_code_normalize, recovery_code_spend

# Spend one attempt of a challenge still open; the row lock makes parallel spends take turns.
# A signed-in user's flow names its user: nobody spends another user's attempts. A sign-in by an
# authenticator app is bound to the device that typed the password: no other device spends its
# attempts either.
_SPEND = """
UPDATE accounts_challenge SET attempts_left = attempts_left - 1
WHERE id = %(id)s AND purpose = %(purpose)s AND used_at IS NULL AND attempts_left > 0
  AND (%(user_id)s::bigint IS NULL OR user_id = %(user_id)s::bigint)
  AND (method <> 'TOTP' OR device_key = '' OR device_key = %(device_key)s)
RETURNING attempts_left, code_hash, expires_at, user_id, method, authenticator_id
"""


class CodeWrong(CodeInvalid):
    """CODE_INVALID for a code that was compared with the challenge's and was wrong, an attempt
    spent on it: what the sign-in's run of wrong second-factor codes counts. Refusals that
    compared nothing (an unknown or finished ``requestId``, another device's, a parallel
    confirmation that came first) stay plain CodeInvalid."""


class CodeReused(CodeAlreadyUsed, CodeWrong):
    """CODE_ALREADY_USED for an app's code that passed before: told apart from a wrong one, and
    counted in the sign-in's run of wrong codes as one is."""


@dataclass(frozen=True)
class Confirmed:
    challenge: Challenge
    user: User
    by_recovery_code: bool = False


def challenge_confirm(
    *,
    request_id: uuid.UUID,
    purpose: Challenge.Purpose,
    code: str,
    user: User | None = None,
    device_key: str = "",
    recovery_codes: bool = False,
) -> Confirmed:
    """The challenge, now used, and its user, if ``code`` is its code; else CodeWrong (a wrong
    code), CodeReused (an app's code that passed before), CodeInvalid, CodeExpired or
    AttemptsExceeded. Must run outside a transaction, or in one that its caller commits whatever
    this raises (the sign-in's second-factor gate): the spent attempt must outlive the error.

    A TOTP challenge takes its authenticator app's code, and only from ``device_key`` when it
    was started from a device. With ``recovery_codes`` (a sign-in), one of the user's recovery
    codes confirms it as well, and is used up.
    """
    params: dict[str, str | int | uuid.UUID | None] = {
        "id": request_id,
        "purpose": purpose,
        "user_id": None if user is None else user.pk,
        "device_key": device_key,
    }
    with connection.cursor() as cursor:
        cursor.execute(_SPEND, params)
        row = cursor.fetchone()
    if row is None:
        raise _no_attempt_left(
            request_id=request_id, purpose=purpose, user=user, device_key=device_key
        )
    attempts_left, code_hash, expires_at, user_id, method, authenticator_id = row
    recovery = recovery_code_normalize(code) if recovery_codes else None
    if recovery is None and method in (Challenge.Method.EMAIL, Challenge.Method.SMS):
        return _confirm_sent_code(
            request_id=request_id,
            code=code,
            attempts_left=attempts_left,
            code_hash=code_hash,
            expires_at=expires_at,
            user_id=user_id,
            user=user,
        )
    return _confirm_app_or_recovery_code(
        request_id=request_id,
        code=code,
        recovery=recovery,
        attempts_left=attempts_left,
        expires_at=expires_at,
        user_id=user_id,
        user=user,
        authenticator_id=authenticator_id,
    )


def _no_attempt_left(
    *, request_id: uuid.UUID, purpose: Challenge.Purpose, user: User | None, device_key: str
) -> AttemptsExceeded | CodeInvalid:
    """Why a challenge had no attempt to spend, as the error to raise: its attempts are used up,
    or it is not one this confirmation may spend."""
    spent = Challenge.objects.filter(
        Q(device_key="") | Q(device_key=device_key) | ~Q(method=Challenge.Method.TOTP),
        pk=request_id,
        purpose=purpose,
        used_at__isnull=True,
        attempts_left=0,
    )
    if user is not None:
        spent = spent.filter(user=user)
    if spent.exists():
        return AttemptsExceeded()
    # Unknown, finished, of another flow or device: no code can be right.
    return CodeInvalid(attempts_remaining=0)


def _confirm_app_or_recovery_code(
    *,
    request_id: uuid.UUID,
    code: str,
    recovery: str | None,
    attempts_left: int,
    expires_at: datetime,
    user_id: int | None,
    user: User | None,
    authenticator_id: uuid.UUID | None,
) -> Confirmed:
    """An authenticator app's code, or (``recovery``, normalized) one of the user's recovery
    codes: neither is stored with the challenge, so each passes by being used up."""
    if expires_at <= timezone.now():
        raise CodeExpired(attempts_remaining=attempts_left)
    if user_id is None or (user is not None and user_id != user.pk):
        raise CodeInvalid(attempts_remaining=attempts_left)
    # Used and verified in one transaction: a code that does not pass leaves the challenge open,
    # and a challenge a parallel confirmation has just used spends no code (TOTP step, recovery).
    with transaction.atomic():
        used = Challenge.objects.filter(pk=request_id, used_at__isnull=True).update(
            used_at=timezone.now()
        )
        if not used:
            verdict = AppCode.WRONG
        elif recovery is not None:
            spent = recovery_code_spend(user_id=user_id, typed=recovery)
            verdict = AppCode.ACCEPTED if spent else AppCode.WRONG
        elif authenticator_id is not None:
            verdict = authenticator_code_accept(authenticator_id=authenticator_id, code=code)
        else:
            verdict = AppCode.WRONG
        if verdict is not AppCode.ACCEPTED:
            transaction.set_rollback(True)
    if not used:  # a parallel confirmation came first: nothing was compared
        raise CodeInvalid(attempts_remaining=attempts_left)
    if verdict is AppCode.USED:
        raise CodeReused(attempts_remaining=attempts_left)
    if verdict is not AppCode.ACCEPTED:
        raise CodeWrong(attempts_remaining=attempts_left)
    challenge = Challenge.objects.select_related("user").get(pk=request_id)
    return Confirmed(
        challenge=challenge,
        user=User.objects.get(pk=user_id),
        by_recovery_code=recovery is not None,
    )


def _confirm_sent_code(
    *,
    request_id: uuid.UUID,
    code: str,
    attempts_left: int,
    code_hash: str,
    expires_at: datetime,
    user_id: int | None,
    user: User | None,
) -> Confirmed:
    """A code the platform sent (e-mail, SMS), compared with its keyed hash. A challenge without
    a user does exactly the same work as one whose code is wrong."""
    right = hmac.compare_digest(code_hash, code_hash_of(request_id, code))
    if expires_at <= timezone.now():
        raise CodeExpired(attempts_remaining=attempts_left)
    if user_id is None or (user is not None and user_id != user.pk):
        raise CodeInvalid(attempts_remaining=attempts_left)
    if not right:
        raise CodeWrong(attempts_remaining=attempts_left)
    used = Challenge.objects.filter(pk=request_id, used_at__isnull=True).update(
        used_at=timezone.now()
    )
    if not used:  # a parallel confirmation with the same code came first
        raise CodeInvalid(attempts_remaining=attempts_left)
    challenge = Challenge.objects.select_related("user").get(pk=request_id)
    return Confirmed(challenge=challenge, user=User.objects.get(pk=user_id))
