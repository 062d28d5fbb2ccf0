"""The second factors a person holds, side by side (docs/sessions.md, "Second factors"): a code
factor (an SMS code or an authenticator app, one at a time) and passkeys.

``two_factor_enabled`` and ``two_factor_method`` follow from them. Every change of a factor
(accounts.services.two_factor, accounts.services.passkeys) settles both here, in the
transaction that made it and with the person's row locked, so two changes at once take turns
and the second settles on what the first left.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from accounts.models import Passkey, RecoveryCode, TwoFactorMethod, User
from accounts.services.audit import Kind, audit
from accounts.services.notices import Notice, notice_send

NOT_HELD = _("This is not one of your second factors.")


def user_locked(user: User) -> User:
    """``user``'s row, locked until the transaction ends, as it is now."""
    return User.objects.select_for_update().get(pk=user.pk)


def factors_held(user: User) -> list[TwoFactorMethod]:
    """The factors a sign-in may ask ``user`` for: the code factor, then passkeys."""
    held = [TwoFactorMethod(user.code_factor)] if user.code_factor else []
    if Passkey.objects.filter(user=user).exists():
        held.append(TwoFactorMethod.PASSKEY)
    return held


def factors_settle(user: User) -> bool:
    """Write ``user``'s two_factor_enabled and two_factor_method from the factors held (the
    caller holds the row's lock): the first factor stays as chosen while it is held; otherwise
    it is the code factor, else passkeys. With no factor left the recovery codes go too.
    Whether two-factor sign-in was on before."""
    held = factors_held(user)
    was_on = user.two_factor_enabled
    user.two_factor_enabled = bool(held)
    if held and user.two_factor_method not in held:
        user.two_factor_method = held[0]
    if not held:
        user.two_factor_method = TwoFactorMethod.SMS
        RecoveryCode.objects.filter(user=user).delete()
    user.save(update_fields=["code_factor", "two_factor_enabled", "two_factor_method"])
    return was_on


def factor_change_tell(
    *, user: User, was_on: bool, method: str, added: bool, request: HttpRequest | None
) -> None:
    """Audit and e-mail that ``method`` was added or removed (after factors_settle): two-factor
    sign-in turned on or off by it, or a factor added or removed beside others."""
    if added:
        turned = not was_on
        notice = Notice.TWO_FACTOR_ENABLED if turned else Notice.FACTOR_ADDED
        kind = Kind.TWO_FACTOR_ENABLED if turned else Kind.FACTOR_ADDED
    else:
        turned = not user.two_factor_enabled
        notice = Notice.TWO_FACTOR_DISABLED if turned else Notice.FACTOR_REMOVED
        kind = Kind.TWO_FACTOR_DISABLED if turned else Kind.FACTOR_REMOVED
    if method != TwoFactorMethod.PASSKEY:  # a passkey has its own events, with its id
        audit(kind, user=user, request=request, method=method)
    notice_send(notice, user=user, request=request, method=method)
