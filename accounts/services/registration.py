"""Registration with e-mail confirmation by code (docs/sessions.md, "Confirmation codes")."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone, translation

from accounts import identifiers, liveness
from accounts.devices import Device
from accounts.errors import EmailTaken
from accounts.models import Challenge, OutboxMessage, User
from accounts.ratelimits import auth_limits_consume
from accounts.selectors import user_for_identifier
from accounts.services.audit import Kind, audit
from accounts.services.challenges import Started, challenge_start
from accounts.services.code_checks import challenge_confirm
from accounts.services.outbox import outbox_email
from accounts.services.passwords import password_validate
from accounts.services.sign_in import SignIn, sign_in_continue
from platform_site.errors import ValidationFailed

USERNAME_MAX_LENGTH = 150
EMAIL_TAKEN = "email_taken"  # the e-mail's template, and its outbox rows' label


def language_of_request() -> str:
    """The language the request is answered in (Accept-Language, or the cabinet's switch), if
    the platform speaks it: the account keeps it for its security notices."""
    language = (translation.get_language() or "").split("-")[0]
    return language if language in dict(settings.LANGUAGES) else ""


def _username_for(email: str) -> str:
    """The address in canonical form when it is free as a login; otherwise a generated one."""
    candidate = identifiers.email_canonical(email)
    if (
        len(candidate) <= USERNAME_MAX_LENGTH
        and not User.objects.filter(username=candidate).exists()
    ):
        return candidate
    return f"user-{secrets.token_hex(6)}"


def register(*, email: str, password: str, request: HttpRequest | None) -> Started:
    """A new cabinet user with an unconfirmed e-mail and a code on its way there.

    A taken address (the same in canonical form: accounts.identifiers) is 409 EMAIL_TAKEN, or,
    with ACCOUNTS_PREVENT_ENUMERATION, the same 200 as any other registration (with a challenge
    no code can confirm) and an e-mail to the owner. An address that is not plain is a 400
    whether or not it is taken.
    """
    auth_limits_consume(request, kind="email", identifier=email)
    if not identifiers.email_is_plain(email):
        raise ValidationFailed({"email": [str(identifiers.LOOKALIKE_EMAIL)]})
    existing = user_for_identifier(kind="email", identifier=email)
    if existing is None:
        password_validate(password, user=User(email=email))
        try:
            with transaction.atomic():
                user = User(
                    username=_username_for(email),
                    email=email,
                    email_canonical=identifiers.email_canonical(email),
                    kind=User.Kind.USER,
                    language=language_of_request() if request is not None else "",
                )
                user.set_password(password)
                user.save()
                audit(Kind.REGISTERED, user=user, request=request)
                return challenge_start(
                    purpose=Challenge.Purpose.REGISTRATION, user=user, address=email
                )
        except IntegrityError:  # registered in parallel, or the login was taken meanwhile
            existing = user_for_identifier(kind="email", identifier=email)
            if existing is None:
                raise
    if not settings.ACCOUNTS_PREVENT_ENUMERATION:
        raise EmailTaken()
    password_validate(password, user=User(email=email))  # the same answers as a new address
    make_password(password)  # and the same hashing time
    with transaction.atomic():
        email_taken_tell(owner=existing)
        return challenge_start(purpose=Challenge.Purpose.REGISTRATION, user=None, address=email)


def email_taken_tell(*, owner: User, template: str = EMAIL_TAKEN) -> None:
    """The e-mail telling ``owner`` that somebody tried to register their address (or, with
    ``template``, to make it their own): one per ACCOUNTS_CODE_RESEND_SECONDS at most, or
    registrations would mail-bomb them. Within that
    time the same e-mail is written for nobody and skipped by the outbox, like a reset's for an
    unknown address: the request does the same work and answers the same 200.

    The outbox's rows are the record of what was sent: written in the transaction that sends,
    they count only once committed, and every worker reads them (a mark in the cache could
    outlive a rolled-back e-mail, or vanish with the cache). Runs in the caller's transaction.
    """
    # The owner's row, locked: parallel registrations of one address take turns, and each finds
    # the e-mails of those before it.
    User.objects.select_for_update().filter(pk=owner.pk).exists()
    since = timezone.now() - timedelta(seconds=settings.ACCOUNTS_CODE_RESEND_SECONDS)
    told = OutboxMessage.objects.filter(
        user=owner, template=template, created_at__gt=since
    ).exists()
    outbox_email(
        to=owner.email,
        template=template,
        context={},
        user=None if told else owner,
        requires_account=told,
    )


def email_confirm(
    *, request_id: uuid.UUID, code: str, device: Device, request: HttpRequest | None
) -> SignIn:
    """The e-mailed code confirms the address; the sign-in then goes on where it stopped."""
    auth_limits_consume(request, kind="requestId", identifier=str(request_id))
    user = challenge_confirm(
        request_id=request_id, purpose=Challenge.Purpose.REGISTRATION, code=code
    ).user
    if not user.email_confirmed:
        with liveness.changing([user.pk]):
            user.email_confirmed = True
            user.save(update_fields=["email_confirmed"])
            audit(Kind.EMAIL_CONFIRMED, user=user, request=request)
    return sign_in_continue(user=user, device=device, request=request)
