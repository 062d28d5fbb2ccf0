"""The second factors' checks shared by a sign-in's second step
(accounts.services.sign_in_second_factor) and a signed-in person's reauthentication
(accounts.services.reauthentication): a code (SMS, authenticator app or recovery code) counted in
one run of wrong codes per account that locks it like wrong passwords; or a passkey's assertion,
which nobody can guess and which counts toward nothing (docs/sessions.md, "Second factors")."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone

from accounts import metrics
from accounts.device_tokens import device_token_gate_key
from accounts.devices import Device
from accounts.errors import AttemptsExceeded, CodeInvalid, PasskeyInvalid
from accounts.models import Challenge, User
from accounts.services.audit import Kind, audit
from accounts.services.code_checks import CodeWrong, Confirmed, challenge_confirm
from accounts.services.lockout import gate_held, gate_key, gate_of
from accounts.services.notices import Notice, notice_send
from accounts.services.passkey_assertions import assertion_verified, passkey_of
from accounts.services.recovery_codes import recovery_codes_remaining
from accounts.services.sign_in import counter_named, presented_token_id
from platform_site.errors import ApplicationError

# Wrong second-factor codes in a row (SMS, app and recovery codes alike, across sign-ins: two
# challenges' worth) that lock the account for ACCOUNTS_LOCKOUT_SECONDS: a password thief cannot
# try codes one sign-in after another.
SECOND_FACTOR_FAILURES_BEFORE_LOCK = 10


def recovery_code_told(
    confirmed: Confirmed, *, device: Device, request: HttpRequest | None
) -> None:
    """A recovery code that confirmed a challenge is used up: audited, and the person told."""
    if not confirmed.by_recovery_code:
        return
    user = confirmed.user
    remaining = recovery_codes_remaining(user=user)
    audit(Kind.RECOVERY_CODE_USED, user=user, request=request, remaining=remaining)
    notice_send(
        Notice.RECOVERY_CODE_USED, user=user, request=request, device=device, remaining=remaining
    )


def second_factor_passkey_check(
    *,
    request_id: uuid.UUID,
    purpose: Challenge.Purpose,
    credential: dict[str, Any],
    request: HttpRequest | None,
    owner: User | None = None,
) -> User:
    """The challenge ``request_id`` of ``purpose`` answered by one of its person's passkeys
    (user verification preferred, not required: a password came first): the person. Every
    answer spends one of the challenge's attempts, so an old assertion cannot be replayed
    forever; one that does not verify is PasskeyInvalid and locks nothing."""
    now = timezone.now()
    challenges = Challenge.objects.filter(
        pk=request_id,
        purpose=purpose,
        method=Challenge.Method.PASSKEY,
        used_at__isnull=True,
        attempts_left__gt=0,
        expires_at__gt=now,
    )
    if owner is not None:
        challenges = challenges.filter(user=owner)
    if not challenges.update(attempts_left=F("attempts_left") - 1):
        raise PasskeyInvalid()
    challenge = Challenge.objects.select_related("user").get(pk=request_id)
    passkey = passkey_of(credential)
    if challenge.user is None or passkey.user_id != challenge.user_id:
        raise PasskeyInvalid()
    asked = bytes(challenge.passkey_challenge or b"")
    assertion_verified(passkey, credential, asked, request, user_verification=False)
    if not Challenge.objects.filter(pk=request_id, used_at__isnull=True).update(used_at=now):
        raise PasskeyInvalid()  # a parallel answer came first
    return challenge.user


def second_factor_gate_key(user: User, token_id: str | None = None) -> str:
    if token_id is not None:
        return f"second-factor:{device_token_gate_key(token_id)}"
    return f"second-factor:user:{user.pk}"


def second_factor_code_check(
    *,
    request_id: uuid.UUID,
    purpose: Challenge.Purpose,
    code: str,
    device: Device,
    request: HttpRequest | None,
    owner: User | None = None,
) -> Confirmed:
    """``code`` (an SMS code, an app's code or a recovery code alike) against the challenge
    ``request_id`` of ``purpose`` (a sign-in's, or a signed-in ``owner``'s reauthentication),
    under the account's second-factor gate, which holds its run of wrong codes.

    A wrong code lengthens the run, a right one ends it; the one that makes it
    SECOND_FACTOR_FAILURES_BEFORE_LOCK locks the account's sign-in gate and closes its open
    sign-ins. Confirmations of one account take turns on the gate row, each committing its
    spent attempt with its verdict, so parallel codes cannot get more wrong ones compared than
    that. While the account is locked, whatever locked it, an open sign-in compares nothing and
    is closed (ATTEMPTS_EXCEEDED): the next sign-in answers 423 before another SMS is sent.

    A valid device token of the account sent with the code puts all of this on the token: its
    own run, its own gate locked, and only this sign-in closed, so a stranger's wrong codes
    neither lock its holder out nor are locked by it.
    """
    users = User.objects.filter(challenges__pk=request_id, challenges__purpose=purpose)
    user = users.filter(pk=owner.pk).first() if owner is not None else users.first()

    def confirmed() -> Confirmed:
        return challenge_confirm(
            request_id=request_id,
            purpose=purpose,
            code=code,
            user=owner,
            device_key=device.key,
            recovery_codes=True,
        )

    if user is None:  # unknown, or of another flow: no account to count for, no code is right
        return confirmed()
    outcome: Confirmed | ApplicationError
    token_id = presented_token_id(user=user, request=request)
    with gate_held(key=second_factor_gate_key(user, token_id)) as run:
        now = timezone.now()
        gate = gate_of(user=user, key=None if token_id is None else device_token_gate_key(token_id))
        if gate is not None and gate.locked_until is not None and gate.locked_until > now:
            _sign_ins_close(user, request_id=None if token_id is None else request_id)
            outcome = AttemptsExceeded()
        else:
            try:
                outcome = confirmed()
            except CodeWrong as error:
                outcome = error
                run.failures += 1
                if run.failures >= SECOND_FACTOR_FAILURES_BEFORE_LOCK:
                    run.failures = 0
                    _second_factor_lock(
                        user=user,
                        device=device,
                        request=request,
                        now=now,
                        token_id=token_id,
                        request_id=request_id,
                    )
            except (CodeInvalid, AttemptsExceeded) as error:  # nothing compared, or expired
                outcome = error
            else:
                run.failures = 0
    # Raised once the gate's transaction has committed the attempt and the run.
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def _sign_ins_close(user: User, *, request_id: uuid.UUID | None = None) -> None:
    """The account's open sign-ins, or only ``request_id``'s."""
    open_sign_ins = Challenge.objects.filter(
        user=user, purpose=Challenge.Purpose.SIGN_IN, used_at__isnull=True
    )
    if request_id is not None:
        open_sign_ins = open_sign_ins.filter(pk=request_id)
    open_sign_ins.update(attempts_left=0)


def _second_factor_lock(
    *,
    user: User,
    device: Device,
    request: HttpRequest | None,
    now: datetime,
    token_id: str | None,
    request_id: uuid.UUID,
) -> None:
    counter = (
        gate_key(user=user, kind="", identifier="")
        if token_id is None
        else device_token_gate_key(token_id)
    )
    with gate_held(key=counter) as gate:
        gate.locked_until = now + timedelta(seconds=settings.ACCOUNTS_LOCKOUT_SECONDS)
    metrics.lockouts.inc()
    audit(
        Kind.LOCKED,
        user=user,
        request=request,
        cause="second_factor",
        counter=counter_named(counter),
    )
    if token_id is not None:  # the account stays open to everyone else
        _sign_ins_close(user, request_id=request_id)
        return
    _sign_ins_close(user)
    notice_send(
        Notice.ACCOUNT_LOCKED,
        user=user,
        request=request,
        device=device,
        at=now,
        until=gate.locked_until,
    )
