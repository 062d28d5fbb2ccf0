"""Dead letters: messages given up on after EXCHANGE_MAX_DELIVERIES, their redrive, and their
discarding by the owner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import connection, transaction

from accounts.models import User
from accounts.services.audit import Kind, audit
from exchange import queries, queue_queries
from exchange.models import DeadLetter


@transaction.atomic
def dead_letters_redrive(*, owner: User, message_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Put ``owner``'s adapters' dead letters back in their queues with a fresh delivery budget.

    They keep their messageId, so consumers that de-duplicate by id still recognise them.
    """
    recipients = list(owner.adapters.values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(queue_queries.REDRIVE, {"recipients": recipients, "ids": list(message_ids)})
        revived = cursor.fetchall()
        cursor.execute(queries.NOTIFY, {"recipients": sorted({row[1] for row in revived})})
    return [row[0] for row in revived]


@transaction.atomic
def dead_letters_discard(
    *, adapter: User, actor: User, message_ids: Sequence[uuid.UUID] | None = None
) -> int:
    """Delete ``adapter``'s dead letters ``message_ids`` (None: all of them) in one statement;
    how many. Ids of other adapters' dead letters are passed over. Audited, with ``actor`` (its
    owner) as the one who discarded them."""
    letters = DeadLetter.objects.filter(recipient=adapter)
    if message_ids is not None:
        letters = letters.filter(message_id__in=list(message_ids))
    discarded, _by_model = letters.delete()
    audit(Kind.DEAD_LETTERS_DISCARDED, user=adapter, actor=actor, discarded=discarded)
    return discarded
