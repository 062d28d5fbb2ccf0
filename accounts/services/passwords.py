"""Passwords: the ones the platform generates, changing one's own, and resetting it by e-mail."""

from __future__ import annotations

import secrets
import uuid

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts import liveness
from accounts.device_tokens import device_token_issue
from accounts.devices import Device
from accounts.errors import BadCredentials
from accounts.models import Challenge, User
from accounts.ratelimits import auth_limits_consume
from accounts.selectors import user_for_identifier
from accounts.services.audit import Kind, audit
from accounts.services.challenges import Started, challenge_pending, challenge_start
from accounts.services.code_checks import challenge_confirm
from accounts.services.lockout import gate_unlock
from accounts.services.notices import Notice, notice_send
from accounts.services.sessions import session_start, sessions_revoke_for_user
from accounts.services.sign_in import SignIn, credentials_check, presented_token_id
from platform_site.errors import ValidationFailed

# 24 random bytes: 192 bits, above the 128 the platform promises, URL-safe to paste anywhere.
GENERATED_PASSWORD_BYTES = 24

CURRENT_PASSWORD_WRONG = _("The current password is wrong.")


def password_generate() -> str:
    return secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)


def password_validate(password: str, *, user: User, field: str = "password") -> None:
    """Django's validators (length, common passwords, similarity to ``user``): 400 with
    ``errors[field]``."""
    try:
        validate_password(password, user=user)
    except ValidationError as error:
        raise ValidationFailed({field: list(error.messages)}) from None


def _password_set(user: User, password: str) -> None:
    """A new password clears what an old one left: the administrator's requirement and an
    expiry date already past."""
    user.set_password(password)
    user.reset_password_required = False
    fields = ["password", "password_changed_at", "reset_password_required"]
    if user.credentials_expire_at is not None and user.credentials_expire_at <= timezone.now():
        user.credentials_expire_at = None
        fields.append("credentials_expire_at")
    with liveness.changing([user.pk]):
        user.save(update_fields=fields)


def password_change(
    *,
    user: User,
    current_password: str,
    new_password: str,
    device: Device,
    request: HttpRequest | None,
) -> SignIn:
    """Change one's own password: every session ends, and this device gets a new pair (role USER).

    A wrong current password counts toward the lock like a wrong sign-in.
    """
    try:
        credentials_check(
            kind="username",
            identifier=user.username,
            password=current_password,
            request=request,
            failure=Kind.PASSWORD_CHANGE_FAILED,
        )
    except BadCredentials:
        raise ValidationFailed({"currentPassword": [str(CURRENT_PASSWORD_WRONG)]}) from None
    password_validate(new_password, user=user, field="newPassword")
    with transaction.atomic():
        _password_set(user, new_password)
        sessions_revoke_for_user(user=user, reason="password_change")
        session, tokens = session_start(user=user, device=device)
        audit(Kind.PASSWORD_CHANGED, user=user, request=request)
        notice_send(Notice.PASSWORD_CHANGED, user=user, request=request, device=device)
    # The current password proves as much as a sign-in's: the device token is renewed, or new.
    device_token = device_token_issue(
        user=user, token_id=presented_token_id(user=user, request=request)
    )
    return SignIn(user=user, session=session, tokens=tokens, device_token=device_token)


@transaction.atomic
def password_set_by_administrator(*, user: User, actor: User | None) -> None:
    """What follows a password an administrator set (or made unusable) in the admin's "Change
    password" form, which has saved it: like any other change, every session of the user ends,
    and the change is audited. A requirement to change it stays as the administrator set it."""
    sessions_revoke_for_user(user=user, reason="password_change")
    audit(Kind.PASSWORD_CHANGED, user=user, actor=actor)
    notice_send(Notice.PASSWORD_CHANGED, user=user)


def password_reset_request(*, email: str, request: HttpRequest | None) -> Started:
    """A reset code for the account of ``email``, if there is one. Unknown addresses get the same
    work and the same answer, with a challenge that no code confirms (docs/sessions.md,
    "Confirmation codes")."""
    auth_limits_consume(request, kind="email", identifier=email)
    user = user_for_identifier(kind="email", identifier=email)
    # Codes go only to the stored address, however the typed one is written (look-alikes).
    address = user.email if user is not None else email
    pending = challenge_pending(purpose=Challenge.Purpose.PASSWORD_RESET, address=address)
    if pending is not None:
        return pending
    with transaction.atomic():
        return challenge_start(purpose=Challenge.Purpose.PASSWORD_RESET, user=user, address=address)


def password_reset_address(request_id: uuid.UUID) -> str:
    """The address a reset challenge was sent to ("" if none): the new password is checked for
    similarity against it, the same way whether or not an account has it."""
    challenge = Challenge.objects.filter(
        pk=request_id, purpose=Challenge.Purpose.PASSWORD_RESET
    ).first()
    return challenge.address if challenge is not None else ""


def password_reset_confirm(
    *, request_id: uuid.UUID, code: str, new_password: str, request: HttpRequest | None
) -> User:
    """The e-mailed code sets a new password; the lock is cleared, every session ends, and the
    address counts as confirmed (the code proved it)."""
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    password_validate(
        new_password, user=User(email=password_reset_address(request_id)), field="newPassword"
    )
    user = challenge_confirm(
        request_id=request_id, purpose=Challenge.Purpose.PASSWORD_RESET, code=code
    ).user
    with liveness.changing([user.pk]):
        _password_set(user, new_password)
        if not user.email_confirmed:
            user.email_confirmed = True
            user.save(update_fields=["email_confirmed"])
        gate_unlock(user=user)
        sessions_revoke_for_user(user=user, reason="password_reset")
        audit(Kind.PASSWORD_RESET, user=user, request=request)
        notice_send(Notice.PASSWORD_RESET, user=user, request=request)
    return user
