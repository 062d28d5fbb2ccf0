"""Publishing to a topic: one statement stores each publication once and queues a copy for each
subscriber (exchange/topic_queries.py: PUBLISH), with idempotency keys in the namespace of the
publisher's sends and each subscriber's queue bound (docs/exchange.md, "Topics").

A publish is scoped to the calling adapter as publisher: a topic it may not publish to is refused
exactly like one that does not exist (PublishNotAllowed).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from accounts.models import User
from exchange import metrics, topic_queries
from exchange.errors import PublishNotAllowed, SendInterrupted
from exchange.models import Publication
from exchange.services.batches import Batch
from exchange.services.queues import queue_admit, queue_release
from platform_site.database import prepared_cursor
from platform_site.errors import ApplicationError


@dataclass(frozen=True)
class Publishing:
    """A publication to make: what an adapter gives, in the API's names' order."""

    type: str
    payload: Any
    headers: dict[str, str]
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Published:
    """``recipients``: the subscribers that got a copy; ``refused``: those whose queue was full."""

    publication_id: uuid.UUID
    recipients: int
    refused: int
    duplicate: bool = False


def topic_publish(*, publisher: User, topic_id: int, publication: Publishing) -> Published:
    """topic_publish_many of one, its failure raised."""
    [outcome] = topic_publish_many(publisher=publisher, topic_id=topic_id, items=[publication])
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def topic_publish_many(
    *, publisher: User, topic_id: int, items: Sequence[Publishing]
) -> list[Published | ApplicationError]:
    """Publish each item to the topic, each on its own: the outcome of each, in order, is
    Published or the error that refused it (ValidationFailed for a payload that is no JSON,
    PayloadTooLarge, PublishNotAllowed, IdempotencyKeyReused).

    Each subscription of the topic at this moment whose types take the item's type gets a copy,
    unless its queue is full: then it is counted in ``refused``, and the publication is made
    for the others. An idempotency key replayed with the same publication gives the first
    answer (``duplicate``); with something else, IdempotencyKeyReused.
    """
    publishing = _Publishing(publisher, items, topic_id)
    publishing.measure()
    publishing.match_keys()
    publishing.find_subscribers()
    publishing.publish()
    return publishing.outcomes()


class _Publishing(Batch[Published]):
    """One call of topic_publish_many."""

    items: Sequence[Publishing]

    def __init__(self, publisher: User, items: Sequence[Publishing], topic_id: int) -> None:
        super().__init__(publisher, items)
        self.topic_id = topic_id
        self.recipients: dict[int, list[int]] = {}  # each pending publication's subscribers

    def target(self, position: int) -> dict[str, int]:
        return {"topic": self.topic_id}

    def repeated(self, done: Published) -> Published:
        return replace(done, duplicate=True)

    def find_subscribers(self) -> None:
        """The subscribers each publication goes to, by its type; PublishNotAllowed for every
        one when the publisher may not publish here."""
        with prepared_cursor() as cursor:
            cursor.execute(
                topic_queries.SUBSCRIBERS,
                {"topic": self.topic_id, "owner": self.sender.owner_id, "sender": self.sender.pk},
            )
            rows = cursor.fetchall()
        if not rows:
            for position in self.pending():
                self.failed[position] = PublishNotAllowed()
            return
        subscriptions = [
            (adapter, None if types is None else frozenset(types))
            for adapter, types in rows
            if adapter is not None
        ]
        for position in self.pending():
            kind = self.items[position].type
            self.recipients[position] = [
                adapter for adapter, types in subscriptions if types is None or kind in types
            ]

    def publish(self) -> None:
        """Take the copies' places in the subscribers' queues, then in one statement claim the
        keys, store the publications whose key it claimed (or that have none) and queue their
        copies: an autocommit statement, atomic by itself.

        A publication whose key was claimed before gives its places back and answers as the
        key's first publication did, or IdempotencyKeyReused. A key that vanished between the
        claim and its lookup (forgotten after a day at that moment) leaves its publication to be
        published again, as new.
        """
        for _ in range(3):
            pending = self.pending()
            if not pending:
                return
            places = queue_admit(
                Counter(adapter for position in pending for adapter in self.recipients[position])
            )
            to: dict[int, list[int]] = {}
            for position in pending:
                to[position] = []
                for adapter in self.recipients[position]:
                    if places[adapter]:
                        places[adapter] -= 1
                        to[position].append(adapter)
            self._insert(pending, to)
        for position in self.pending():
            self.failed[position] = SendInterrupted()

    def _insert(self, positions: list[int], to: dict[int, list[int]]) -> None:
        ids = {position: uuid.uuid4() for position in positions}
        refused = {p: len(self.recipients[p]) - len(to[p]) for p in positions}
        rows = ",".join(
            f'{self.row(p, ids[p])},"to":[{",".join(map(str, to[p]))}],"refused":{refused[p]}}}'
            for p in positions
        )
        with prepared_cursor() as cursor:
            cursor.execute(
                topic_queries.PUBLISH,
                {"sender": self.sender.pk, "topic": self.topic_id, "publications": f"[{rows}]"},
            )
            claimed = {row[0] for row in cursor.fetchall()}
        for position in positions:
            if self.key(position) is None or self.key(position) in claimed:
                self.done[position] = Published(
                    publication_id=ids[position],
                    recipients=len(to[position]),
                    refused=refused[position],
                )
        copies = sum(self.done[p].recipients for p in positions if p in self.done)
        metrics.published.inc(len([p for p in positions if p in self.done]))
        metrics.sent.inc(copies)
        replays = [p for p in positions if p not in self.done]
        if replays:
            queue_release(Counter(adapter for p in replays for adapter in to[p]))
            self._replays(replays)

    def _replays(self, positions: list[int]) -> None:
        """Publications whose key was claimed before: the first answer, or
        IdempotencyKeyReused."""
        same = self.claimed_before(positions)
        figures = {
            publication_id: (recipients, refused)
            for publication_id, recipients, refused in Publication.objects.filter(
                publication_id__in=same.values()
            ).values_list("publication_id", "recipients", "refused")
        }
        for position, publication_id in same.items():
            # A publication is kept an hour longer than its key (queues_trim), so a key found
            # has its figures; (0, 0) only where the keys' own expiry has not run for a day.
            recipients, refused = figures.get(publication_id, (0, 0))
            self.done[position] = Published(
                publication_id=publication_id,
                recipients=recipients,
                refused=refused,
                duplicate=True,
            )
