"""Messages between adapters: the hot queue table, the delivery log, dead letters and routes.

``Message`` holds only what still has to be delivered (waiting, delayed or leased); an ACK moves
the row to the day-partitioned ``DeliveryLog`` in one statement, so the hot table stays small.
docs/exchange.md has the rules and the reasons; exchange/queries.py has the SQL.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import Now

SEQUENCE = "exchange_message_seq"


class NextValue(models.Func):
    """nextval() of a sequence, as a column's database default."""

    function = "nextval"
    output_field = models.BigIntegerField()


class Message(models.Model):
    # message_id is the key and the only id clients see: random, it reveals nothing about other
    # adapters' traffic. seq orders the queue (approximately FIFO per recipient); only the queue
    # index covers it, so the planner cannot walk a table-wide order and filter by recipient.
    message_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    seq = models.BigIntegerField(db_default=NextValue(models.Value(SEQUENCE)), editable=False)
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # No constraint: a message keeps its sender's id after that adapter is deleted.
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        related_name="+",
    )
    type = models.CharField(max_length=128)
    # NULL in a topic's copy: the payload is its publication's, stored once for all copies.
    payload = models.JSONField(null=True)
    headers = models.JSONField(default=dict)
    # A topic's copy names its topic and publication (no constraints: the copy outlives both).
    topic_id = models.BigIntegerField(null=True)
    publication_id = models.UUIDField(null=True)
    enqueued_at = models.DateTimeField(db_default=Now())
    visible_at = models.DateTimeField(db_default=Now())  # later than now: delayed or leased
    receive_count = models.IntegerField(default=0)
    # Attempts to push it to its recipient's webhook: they have a schedule of their own and do not
    # count toward EXCHANGE_MAX_DELIVERIES (exchange/webhook_queries.py).
    push_attempts = models.IntegerField(default=0, db_default=0)
    first_received_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True)
    # NULL together with lease_token whenever the message is not leased: exchange/queries.py
    # relies on it.
    leased_by = models.CharField(max_length=160, null=True, blank=True)  # noqa: DJ001

    class Meta:
        indexes = [
            models.Index(
                fields=["recipient", "seq"],
                include=["visible_at"],
                name="exchange_message_queue_idx",
            ),
            models.Index(
                fields=["recipient", "leased_by"],
                condition=models.Q(lease_token__isnull=False),
                name="exchange_message_leased_idx",
            ),
        ]

    def __str__(self) -> str:
        return str(self.message_id)


class DeliveryLog(models.Model):
    """Acknowledged messages, one partition per day of ``acked_at``, dropped whole when expired.

    Migration 0002 creates the table (Django cannot declare partitioning); this model reads it.
    """

    pk = models.CompositePrimaryKey("message_id", "acked_at")
    message_id = models.UUIDField()
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        related_name="+",
    )
    type = models.CharField(max_length=128)
    payload = models.JSONField(null=True)  # NULL for a topic's copy: docs/exchange.md, "Topics"
    headers = models.JSONField()
    topic_id = models.BigIntegerField(null=True)
    publication_id = models.UUIDField(null=True)
    enqueued_at = models.DateTimeField()
    first_received_at = models.DateTimeField(null=True)
    receive_count = models.IntegerField()
    acked_at = models.DateTimeField()
    acked_by = models.CharField(max_length=160, null=True)  # noqa: DJ001

    class Meta:
        managed = False
        db_table = "exchange_delivery_log"

    def __str__(self) -> str:
        return str(self.message_id)


class DeadLetter(models.Model):
    """A message given up on after EXCHANGE_MAX_DELIVERIES deliveries; its owner may redrive it."""

    id = models.BigAutoField(primary_key=True)
    message_id = models.UUIDField(unique=True)
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        related_name="+",
    )
    type = models.CharField(max_length=128)
    payload = models.JSONField()  # a topic's copy too: a dead letter outlives its publication
    headers = models.JSONField(default=dict)
    topic_id = models.BigIntegerField(null=True)
    publication_id = models.UUIDField(null=True)
    enqueued_at = models.DateTimeField()
    first_received_at = models.DateTimeField(null=True, blank=True)
    receive_count = models.IntegerField()
    dead_at = models.DateTimeField(db_default=Now())
    # MAX_DELIVERIES, EXPIRED (nobody received it within EXCHANGE_MESSAGE_RETENTION_DAYS), or
    # WEBHOOK_FAILED (its webhook's retry schedule ran out).
    reason = models.CharField(max_length=32)
    last_device = models.CharField(max_length=160, null=True, blank=True)  # noqa: DJ001

    class Meta:
        # Dead letters older than EXCHANGE_DEAD_LETTER_DAYS are dropped in batches by their age.
        indexes = [models.Index(fields=["dead_at"], name="exchange_dead_age_idx")]

    def __str__(self) -> str:
        return str(self.message_id)


class IdempotencyKey(models.Model):
    """The message a sender's Idempotency-Key produced; kept after the message is acknowledged."""

    id = models.BigAutoField(primary_key=True)
    sender = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    message_id = models.UUIDField()
    body_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["sender", "key"], name="exchange_idempotency_key_unique"
            )
        ]
        indexes = [models.Index(fields=["created_at"], name="exchange_idempotency_age_idx")]

    def __str__(self) -> str:
        return self.key


class Route(models.Model):
    """The recipient's owner lets ``sender`` (an adapter of another owner) send to ``recipient``."""

    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="routes_in"
    )
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="routes_out"
    )
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["recipient", "sender"], name="exchange_route_unique"),
            models.CheckConstraint(
                condition=~models.Q(recipient=models.F("sender")), name="exchange_route_not_to_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sender_id} -> {self.recipient_id}"
