"""Deleting an adapter with what the exchange keeps of it: the JSON API's DELETE and the cabinet's
page call this one function."""

from __future__ import annotations

from accounts.models import User
from accounts.services.adapters import adapter_delete
from exchange.services.queues import queue_purge


def adapter_remove(*, adapter: User, actor: User) -> None:
    """Delete ``adapter``: its waiting messages first, in batches (accounts knows no queue, and
    one cascading DELETE of a long queue would hold its locks for long); then the account, whose
    foreign keys take its dead letters, routes, webhook, topic grants, subscriptions and sessions
    with it. The purge is audited with ``actor`` (its owner)."""
    queue_purge(adapter=adapter, actor=actor)
    adapter_delete(adapter=adapter)
