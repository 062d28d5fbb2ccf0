"""Account states that apply to every principal, cabinet user or adapter."""

from __future__ import annotations

from django.db import transaction

from accounts.models import User
from accounts.services.sessions import sessions_revoke_for_user


@transaction.atomic
def account_set_active(*, user: User, active: bool) -> User:
    """Disable or enable ``user``; disabling ends its sessions at once (adapters keep queues)."""
    user.is_active = active
    user.save(update_fields=["is_active"])
    if not active:
        sessions_revoke_for_user(user=user, reason="disabled")
    return user
