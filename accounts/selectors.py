"""Reads of the accounts domain."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from functools import cache

from django.db import connection
from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    Exists,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Concat, Substr
from django.utils import timezone

from accounts import identifiers, liveness
from accounts.devices import Device
from accounts.errors import TokenRevoked
from accounts.models import Challenge, Session, SignInGate, User
from accounts.services.lockout import ACCOUNT_GATE
from accounts.services.tokens import Claims
from accounts.session_rules import live_sessions, session_refusal
from platform_site.database import prepared_cursor
from platform_site.ratelimits import Limit, Usage


@cache
def _session_query() -> tuple[str, list[str], list[str]]:
    session_fields = Session._meta.concrete_fields
    user_fields = User._meta.concrete_fields
    columns = [f's."{field.column}"' for field in session_fields] + [
        f'u."{field.column}"' for field in user_fields
    ]
    sql = (
        f"SELECT {', '.join(columns)} FROM accounts_session s "  # noqa: S608 (model metadata only)
        "JOIN accounts_user u ON u.id = s.user_id WHERE s.id = %s"
    )
    return (
        sql,
        [field.attname for field in session_fields],
        [field.attname for field in user_fields],
    )


def session_authenticate(
    *, claims: Claims, device: Device, limits: Sequence[Limit] = ()
) -> tuple[Session, list[Usage] | None]:
    """The live session of an access token, with its user; or the 401 that says why.

    With Redis, one round trip reads the user's session revision and counts the request against
    ``limits`` (their usages are returned; None when they were not counted), and the row this
    worker read under the same revision answers (accounts.liveness). Otherwise one query reads it,
    written out because it runs on every authenticated request: compiling the equivalent
    select_related() cost more than everything else the request does (docs/performance.md, "One
    request's CPU").
    """
    revision, usages = liveness.checked(user_id=claims.user_id, limits=limits)
    session = liveness.remembered(claims.session_id, revision)
    if session is None:
        sql, session_names, user_names = _session_query()
        with prepared_cursor() as cursor:
            cursor.execute(sql, [claims.session_id])
            row = cursor.fetchone()
        if row is None:
            raise TokenRevoked()
        session = Session.from_db(connection.alias, session_names, row[: len(session_names)])
        session.user = User.from_db(connection.alias, user_names, row[len(session_names) :])
        liveness.remember(claims.session_id, revision, session)
    refusal = session_refusal(
        session, user_id=claims.user_id, device_key=device.key, now=timezone.now()
    )
    if refusal is not None:
        raise refusal
    return session, usages


def sessions_ended(session_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
    """Those of ``session_ids`` that may serve no request any more (revoked, their user disabled,
    or past their absolute end: session_refusal's liveness), in one query."""
    if not session_ids:
        return set()
    live = Session.objects.filter(live_sessions(timezone.now()), pk__in=list(session_ids))
    return set(session_ids) - set(live.values_list("pk", flat=True))


def sessions_live(*, user: User) -> QuerySet[Session]:
    """``user``'s sessions that may serve requests, the most recently used first."""
    return Session.objects.filter(live_sessions(timezone.now()), user=user).order_by(
        "-last_used_at", "-created_at"
    )


def challenge_of(request_id: str | None, purpose: Challenge.Purpose) -> Challenge | None:
    """The challenge (a code sent) of ``request_id`` for ``purpose``; None for anything else,
    a text that is no UUID included."""
    try:
        return Challenge.objects.filter(pk=uuid.UUID(str(request_id)), purpose=purpose).first()
    except ValueError:
        return None


def user_for_identifier(*, kind: str, identifier: str) -> User | None:
    """The account an identifier names: e-mail addresses match in canonical form (cabinet users
    only); logins match exactly, as their NFKC form (accounts.identifiers)."""
    if kind == "email":
        canonical = identifiers.email_canonical(identifier)
        return User.objects.filter(email_canonical=canonical, kind=User.Kind.USER).first()
    return User.objects.filter(username=identifiers.login_canonical(identifier)).first()


def users_with_lock(users: QuerySet[User]) -> QuerySet[User]:
    """``users``, each with ``locked``: its account's sign-in gate is locked now, what every
    sign-in door answers 423 for (accounts.services.lockout). One subquery for a whole page."""
    gates = SignInGate.objects.filter(
        key=Concat(Value(ACCOUNT_GATE), Cast(OuterRef("pk"), CharField())),
        locked_until__gt=timezone.now(),
    )
    return users.annotate(locked=Exists(gates))


def gates_with_login(gates: QuerySet[SignInGate]) -> QuerySet[SignInGate]:
    """``gates``, each with ``login``: the username of the account an account's gate
    (``user:<pk>``) counts for, None for the others (unknown identifiers, device tokens). One
    subquery for a whole page."""
    owner = User.objects.filter(
        pk=Cast(Substr(OuterRef("key"), len(ACCOUNT_GATE) + 1), BigIntegerField())
    ).values("username")[:1]
    # The cast runs only for keys that are an account's: CASE evaluates THEN when WHEN holds.
    return gates.annotate(
        login=Case(When(key__regex=rf"^{ACCOUNT_GATE}[0-9]+$", then=Subquery(owner)))
    )
