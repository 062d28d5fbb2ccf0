"""The sign-in gate: 5 consecutive wrong passwords lock an account for ACCOUNTS_LOCKOUT_SECONDS.

Attempts on one account take turns: each holds the account's gate row (a row lock) while its
password is checked, and writes the verdict before the next one reads the count. However many
attempts arrive in parallel, at most the threshold of wrong passwords are checked before the
lock, and parallel attempts with the right password never count against each other. The queue
per account is short: per-account rate limits come first, and a wait beyond LOCK_WAIT turns
into 429.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from axes.utils import reset as axes_reset
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from psycopg import errors

from accounts.errors import SignInBusy
from accounts.identifiers import identifier_key
from accounts.models import SignInGate, User

LOCK_WAIT = "5s"

# Creates the row on the first attempt and otherwise locks it: either way one statement returns
# the count, held until this attempt's transaction ends.
_HOLD = """
INSERT INTO accounts_signingate AS gate (key, failures, locked_until, updated_at)
VALUES (%(key)s, 0, NULL, %(now)s)
ON CONFLICT (key) DO UPDATE SET updated_at = gate.updated_at
RETURNING failures, locked_until
"""


@dataclass
class Gate:
    failures: int
    locked_until: datetime | None


# The gate of an account: ``user:<pk>``.
ACCOUNT_GATE = "user:"


def gate_key(*, user: User | None, kind: str, identifier: str) -> str:
    """One key per account whichever identifier was typed; unknown identifiers get their own,
    one for all the ways of writing them (accounts.identifiers)."""
    if user is not None:
        return f"{ACCOUNT_GATE}{user.pk}"
    return f"unknown:{identifier_key(kind, identifier)}"[:300]


@contextmanager
def gate_held(*, key: str) -> Iterator[Gate]:
    """The gate of ``key``, to itself for one attempt; what the block leaves in it is saved."""
    with transaction.atomic():
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
                cursor.execute(_HOLD, {"key": key, "now": timezone.now()})
                [(failures, locked_until)] = cursor.fetchall()
        except OperationalError as error:
            if isinstance(error.__cause__, errors.LockNotAvailable):
                raise SignInBusy() from error
            raise
        gate = Gate(failures=failures, locked_until=locked_until)
        yield gate
        SignInGate.objects.filter(key=key).update(
            failures=gate.failures, locked_until=gate.locked_until, updated_at=timezone.now()
        )


def gate_of(*, user: User, key: str | None = None) -> SignInGate | None:
    """The account's gate, or the gate ``key`` of one of its device tokens: its consecutive
    failures and lock (None before the first attempt)."""
    key = key or gate_key(user=user, kind="", identifier="")
    return SignInGate.objects.filter(key=key).first()


def gate_unlock(*, user: User) -> None:
    """An administrator's unlock, or a completed password reset. django-axes' record of the
    account's failures goes too, so that no page shows a lock that no longer holds."""
    SignInGate.objects.filter(key=gate_key(user=user, kind="", identifier="")).delete()
    axes_reset(username=user.username)
