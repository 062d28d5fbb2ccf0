"""Signing in with a login or e-mail and a password, in the order of docs/sessions.md,
"Signing in"."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.http import HttpRequest
from django.utils import timezone

from accounts import identifiers, metrics
from accounts.device_tokens import (
    device_token_gate_key,
    device_token_id,
    device_token_issue,
    device_token_sent,
)
from accounts.devices import Device
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    CodeInvalid,
    CredentialsExpired,
    EmailNotConfirmed,
    StaffOnly,
    TwoFactorRequired,
)
from accounts.models import Challenge, Session, TwoFactorMethod, User
from accounts.services.audit import Kind, audit
from accounts.services.authenticators import authenticator_confirmed
from accounts.services.challenges import (
    CodeWrong,
    Confirmed,
    challenge_confirm,
    challenge_open_totp,
    challenge_pending,
    challenge_start,
)
from accounts.services.lockout import gate_held, gate_key, gate_of
from accounts.services.notices import Notice, device_is_new, notice_send
from accounts.services.recovery_codes import recovery_codes_remaining
from accounts.services.sessions import session_start
from accounts.services.tokens import TokenPair
from platform_site.errors import ApplicationError
from platform_site.ratelimits import auth_limits_consume

IdentifierKind = Literal["email", "username"]

# Wrong second-factor codes in a row (SMS, app and recovery codes alike, across sign-ins: two
# challenges' worth) that lock the account for ACCOUNTS_LOCKOUT_SECONDS: a password thief cannot
# try codes one sign-in after another.
SECOND_FACTOR_FAILURES_BEFORE_LOCK = 10


@dataclass(frozen=True)
class SignIn:
    user: User
    session: Session
    tokens: TokenPair
    device_token: str  # the client's proof of this sign-in (accounts.device_tokens)


def presented_token_id(*, user: User | None, request: HttpRequest | None) -> str | None:
    """The id of the valid device token of ``user`` that ``request`` sent back, if any."""
    if request is None:
        return None
    return device_token_id(token=device_token_sent(request), user=user)


def user_for_identifier(*, kind: IdentifierKind, identifier: str) -> User | None:
    """E-mail addresses match in canonical form (cabinet users only); logins match exactly, as
    their NFKC form (accounts.identifiers)."""
    if kind == "email":
        canonical = identifiers.email_canonical(identifier)
        return User.objects.filter(email_canonical=canonical, kind=User.Kind.USER).first()
    return User.objects.filter(username=identifiers.login_canonical(identifier)).first()


def credentials_check(
    *, kind: IdentifierKind, identifier: str, password: str, request: HttpRequest | None
) -> User:
    """The user whose password this is, or AccountLocked / BadCredentials.

    Unknown identifiers cost the same password hashing and count toward a lock the same way, so
    neither the answer nor its timing tells whether an account exists.
    """
    user = user_for_identifier(kind=kind, identifier=identifier)
    # A client that proves an earlier sign-in to this account counts on its own gate: a stranger's
    # wrong passwords, which lock the account's gate, do not lock it out (docs/sessions.md).
    token_id = presented_token_id(user=user, request=request)
    counter = (
        device_token_gate_key(token_id)
        if token_id is not None
        else gate_key(user=user, kind=kind, identifier=identifier)
    )
    with gate_held(key=counter) as gate:
        now = timezone.now()
        locked_until = gate.locked_until if gate.locked_until and gate.locked_until > now else None
        if locked_until is None:
            if gate.locked_until is not None:  # the lock ran out: a fresh count
                gate.failures, gate.locked_until = 0, None
            if user is None:
                make_password(password)  # the hashing a real check costs
            if user is not None and user.check_password(password):
                gate.failures = 0
            else:
                gate.failures += 1
                if gate.failures >= settings.ACCOUNTS_LOCKOUT_THRESHOLD:
                    gate.locked_until = now + timedelta(seconds=settings.ACCOUNTS_LOCKOUT_SECONDS)
                    metrics.lockouts.inc()
                    audit(
                        Kind.LOCKED,
                        user=user,
                        request=request,
                        identifier=identifier,
                        counter=_counter_named(counter),
                    )
                    # The e-mail says the account is locked; a token's lock leaves it open.
                    if token_id is None:
                        notice_send(
                            Notice.ACCOUNT_LOCKED,
                            user=user,
                            request=request,
                            at=now,
                            until=gate.locked_until,
                            decoy_address=identifier if kind == "email" else "",
                        )
    # Decided under the gate, answered after its verdict is saved.
    if locked_until is not None:
        metrics.sign_ins.labels("locked").inc()
        raise AccountLocked(locked_until=locked_until, device_token=token_id is not None)
    if user is None or gate.failures:
        metrics.sign_ins.labels("bad_credentials").inc()
        audit(
            Kind.SIGN_IN_FAILED,
            user=user,
            request=request,
            identifier=identifier,
            counter=_counter_named(counter),
        )
        if request is not None:  # django-axes' record of attempts, for the admin
            username = user.username if user is not None else identifier
            AxesProxyHandler.user_login_failed(
                sender=__name__, credentials={"username": username}, request=request
            )
        raise BadCredentials(
            attempts_remaining=max(settings.ACCOUNTS_LOCKOUT_THRESHOLD - gate.failures, 0),
            locked_until=gate.locked_until,
        )
    return user


def _counter_named(key: str) -> str:
    """The gate a failure went to, as the audit log names it: ``account``, ``unknown`` or
    ``device:<token id>`` (a token's id, never the token)."""
    if key.startswith("device:"):
        return key
    return "unknown" if key.startswith("unknown:") else "account"


def credentials_expired(*, user: User, now: datetime) -> bool:
    """Set per account by an administrator, or by ACCOUNTS_PASSWORD_MAX_AGE_DAYS for people."""
    if user.credentials_expire_at is not None and user.credentials_expire_at <= now:
        return True
    max_age = settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS
    # A password set outside set_password (an import, a fixture) counts from the account's start.
    changed_at = user.password_changed_at or user.date_joined
    return bool(
        max_age and user.kind == User.Kind.USER and changed_at + timedelta(days=max_age) <= now
    )


def sign_in(
    *,
    kind: IdentifierKind,
    identifier: str,
    password: str,
    device: Device,
    request: HttpRequest | None,
    staff_only: bool = False,
) -> SignIn:
    """Check, in the documented order: lock, password, then the account's state
    (:func:`sign_in_continue`). ``staff_only`` is the administration's door: the same gate,
    and StaffOnly (403) right after the password for an account that is not staff. Counts
    against the rate limits of the client's IP and of the account named first."""
    auth_limits_consume(request, kind=kind, identifier=identifier)
    user = credentials_check(kind=kind, identifier=identifier, password=password, request=request)
    if staff_only and not user.is_staff:
        metrics.sign_ins.labels("staff_only").inc()
        raise StaffOnly()
    return sign_in_continue(user=user, device=device, request=request)


def sign_in_continue(
    *, user: User, device: Device, request: HttpRequest | None, two_factor_done: bool = False
) -> SignIn:
    """The steps after the password (docs/sessions.md, "Signing in"): disabled or expired
    account (403), unconfirmed e-mail (409, a code e-mailed), expired credentials (401),
    two-factor sign-in (428, a code sent by SMS); then a session bound to ``device``.

    Also the end of e-mail confirmation and of two-factor confirmation, which must not skip
    what comes after them. The sign-in answers a device token: the one the client sent back,
    renewed, or a new one.
    """
    now = timezone.now()
    if not user.is_active:
        metrics.sign_ins.labels("disabled").inc()
        raise AccountDisabled()
    if user.account_expires_at is not None and user.account_expires_at <= now:
        metrics.sign_ins.labels("expired").inc()
        raise AccountExpired()
    if user.kind == User.Kind.USER and not user.email_confirmed:
        metrics.sign_ins.labels("email_not_confirmed").inc()
        started = challenge_pending(purpose=Challenge.Purpose.REGISTRATION, user=user)
        if started is None:
            started = challenge_start(
                purpose=Challenge.Purpose.REGISTRATION, user=user, address=user.email
            )
        raise EmailNotConfirmed(
            request_id=str(started.challenge.pk), retry_after_seconds=started.retry_after_seconds
        )
    if credentials_expired(user=user, now=now):
        metrics.sign_ins.labels("credentials_expired").inc()
        raise CredentialsExpired()
    if user.two_factor_enabled and not two_factor_done:
        metrics.sign_ins.labels("two_factor_required").inc()
        authenticator = (
            authenticator_confirmed(user=user)
            if user.two_factor_method == TwoFactorMethod.TOTP
            else None
        )
        if authenticator is not None:
            challenge = challenge_open_totp(
                purpose=Challenge.Purpose.SIGN_IN,
                user=user,
                authenticator=authenticator,
                device_key=device.key,
            )
            raise TwoFactorRequired(
                request_id=str(challenge.pk), retry_after_seconds=None, confirm_method="TOTP"
            )
        started = challenge_pending(purpose=Challenge.Purpose.SIGN_IN, user=user)
        if started is None:
            started = challenge_start(
                purpose=Challenge.Purpose.SIGN_IN,
                user=user,
                address=user.phone,
                device_key=device.key,
            )
        raise TwoFactorRequired(
            request_id=str(started.challenge.pk), retry_after_seconds=started.retry_after_seconds
        )
    new_device = user.kind == User.Kind.USER and device_is_new(user=user, device=device, now=now)
    session, tokens = session_start(user=user, device=device)
    # Written here, once: Django's own writer (on user_logged_in) is disconnected (accounts.apps).
    User.objects.filter(pk=user.pk).update(last_login=now)
    user.last_login = now
    if new_device:
        notice_send(Notice.NEW_DEVICE_SIGN_IN, user=user, request=request, device=device, at=now)
    metrics.sign_ins.labels("success").inc()
    audit(Kind.SIGN_IN, user=user, request=request, session=str(session.pk))
    if request is not None:  # django-axes' record of attempts, for the admin
        AxesProxyHandler.user_logged_in(sender=__name__, request=request, user=user)
    device_token = device_token_issue(
        user=user, token_id=presented_token_id(user=user, request=request)
    )
    return SignIn(user=user, session=session, tokens=tokens, device_token=device_token)


def sign_in_two_factor_confirm(
    *, request_id: uuid.UUID, code: str, device: Device, request: HttpRequest | None
) -> SignIn:
    """The second step of a sign-in with 2FA: the SMS code, the authenticator app's code, or
    one of the user's recovery codes (used up, and the user told by e-mail); then a session.

    Every kind of code counts toward one run of wrong codes per account, across sign-ins; that
    many in a row lock the account like wrong passwords (:func:`_second_factor_check`). With a
    valid device token of the account, the run and the lock are the token's own.
    """
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    confirmed = _second_factor_check(
        request_id=request_id, code=code, device=device, request=request
    )
    user = confirmed.user
    if confirmed.by_recovery_code:
        remaining = recovery_codes_remaining(user=user)
        audit(Kind.RECOVERY_CODE_USED, user=user, request=request, remaining=remaining)
        notice_send(
            Notice.RECOVERY_CODE_USED,
            user=user,
            request=request,
            device=device,
            remaining=remaining,
        )
    return sign_in_continue(user=user, device=device, request=request, two_factor_done=True)


def second_factor_gate_key(user: User, token_id: str | None = None) -> str:
    if token_id is not None:
        return f"second-factor:{device_token_gate_key(token_id)}"
    return f"second-factor:user:{user.pk}"


def _second_factor_check(
    *, request_id: uuid.UUID, code: str, device: Device, request: HttpRequest | None
) -> Confirmed:
    """``code`` (an SMS code, an app's code or a recovery code alike) against the sign-in
    ``request_id``, under the account's second-factor gate, which holds its run of wrong codes.

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
    user = User.objects.filter(
        challenges__pk=request_id, challenges__purpose=Challenge.Purpose.SIGN_IN
    ).first()
    if user is None:  # unknown, or of another flow: no account to count for, no code is right
        return _sign_in_code_confirm(request_id=request_id, code=code, device=device)
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
                outcome = _sign_in_code_confirm(request_id=request_id, code=code, device=device)
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


def _sign_in_code_confirm(*, request_id: uuid.UUID, code: str, device: Device) -> Confirmed:
    return challenge_confirm(
        request_id=request_id,
        purpose=Challenge.Purpose.SIGN_IN,
        code=code,
        device_key=device.key,
        recovery_codes=True,
    )


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
        counter=_counter_named(counter),
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
