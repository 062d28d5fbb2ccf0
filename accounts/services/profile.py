"""A cabinet user's own profile and sessions (two-factor sign-in: accounts.services.two_factor)."""

from __future__ import annotations

import uuid

import phonenumbers
from django.conf import settings
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from accounts import liveness
from accounts.errors import SessionNotFound
from accounts.models import CodeFactor, TwoFactorMethod, User
from accounts.selectors import sessions_live
from accounts.services.audit import Kind, audit
from accounts.services.factors import NOT_HELD, factors_held
from accounts.services.outbox import outbox_email
from accounts.services.sessions import session_revoke
from platform_site.errors import ValidationFailed

PHONE_ERROR = _("Enter a phone number in international format, such as +4915112345678.")


def phone_normalize(raw: str) -> str:
    """An international number in any common notation, as E.164; "" stays "" (no phone)."""
    raw = raw.strip()
    if not raw:
        return ""
    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        raise ValidationFailed({"phone": [str(PHONE_ERROR)]}) from None
    if not phonenumbers.is_valid_number(number):
        raise ValidationFailed({"phone": [str(PHONE_ERROR)]})
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def profile_update(
    *,
    user: User,
    first_name: str | None = None,
    last_name: str | None = None,
    phone: str | None = None,
    two_factor_method: str | None = None,
    request: HttpRequest | None,
) -> User:
    """Change the fields given. A changed phone (not a first one) is announced by e-mail; a
    user whose code factor is SMS cannot remove the phone its codes go to.
    ``two_factor_method``, the factor a sign-in asks for first, must be one the person holds."""
    fields: list[str] = []
    if two_factor_method is not None:
        if two_factor_method not in factors_held(user):
            raise ValidationFailed({"twoFactorMethod": [str(NOT_HELD)]})
        user.two_factor_method = TwoFactorMethod(two_factor_method)
        fields.append("two_factor_method")
    if first_name is not None:
        user.first_name, fields = first_name.strip(), [*fields, "first_name"]
    if last_name is not None:
        user.last_name, fields = last_name.strip(), [*fields, "last_name"]
    phone_changed, had_phone = False, bool(user.phone)
    if phone is not None:
        phone = phone_normalize(phone)
        if not phone and user.code_factor == CodeFactor.SMS:
            raise ValidationFailed(
                {"phone": [str(_("Two-factor sign-in sends its codes here: turn it off first."))]}
            )
        phone_changed = phone != user.phone
        user.phone, fields = phone, [*fields, "phone"]
    with liveness.changing([user.pk]):
        user.save(update_fields=fields)
        if phone_changed:
            audit(Kind.PHONE_CHANGED, user=user, request=request)
            # A first phone (the profile completed) is no news to tell; a changed one is.
            if user.email and had_phone:
                outbox_email(
                    to=user.email,
                    template="phone_changed",
                    context={"phone": user.phone or "-"},
                    user=user,
                )
    return user


def profile_language_set(*, user: User, language: str) -> User:
    """The language of ``user``'s security notices, as chosen with the cabinet's switch."""
    if language not in dict(settings.LANGUAGES) or language == user.language:
        return user
    with liveness.changing([user.pk]):
        user.language = language
        user.save(update_fields=["language"])
    return user


def session_revoke_own(*, user: User, session_id: uuid.UUID, request: HttpRequest | None) -> None:
    """End one of ``user``'s own live sessions; another's, or a dead one, is 404."""
    if not sessions_live(user=user).filter(pk=session_id).exists():
        raise SessionNotFound()
    if session_revoke(user_id=user.pk, session_id=session_id, reason="user"):
        audit(Kind.SESSION_REVOKED, user=user, request=request, session=str(session_id))
