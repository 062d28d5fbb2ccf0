"""Recovery codes: ten single-use codes that stand in for the second factor when it is lost
(docs/sessions.md, "Second factors").

A code is 10 characters from an alphabet without look-alikes (no 0/o, 1/l/i), about 49 bits,
shown as ``xxxxx-xxxxx``; only its keyed hash is stored (accounts.factor_secrets). Spending one
is one conditional UPDATE, so a code works once even when presented twice at the same moment.
"""

from __future__ import annotations

import secrets

from django.utils import timezone

from accounts.factor_secrets import recovery_code_hash
from accounts.models import RecoveryCode, User

COUNT = 10
LENGTH = 10
ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"


def _code_new() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def recovery_code_normalize(typed: str) -> str | None:
    """The code as stored, if ``typed`` has the shape of one (any case, dashes and spaces
    anywhere); None for anything else, such as a 6-digit code."""
    code = "".join(typed.split()).replace("-", "").lower()
    if len(code) != LENGTH or any(character not in ALPHABET for character in code):
        return None
    return code


def recovery_code_display(code: str) -> str:
    return f"{code[:5]}-{code[5:]}"


def recovery_codes_replace(*, user: User) -> list[str]:
    """A new set of codes for ``user``, returned to be shown once; the old set stops working.
    Runs in the caller's transaction."""
    RecoveryCode.objects.filter(user=user).delete()
    codes = [_code_new() for _ in range(COUNT)]
    RecoveryCode.objects.bulk_create(
        RecoveryCode(user=user, code_hash=recovery_code_hash(user_id=user.pk, code=code))
        for code in codes
    )
    return [recovery_code_display(code) for code in codes]


def recovery_code_spend(*, user_id: int, typed: str) -> bool:
    """True if ``typed`` is one of the user's unused codes, which is then used up."""
    code = recovery_code_normalize(typed)
    if code is None:
        return False
    return bool(
        RecoveryCode.objects.filter(
            user_id=user_id,
            code_hash=recovery_code_hash(user_id=user_id, code=code),
            used_at__isnull=True,
        ).update(used_at=timezone.now())
    )


def recovery_codes_remaining(*, user: User) -> int:
    if user.kind != User.Kind.USER or not user.two_factor_enabled:
        return 0
    return RecoveryCode.objects.filter(user=user, used_at__isnull=True).count()
