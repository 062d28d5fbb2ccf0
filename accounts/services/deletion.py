"""Deleting a cabinet user's account (docs/sessions.md, "Deleting an account"): by the person,
with the password and the second factor's proof, or by an administrator from the admin.

Every session ends; the person's adapters go with their queues, routes in both directions,
webhooks, topics and subscriptions (their rows' foreign keys cascade); messages the adapters
sent stay in their recipients' queues (a message keeps its sender's id, not a reference). The
person's row, personal data and e-mails go; the audit keeps its events, each naming the account
by a pseudonym instead; the address can register again, and a last e-mail tells it.
"""

from __future__ import annotations

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils.crypto import salted_hmac

from accounts import liveness
from accounts.models import AuditEvent, OutboxMessage, User
from accounts.services.audit import Kind, audit
from accounts.services.factors import user_locked
from accounts.services.notices import Notice, notice_send
from accounts.services.reauthentication import Reauthentication, reauthenticated_fully


def pseudonym_of(user_id: int) -> str:
    """What the audit names a deleted account by: the same for all its events, and nothing the
    account's data can be read back from (a keyed hash of its id)."""
    return f"deleted:{salted_hmac('accounts.deleted', str(user_id)).hexdigest()[:16]}"


def account_delete(*, user: User, reauth: Reauthentication, request: HttpRequest | None) -> None:
    """The person deletes their own account: always with the password, and with a proof of
    the second factor while one is on (accounts.services.reauthentication)."""
    reauthenticated_fully(user=user, reauth=reauth, request=request)
    _account_erased(user=user, actor=None, request=request)


def account_delete_by_administrator(*, user: User, actor: User | None) -> None:
    """An administrator deletes an account from the admin: a person's as the person would
    (audited with the actor), or an adapter with its sessions, routes and queue."""
    if user.kind == User.Kind.ADAPTER:
        with liveness.changing([user.pk]):
            user.delete()
        return
    _account_erased(user=user, actor=actor, request=None)


@transaction.atomic
def _account_erased(*, user: User, actor: User | None, request: HttpRequest | None) -> None:
    locked = user_locked(user)
    if locked.kind != User.Kind.USER:
        raise ValueError("an adapter is deleted by its owner, with its queue")
    address, language = locked.email, locked.language
    adapters = list(User.objects.filter(owner=locked).values_list("pk", flat=True))
    with liveness.changing([locked.pk, *adapters]):
        audit(
            Kind.ACCOUNT_DELETED, user=locked, actor=actor, request=request, adapters=len(adapters)
        )
        for principal in [locked.pk, *adapters]:  # the foreign keys go NULL with the rows
            AuditEvent.objects.filter(user_id=principal).update(identifier=pseudonym_of(principal))
        # What the person's e-mail address and login were typed as, and sent to.
        names = Q(username__in=[locked.username, locked.email])
        for record in (AccessAttempt, AccessLog, AccessFailureLog):
            record.objects.filter(names).delete()
        OutboxMessage.objects.filter(Q(user=locked) | Q(to__iexact=address)).delete()
        User.objects.filter(pk__in=adapters).delete()
        locked.delete()
        notice_send(
            Notice.ACCOUNT_DELETED, user=None, to=address, language=language, request=request
        )
