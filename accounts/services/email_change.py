"""A signed-in person changes the account's e-mail address (docs/sessions.md, "Changing the
e-mail address"): a fresh proof of the owner, a code to the new address, and then the new
address, the old one told, and every other session ended.

An address that another account has is 409 EMAIL_TAKEN, or, with ACCOUNTS_PREVENT_ENUMERATION,
the same answer as any other (a challenge no code confirms, as registration's) and an e-mail to
that address's owner. So that the two cannot be told apart afterwards either, the resend and the
confirmation look a challenge up by its ``requestId`` alone and check its person after the code.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from accounts import identifiers, liveness
from accounts.errors import CodeInvalid, EmailTaken
from accounts.models import Challenge, Session, User
from accounts.selectors import user_for_identifier
from accounts.services.audit import Kind, audit
from accounts.services.challenges import Started, challenge_resend, challenge_start
from accounts.services.code_checks import challenge_confirm
from accounts.services.factors import user_locked
from accounts.services.notices import Notice, notice_send
from accounts.services.reauthentication import Reauthentication, reauthenticated
from accounts.services.registration import email_taken_tell
from accounts.services.sessions import sessions_revoke_for_user
from platform_site.errors import ValidationFailed

EMAIL_CHANGE_TAKEN = "email_change_taken"  # the e-mail to a taken address's owner
SAME_ADDRESS = _("This is your address already.")


def email_change_start(
    *, user: User, new_email: str, reauth: Reauthentication, request: HttpRequest | None
) -> Started:
    """A code to ``new_email``, once the request proved its owner; confirming it makes the
    address the account's."""
    reauthenticated(user=user, reauth=reauth, request=request)
    if not identifiers.email_is_plain(new_email):
        raise ValidationFailed({"newEmail": [str(identifiers.LOOKALIKE_EMAIL)]})
    if identifiers.email_canonical(new_email) == user.email_canonical:
        raise ValidationFailed({"newEmail": [str(SAME_ADDRESS)]})
    existing = user_for_identifier(kind="email", identifier=new_email)
    if existing is None:
        return challenge_start(purpose=Challenge.Purpose.EMAIL_CHANGE, user=user, address=new_email)
    if not settings.ACCOUNTS_PREVENT_ENUMERATION:
        raise EmailTaken()
    with transaction.atomic():
        email_taken_tell(owner=existing, template=EMAIL_CHANGE_TAKEN)
        return challenge_start(purpose=Challenge.Purpose.EMAIL_CHANGE, user=None, address=new_email)


def email_change_resend(*, request_id: uuid.UUID, request: HttpRequest | None) -> Started:
    """A new code to the new address, after the resend cooldown."""
    return challenge_resend(
        request_id=request_id, purpose=Challenge.Purpose.EMAIL_CHANGE, request=request
    )


def email_change_confirm(
    *,
    user: User,
    request_id: uuid.UUID,
    code: str,
    session: Session | None,
    request: HttpRequest | None,
) -> User:
    """The code makes the challenge's address ``user``'s: the old address is told, and every
    other session of the person ends (``session``, the one confirming, stays). EmailTaken if
    another account took the address meanwhile."""
    confirmed = challenge_confirm(
        request_id=request_id, purpose=Challenge.Purpose.EMAIL_CHANGE, code=code
    )
    if confirmed.user.pk != user.pk:  # someone else's change: as if the code were wrong
        raise CodeInvalid(attempts_remaining=confirmed.challenge.attempts_left)
    return _email_changed(
        user=user, new_email=confirmed.challenge.address, session=session, request=request
    )


def _email_changed(
    *, user: User, new_email: str, session: Session | None, request: HttpRequest | None
) -> User:
    with transaction.atomic(), liveness.changing([user.pk]):
        locked = user_locked(user)
        old_email = locked.email
        old_canonical, locked.email = locked.email_canonical, new_email
        locked.email_canonical = identifiers.email_canonical(new_email)
        fields = ["email", "email_canonical"]
        free_login = not User.objects.filter(username=locked.email_canonical).exists()
        if locked.username == old_canonical and free_login:  # the login was the address
            locked.username, fields = locked.email_canonical, [*fields, "username"]
        try:
            with transaction.atomic():
                locked.save(update_fields=fields)
        except IntegrityError:  # another account took the address meanwhile
            raise EmailTaken() from None
        sessions_revoke_for_user(
            user=locked, reason="email_change", keep=None if session is None else session.pk
        )
        audit(Kind.EMAIL_CHANGED, user=locked, request=request)
        notice_send(
            Notice.EMAIL_CHANGED, user=locked, request=request, to=old_email, email=new_email
        )
    return locked
