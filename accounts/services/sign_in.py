"""Signing in with a login or e-mail and a password, in the order of docs/sessions.md,
"Signing in". The second factor's step is accounts.services.sign_in_second_factor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.http import HttpRequest
from django.utils import timezone

from accounts import metrics
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
    BadCredentials,
    CredentialsExpired,
    EmailNotConfirmed,
    StaffOnly,
    TwoFactorRequired,
)
from accounts.models import Challenge, Session, User
from accounts.ratelimits import auth_limits_consume
from accounts.selectors import user_for_identifier
from accounts.services.audit import Kind, audit
from accounts.services.challenges import challenge_pending, challenge_start
from accounts.services.lockout import Gate, gate_held, gate_key
from accounts.services.notices import Notice, device_is_new, notice_send
from accounts.services.sessions import session_start
from accounts.services.sign_in_challenges import factor_challenge_open
from accounts.services.tokens import TokenPair

IdentifierKind = Literal["email", "username"]


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


def credentials_check(
    *,
    kind: IdentifierKind,
    identifier: str,
    password: str,
    request: HttpRequest | None,
    failure: Kind = Kind.SIGN_IN_FAILED,
) -> User:
    """The user whose password this is, or AccountLocked / BadCredentials.

    Unknown identifiers cost the same password hashing and count toward a lock the same way, so
    neither the answer nor its timing tells whether an account exists. A wrong password is
    audited as ``failure``: what the password was typed for.
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
                    _gate_lock(
                        gate,
                        now=now,
                        user=user,
                        request=request,
                        kind=kind,
                        identifier=identifier,
                        counter=counter,
                        by_device_token=token_id is not None,
                    )
    # Decided under the gate, answered after its verdict is saved.
    if locked_until is not None:
        metrics.sign_ins.labels("locked").inc()
        raise AccountLocked(locked_until=locked_until, device_token=token_id is not None)
    if user is None or gate.failures:
        raise _failure_recorded(
            gate,
            user=user,
            request=request,
            identifier=identifier,
            counter=counter,
            failure=failure,
        )
    return user


def _gate_lock(
    gate: Gate,
    *,
    now: datetime,
    user: User | None,
    request: HttpRequest | None,
    kind: IdentifierKind,
    identifier: str,
    counter: str,
    by_device_token: bool,
) -> None:
    """The wrong password that reaches ACCOUNTS_LOCKOUT_THRESHOLD: the gate locked, audited, and
    the account's owner told."""
    gate.locked_until = now + timedelta(seconds=settings.ACCOUNTS_LOCKOUT_SECONDS)
    metrics.lockouts.inc()
    audit(
        Kind.LOCKED,
        user=user,
        request=request,
        identifier=identifier,
        counter=counter_named(counter),
    )
    # The e-mail says the account is locked; a token's lock leaves it open.
    if not by_device_token:
        notice_send(
            Notice.ACCOUNT_LOCKED,
            user=user,
            request=request,
            at=now,
            until=gate.locked_until,
            decoy_address=identifier if kind == "email" else "",
        )


def _failure_recorded(
    gate: Gate,
    *,
    user: User | None,
    request: HttpRequest | None,
    identifier: str,
    counter: str,
    failure: Kind,
) -> BadCredentials:
    """A refused password counted, audited and given to django-axes: the error to raise."""
    metrics.sign_ins.labels("bad_credentials").inc()
    audit(
        failure,
        user=user,
        request=request,
        identifier=identifier,
        counter=counter_named(counter),
    )
    if request is not None:  # django-axes' record of attempts, for the admin
        username = user.username if user is not None else identifier
        AxesProxyHandler.user_login_failed(
            sender=__name__, credentials={"username": username}, request=request
        )
    return BadCredentials(
        attempts_remaining=max(settings.ACCOUNTS_LOCKOUT_THRESHOLD - gate.failures, 0),
        locked_until=gate.locked_until,
    )


def counter_named(key: str) -> str:
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
    two-factor sign-in (428: the factor asked first); then a session bound to ``device``.

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
        raise _email_confirmation_asked(user)
    if credentials_expired(user=user, now=now):
        metrics.sign_ins.labels("credentials_expired").inc()
        raise CredentialsExpired()
    if user.two_factor_enabled and not two_factor_done:
        metrics.sign_ins.labels("two_factor_required").inc()
        raise _second_factor_asked(user, device=device)
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


def _email_confirmation_asked(user: User) -> EmailNotConfirmed:
    """The e-mail confirmation pending for ``user``, or a new one (its code e-mailed): the
    error to raise."""
    started = challenge_pending(purpose=Challenge.Purpose.REGISTRATION, user=user)
    if started is None:
        started = challenge_start(
            purpose=Challenge.Purpose.REGISTRATION, user=user, address=user.email
        )
    return EmailNotConfirmed(
        request_id=str(started.challenge.pk), retry_after_seconds=started.retry_after_seconds
    )


def _second_factor_asked(user: User, *, device: Device) -> TwoFactorRequired:
    """The sign-in's second step (accounts.services.sign_in_challenges): the error to raise."""
    return TwoFactorRequired(factor_challenge_open(user=user, device=device).as_json())
