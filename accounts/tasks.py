"""Celery tasks of the accounts domain: sending the outbox. Services import the tasks; the tasks
import the services when they run, so neither module needs the other to load first."""

from __future__ import annotations

from celery import Task, shared_task

# Seconds before the n-th retry: 5, 10, 20, 40... up to 10 minutes.
RETRY_BACKOFF_SECONDS = 5
RETRY_BACKOFF_MAX_SECONDS = 600


@shared_task(name="accounts.outbox_deliver", bind=True, max_retries=6)
def outbox_deliver_task(self: Task, message_id: int) -> None:  # type: ignore[type-arg]
    from accounts.services.outbox import outbox_deliver

    if not outbox_deliver(message_id):
        countdown = min(RETRY_BACKOFF_SECONDS * 2**self.request.retries, RETRY_BACKOFF_MAX_SECONDS)
        raise self.retry(countdown=countdown)


@shared_task(name="accounts.outbox_sweep")
def outbox_sweep_task() -> int:
    from accounts.services.outbox import outbox_sweep

    return outbox_sweep()
