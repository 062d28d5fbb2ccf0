"""Sending messages: each on its own, in one statement for a batch (exchange/queries.py: SEND),
with idempotency keys, routes and bounded queues (docs/exchange.md, "Sending").

Every send is scoped to the calling adapter as sender: an adapter it may not reach is refused
exactly like one that does not exist.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accounts.models import User
from exchange import metrics, queries
from exchange.errors import QueueFull, SendInterrupted, SendNotAllowed
from exchange.selectors import recipients_reachable
from exchange.services.batches import Batch
from exchange.services.queues import queue_admit, queue_release
from exchange.services.traffic import traffic_add
from platform_site.database import prepared_cursor
from platform_site.errors import ApplicationError


@dataclass(frozen=True)
class Outgoing:
    """A message to send: what an adapter gives, in the API's names' order."""

    to: int
    type: str
    payload: Any
    headers: dict[str, str]
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Sent:
    message_id: uuid.UUID
    duplicate: bool


def message_send(
    *,
    sender: User,
    to: int,
    type: str,
    payload: Any,
    headers: dict[str, str],
    idempotency_key: str | None,
) -> Sent:
    """Queue a message for adapter ``to``: messages_send of one, its failure raised."""
    message = Outgoing(
        to=to, type=type, payload=payload, headers=headers, idempotency_key=idempotency_key
    )
    [outcome] = messages_send(sender=sender, messages=[message])
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def messages_send(*, sender: User, messages: Sequence[Outgoing]) -> list[Sent | ApplicationError]:
    """Queue messages, each on its own: the outcome of each, in order, is Sent or the error that
    refused it (ValidationFailed for a payload that is no JSON, PayloadTooLarge, SendNotAllowed,
    IdempotencyKeyReused, QueueFull), and one
    message's failure does not fail the others.

    An idempotency key replayed with the same message gives the first message's id
    (``duplicate``), also after it was delivered, and with a different message
    IdempotencyKeyReused. Within one call, a key's later messages have the outcome of its first.
    Whatever the number of messages, a call costs at most six statements, none in a transaction
    of its own making (tests/exchange/test_batch_send.py counts them).
    """
    sending = _Sending(sender, messages)
    sending.measure()
    sending.match_keys()
    sending.check_routes()
    sending.queue()
    sending.count_refusals()
    return sending.outcomes()


class _Sending(Batch[Sent]):
    """One call of messages_send."""

    items: Sequence[Outgoing]

    def target(self, position: int) -> dict[str, int]:
        return {"to": self.items[position].to}

    def repeated(self, done: Sent) -> Sent:
        return Sent(message_id=done.message_id, duplicate=True)

    def check_routes(self) -> None:
        pending = self.pending()
        reachable = recipients_reachable(
            sender=self.sender, recipient_ids={self.items[p].to for p in pending}
        )
        for position in pending:
            if self.items[position].to not in reachable:
                self.failed[position] = SendNotAllowed()

    def queue(self) -> None:
        """Take the pending messages' places in their queues, then in one statement claim their
        keys, insert the rows of those whose key it claimed (or that have none) and wake the long
        polls: an autocommit statement, atomic by itself, with no transaction around it.

        A message whose key was claimed before is a duplicate of that message (even when its
        queue is full) or IdempotencyKeyReused, and gives its place back. A key that vanished
        between the claim and its lookup (forgotten after 24 hours at that moment) leaves its
        message pending: it is sent again, as new.
        """
        for attempt in range(3):
            pending = self.pending()
            if not pending:
                return
            places = queue_admit(Counter(self.items[position].to for position in pending))
            admitted = []
            for position in pending:
                recipient = self.items[position].to
                if places[recipient]:
                    places[recipient] -= 1
                    admitted.append(position)
                else:
                    self.failed[position] = QueueFull()
            self._replays([p for p in pending if p not in admitted and self.key(p) is not None])
            freed = self._insert(admitted) if admitted else set()
            if attempt < 2:
                # Replays gave their places back: what a full queue refused may fit in them.
                for position, error in list(self.failed.items()):
                    if isinstance(error, QueueFull) and self.items[position].to in freed:
                        del self.failed[position]
        for position in self.pending():
            self.failed[position] = SendInterrupted()

    def count_refusals(self) -> None:
        """The sends a full queue refused, in the sender's traffic: the one statement a call
        with refusals costs more (what was queued is counted by the statement that queued it)."""
        refused = sum(isinstance(error, QueueFull) for error in self.failed.values())
        if refused:
            traffic_add(adapter_id=self.sender.pk, counted="refused", n=refused)

    def _insert(self, positions: list[int]) -> set[int]:
        """Queue the messages at ``positions``; the recipients whose places some gave back
        (replays of a key claimed before)."""
        ids = {position: uuid.uuid4() for position in positions}
        rows = ",".join(
            f'{self.row(position, ids[position])},"to":{self.items[position].to}}}'
            for position in positions
        )
        with prepared_cursor() as cursor:
            cursor.execute(queries.SEND, {"sender": self.sender.pk, "messages": f"[{rows}]"})
            claimed = {row[0] for row in cursor.fetchall()}
        queued = [p for p in positions if self.key(p) is None or self.key(p) in claimed]
        for position in queued:
            self.done[position] = Sent(message_id=ids[position], duplicate=False)
        metrics.sent.inc(len(queued))
        replays = [p for p in positions if p not in self.done]
        if not replays:
            return set()
        freed = Counter(self.items[position].to for position in replays)
        queue_release(freed)
        self._replays(replays)
        return set(freed)

    def _replays(self, positions: list[int]) -> None:
        """Messages whose key was claimed before: a duplicate of the key's message, or
        IdempotencyKeyReused. A key not found leaves its message as it was."""
        for position, message_id in self.claimed_before(positions).items():
            self.done[position] = Sent(message_id=message_id, duplicate=True)
