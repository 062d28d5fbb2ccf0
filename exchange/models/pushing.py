"""Push delivery's state: open streams and webhooks, with the log of webhook attempts."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class Stream(models.Model):
    """An open push stream: one per adapter and device key (exchange/streams.py).

    The row fences the stream: its deliveries are claimed only while the row is its own, so a
    newer stream of the same device (which takes the row over) ends it. A receive from a device
    whose stream is open answers 409 STREAM_OPEN. The server that holds the stream moves
    ``expires_at`` on while it does: a row whose server died stops counting once it has passed.
    """

    stream_id = models.UUIDField(primary_key=True)
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    device_key = models.CharField(max_length=160)
    opened_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "device_key"], name="exchange_stream_device_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id} @ {self.device_key[:12]}"


class Webhook(models.Model):
    """Where an adapter's messages are pushed, while ``enabled`` (docs/exchange.md, "Webhooks").

    The secrets are kept encrypted (accounts.factor_secrets, purpose "webhook"); the previous one
    is signed with beside the new one until ``previous_secret_until``. The delivery process keeps
    the endpoint's health here: ``failing_since`` (the first failure since the last success: 5 days
    of it disables the webhook as FAILING), ``consecutive_failures`` and ``paused_until`` (the
    circuit breaker: open, deliveries wait until then; then one probe at a time).
    """

    class DisabledReason(models.TextChoices):
        GONE = "GONE", "The endpoint answered 410 Gone"
        FAILING = "FAILING", "The endpoint failed for days without a success"

    adapter = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    url = models.CharField(max_length=2000)
    enabled = models.BooleanField(default=True)
    secret = models.CharField(max_length=200)
    previous_secret = models.CharField(max_length=200, blank=True, default="")
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(  # noqa: DJ001 (null: enabled, or disabled by the owner)
        max_length=16, choices=DisabledReason.choices, null=True, blank=True
    )
    failing_since = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.IntegerField(default=0)
    paused_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"{self.adapter_id} -> {self.url}"


class WebhookAttempt(models.Model):
    """One POST of a message to a webhook, kept EXCHANGE_WEBHOOK_LOG_DAYS (the delivery log)."""

    class Outcome(models.TextChoices):
        DELIVERED = "delivered"
        FAILED = "failed"
        TIMEOUT = "timeout"
        REFUSED = "refused"

    id = models.BigAutoField(primary_key=True)
    adapter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    message_id = models.UUIDField()
    attempt = models.IntegerField()
    at = models.DateTimeField()
    status = models.IntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    latency_ms = models.IntegerField()
    error = models.CharField(max_length=400, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["adapter", "-at"], name="exchange_webhook_log_idx"),
            models.Index(fields=["at"], name="exchange_webhook_log_age_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} #{self.attempt}: {self.outcome}"
