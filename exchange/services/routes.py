"""Routes: an owner lets another owner's adapter send to one of theirs."""

from __future__ import annotations

from django.db import transaction

from accounts.models import User
from exchange.errors import RouteNotNeeded, RouteSenderNotFound
from exchange.models import Route
from platform_site.errors import NotFound


@transaction.atomic
def route_grant(
    *,
    recipient: User,
    granted_by: User,
    sender_id: int | None = None,
    sender_login: str | None = None,
) -> tuple[Route, bool]:
    """Let the adapter with id ``sender_id``, or with login ``sender_login`` (exactly one of
    them), send to ``recipient``; granting twice changes nothing. A login that is a cabinet
    user's is as unknown as one nobody has."""
    adapters = User.objects.filter(kind=User.Kind.ADAPTER)
    if sender_login is None:
        assert sender_id is not None  # noqa: S101 (exactly one of the two: the caller's rule)
        sender = adapters.filter(pk=sender_id).first()
        if sender is None:
            raise RouteSenderNotFound()
    else:
        sender = adapters.filter(username=sender_login).first()
        if sender is None:
            raise RouteSenderNotFound("There is no adapter with this senderLogin.")
    if sender.owner_id == recipient.owner_id:
        raise RouteNotNeeded()
    return Route.objects.get_or_create(
        recipient=recipient, sender=sender, defaults={"granted_by": granted_by}
    )


def route_withdraw(*, recipient: User, sender_id: int) -> None:
    deleted, _ = Route.objects.filter(recipient=recipient, sender_id=sender_id).delete()
    if not deleted:
        raise NotFound("This adapter has no route from that sender.")
