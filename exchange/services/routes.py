"""Routes: an owner lets another owner's adapter send to one of theirs."""

from __future__ import annotations

from django.db import transaction

from accounts.models import User
from exchange.errors import RouteNotAllowed, RouteSenderNotFound
from exchange.models import Route
from platform_site.errors import NotFound


@transaction.atomic
def route_grant(*, recipient: User, sender_id: int, granted_by: User) -> tuple[Route, bool]:
    """Let adapter ``sender_id`` send to ``recipient``; granting twice changes nothing."""
    sender = User.objects.filter(pk=sender_id, kind=User.Kind.ADAPTER).first()
    if sender is None:
        raise RouteSenderNotFound()
    if sender.pk == recipient.pk:
        raise RouteNotAllowed("An adapter needs no route to itself.")
    return Route.objects.get_or_create(
        recipient=recipient, sender=sender, defaults={"granted_by": granted_by}
    )


def route_withdraw(*, recipient: User, sender_id: int) -> None:
    deleted, _ = Route.objects.filter(recipient=recipient, sender_id=sender_id).delete()
    if not deleted:
        raise NotFound("This adapter has no route from that sender.")
