from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.models.users import User


class OutboxMessage(models.Model):
    """An e-mail or SMS to send, written in the transaction of the request that caused it.

    A Celery task sends it after that transaction commits; a periodic sweep sends whatever the
    broker missed. Bodies of messages that carry codes are erased once sent (unless DEBUG, where
    /dev/outbox shows them).
    """

    class Channel(models.TextChoices):
        EMAIL = "EMAIL", "E-mail"
        SMS = "SMS", "SMS"

    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending"
        SENT = "SENT", "Sent"
        SKIPPED = "SKIPPED", "Skipped (no such account)"
        FAILED = "FAILED", "Failed"

    channel = models.CharField(max_length=8, choices=Channel.choices)
    to = models.CharField(max_length=254)
    user = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    template = models.CharField(max_length=64)
    subject = models.CharField(max_length=255, blank=True)
    text = models.TextField(blank=True)
    html = models.TextField(blank=True)
    # A password reset for an unknown address is written like any other, then skipped by the
    # worker: the request does the same work either way.
    requires_account = models.BooleanField(default=False)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=models.Q(status="PENDING"),
                name="accounts_outbox_pending_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} to {self.to}: {self.template}"
