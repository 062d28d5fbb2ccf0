"""Dead letters: messages given up on after EXCHANGE_MAX_DELIVERIES, and their redrive."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import connection, transaction

from accounts.models import User
from exchange import queries, queue_queries


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
