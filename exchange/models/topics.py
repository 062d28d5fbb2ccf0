"""Topics (docs/exchange.md, "Topics"): an owner's named fan-out. A publication is stored once
in ``Publication``; each subscriber gets a copy in its own queue, an ``exchange_message`` row
that names the publication instead of holding the payload."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Now


class Topic(models.Model):
    id = models.BigAutoField(primary_key=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="topics"
    )
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="exchange_topic_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class TopicPublisher(models.Model):
    """The topic's owner lets ``adapter`` (another owner's) publish to it; the owner's own
    adapters may without a grant."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="publishers")
    adapter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "adapter"], name="exchange_topic_publisher_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.adapter_id} -> {self.topic_id}"


class TopicSubscriber(models.Model):
    """The topic's owner lets ``adapter`` (another owner's) subscribe; its own owner subscribes
    it (``Subscription``). Withdrawn, its subscription ends with it."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="subscribers")
    adapter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "adapter"], name="exchange_topic_subscriber_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic_id} -> {self.adapter_id}"


class Subscription(models.Model):
    """``adapter`` gets a copy of each publication to ``topic`` from now on: of every type, or
    of ``types`` only."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="subscriptions")
    adapter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    types = ArrayField(models.CharField(max_length=128), null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "adapter"], name="exchange_subscription_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.adapter_id} <- {self.topic_id}"


class Publication(models.Model):
    """One publish: its payload, stored once for all its copies, and its answer (recipients,
    refused) for a replay of its Idempotency-Key. Dropped once no copy waits for it and a day
    has passed (exchange/queue_queries.py: PUBLICATIONS_DROP)."""

    publication_id = models.UUIDField(primary_key=True)
    # No constraints: a publication outlives its topic (copies already queued stay) and keeps
    # its publisher's id after that adapter is deleted.
    topic_id = models.BigIntegerField()
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        related_name="+",
    )
    type = models.CharField(max_length=128)
    payload = models.JSONField()
    headers = models.JSONField(default=dict)
    published_at = models.DateTimeField(db_default=Now())
    recipients = models.IntegerField()
    refused = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["published_at"], name="exchange_publication_age_idx")]

    def __str__(self) -> str:
        return str(self.publication_id)
