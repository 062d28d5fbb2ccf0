"""E-mails and SMS leave through the outbox: a row in the request's transaction, a Celery task
sent when it commits, and a periodic sweep for what the broker missed (docs/sessions.md,
"Confirmation codes")."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from accounts import metrics
from accounts.models import OutboxMessage, User
from accounts.sms import sms_send
from accounts.tasks import outbox_deliver_task

logger = logging.getLogger(__name__)

# A message is tried this many times (the task's retries and the sweeps together), then FAILED.
MAX_ATTEMPTS = 8


def outbox_email(
    *,
    to: str,
    template: str,
    context: dict[str, Any],
    user: User | None,
    requires_account: bool = False,
    label: str | None = None,
) -> OutboxMessage:
    """Queue the e-mail ``templates/emails/<template>`` (``_subject.txt``, ``.txt``, ``.html``),
    recorded under ``label`` when templates are shared (the security notices)."""
    context = {"platform_name": settings.PLATFORM_NAME, **context}
    message = OutboxMessage.objects.create(
        channel=OutboxMessage.Channel.EMAIL,
        to=to,
        user=user,
        template=label or template,
        subject=" ".join(render_to_string(f"emails/{template}_subject.txt", context).split()),
        text=render_to_string(f"emails/{template}.txt", context),
        html=render_to_string(f"emails/{template}.html", context),
        requires_account=requires_account,
    )
    _publish_on_commit(message)
    return message


def outbox_sms(*, to: str, template: str, context: dict[str, Any], user: User) -> OutboxMessage:
    """Queue the SMS ``templates/sms/<template>.txt``."""
    context = {"platform_name": settings.PLATFORM_NAME, **context}
    message = OutboxMessage.objects.create(
        channel=OutboxMessage.Channel.SMS,
        to=to,
        user=user,
        template=template,
        text=render_to_string(f"sms/{template}.txt", context).strip(),
    )
    _publish_on_commit(message)
    return message


def _publish_on_commit(message: OutboxMessage) -> None:
    def publish() -> None:
        try:
            # One immediate retry on a new connection: the pooled one is dead after the broker
            # restarted and fails its first use. No waiting: with the broker down the request
            # must still answer at once; the sweep sends the message when the broker is back.
            outbox_deliver_task.apply_async(
                (message.pk,),
                retry=True,
                retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0},
            )
        except Exception:
            logger.warning(
                "outbox message %s not queued; the sweep will send it", message.pk, exc_info=True
            )

    transaction.on_commit(publish)


def outbox_deliver(message_id: int) -> bool:
    """Send one pending message; False when it failed and should be tried again.

    The row is locked while it is sent, so a task and a sweep never send it both at once; a
    crash after sending and before the commit sends it again (at least once, as any mailer).
    """
    with transaction.atomic():
        message = (
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(pk=message_id, status=OutboxMessage.Status.PENDING)
            .first()
        )
        if message is None:
            return True  # sent, skipped, or being sent right now
        if message.requires_account and message.user_id is None:
            message.status = OutboxMessage.Status.SKIPPED
            message.text = message.html = ""
            message.save(update_fields=["status", "text", "html"])
            return True
        message.attempts += 1
        try:
            _send(message)
        except Exception as error:
            message.last_error = f"{type(error).__name__}: {error}"[:2000]
            if message.attempts >= MAX_ATTEMPTS:
                message.status = OutboxMessage.Status.FAILED
            message.save(update_fields=["attempts", "last_error", "status"])
            logger.warning("outbox message %s not sent: %s", message.pk, message.last_error)
            return message.status == OutboxMessage.Status.FAILED
        message.status = OutboxMessage.Status.SENT
        message.sent_at = timezone.now()
        if not settings.DEBUG:  # codes live on only as hashes; /dev/outbox needs DEBUG
            message.text = message.html = ""
        message.save(update_fields=["attempts", "status", "sent_at", "last_error", "text", "html"])
    metrics.codes_sent.labels(message.channel.lower()).inc()
    return True


def _send(message: OutboxMessage) -> None:
    if message.channel == OutboxMessage.Channel.SMS:
        sms_send(to=message.to, text=message.text)
        return
    email = EmailMultiAlternatives(
        subject=message.subject, body=message.text, to=[message.to], from_email=None
    )
    email.attach_alternative(message.html, "text/html")
    email.send()


def outbox_sweep() -> int:
    """Send what waited longer than a sweep interval (the broker was down, a task was lost);
    forget finished messages after a week. Returns how many were sent."""
    now = timezone.now()
    due = OutboxMessage.objects.filter(
        status=OutboxMessage.Status.PENDING,
        created_at__lt=now - timedelta(seconds=settings.ACCOUNTS_OUTBOX_SWEEP_SECONDS),
    ).values_list("pk", flat=True)[:500]
    sent = sum(outbox_deliver(pk) for pk in list(due))
    OutboxMessage.objects.exclude(status=OutboxMessage.Status.PENDING).filter(
        created_at__lt=now - timedelta(days=7)
    ).delete()
    return sent
