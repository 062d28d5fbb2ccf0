"""Signing in with a login or e-mail and a password: the outcome order of contract section 3."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.functions import Lower
from django.http import HttpRequest
from django.utils import timezone

from accounts import metrics
from accounts.devices import Device
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    BadCredentials,
    CredentialsExpired,
)
from accounts.models import Session, User
from accounts.services.lockout import gate_held, gate_key
from accounts.services.sessions import session_start
from accounts.services.tokens import TokenPair

IdentifierKind = Literal["email", "username"]


@dataclass(frozen=True)
class SignIn:
    user: User
    session: Session
    tokens: TokenPair


def user_for_identifier(*, kind: IdentifierKind, identifier: str) -> User | None:
    """E-mail addresses match whatever their case (cabinet users only); logins match exactly."""
    if kind == "email":
        return (
            User.objects.alias(email_lower=Lower("email"))
            .filter(email_lower=identifier.lower(), kind=User.Kind.USER)
            .first()
        )
    return User.objects.filter(username=identifier).first()


def credentials_check(
    *, kind: IdentifierKind, identifier: str, password: str, request: HttpRequest | None
) -> User:
    """The user whose password this is, or AccountLocked / BadCredentials.

    Unknown identifiers cost the same password hashing and count toward a lock the same way, so
    neither the answer nor its timing tells whether an account exists.
    """
    user = user_for_identifier(kind=kind, identifier=identifier)
    with gate_held(key=gate_key(user=user, kind=kind, identifier=identifier)) as gate:
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
    # Decided under the gate, answered after its verdict is saved.
    if locked_until is not None:
        metrics.sign_ins.labels("locked").inc()
        raise AccountLocked(locked_until=locked_until)
    if user is None or gate.failures:
        metrics.sign_ins.labels("bad_credentials").inc()
        if request is not None:  # django-axes keeps the record (AccessAttempt, admin)
            username = user.username if user is not None else identifier
            user_login_failed.send(
                sender=__name__, credentials={"username": username}, request=request
            )
        raise BadCredentials()
    return user


def credentials_expired(*, user: User, now: datetime) -> bool:
    """Set per account by an administrator, or by ACCOUNTS_PASSWORD_MAX_AGE_DAYS for people."""
    if user.credentials_expire_at is not None and user.credentials_expire_at <= now:
        return True
    max_age = settings.ACCOUNTS_PASSWORD_MAX_AGE_DAYS
    return bool(
        max_age
        and user.kind == User.Kind.USER
        and user.password_changed_at is not None
        and user.password_changed_at + timedelta(days=max_age) <= now
    )


def sign_in(
    *,
    kind: IdentifierKind,
    identifier: str,
    password: str,
    device: Device,
    request: HttpRequest | None,
) -> SignIn:
    """Check, in the contract's order: lock, password, disabled/expired account, expired
    credentials; then start a session bound to ``device``."""
    user = credentials_check(kind=kind, identifier=identifier, password=password, request=request)
    now = timezone.now()
    if not user.is_active:
        metrics.sign_ins.labels("disabled").inc()
        raise AccountDisabled()
    if user.account_expires_at is not None and user.account_expires_at <= now:
        metrics.sign_ins.labels("expired").inc()
        raise AccountExpired()
    if credentials_expired(user=user, now=now):
        metrics.sign_ins.labels("credentials_expired").inc()
        raise CredentialsExpired()
    session, tokens = session_start(user=user, device=device)
    metrics.sign_ins.labels("success").inc()
    if request is not None:  # last_login, and django-axes' AccessLog
        user_logged_in.send(sender=User, request=request, user=user)
    return SignIn(user=user, session=session, tokens=tokens)
