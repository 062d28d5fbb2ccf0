"""Topics, their grants and subscriptions (docs/exchange.md, "Topics"): a cabinet user owns
topics; their own adapters may publish and subscribe; another owner's adapter may publish once
granted, and subscribe once allowed by the topic's owner and subscribed by its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from accounts.models import User
from accounts.services.adapters import adapter_for_owner
from exchange.errors import (
    SubscribeNotAllowed,
    TopicAdapterNotFound,
    TopicGrantNotNeeded,
    TopicNameTaken,
    TopicNotFound,
    TopicNotYours,
)
from exchange.models import Subscription, Topic, TopicPublisher, TopicSubscriber
from platform_site.errors import NotFound


def topics_visible(user: User) -> QuerySet[Topic]:
    """The topics ``user`` owns, and those open to one of their adapters (granted to publish or
    allowed to subscribe)."""
    theirs = User.objects.filter(owner=user, kind=User.Kind.ADAPTER).values("pk")
    return Topic.objects.filter(
        Q(owner=user)
        | Exists(TopicPublisher.objects.filter(topic=OuterRef("pk"), adapter__in=theirs))
        | Exists(TopicSubscriber.objects.filter(topic=OuterRef("pk"), adapter__in=theirs))
    )


def topic_for(user: User, topic_id: int) -> Topic:
    """Topic ``topic_id`` where ``user`` may see it; TopicNotFound where not, as for a missing
    one."""
    topic = topics_visible(user).filter(pk=topic_id).first()
    if topic is None:
        raise TopicNotFound()
    return topic


def topic_owned(user: User, topic_id: int) -> Topic:
    """Topic ``topic_id`` when ``user`` owns it; TopicNotYours where it is only open to their
    adapters, TopicNotFound where they may not see it."""
    topic = topic_for(user, topic_id)
    if topic.owner_id != user.pk:
        raise TopicNotYours()
    return topic


def topic_create(*, owner: User, name: str) -> Topic:
    try:
        with transaction.atomic():
            return Topic.objects.create(owner=owner, name=name)
    except IntegrityError:
        raise TopicNameTaken() from None


def topic_delete(*, topic: Topic) -> None:
    """Delete the topic with its grants and subscriptions; copies already queued stay."""
    topic.delete()


def _other_owners_adapter(topic: Topic, adapter_id: int) -> User:
    adapter = User.objects.filter(pk=adapter_id, kind=User.Kind.ADAPTER).first()
    if adapter is None:
        raise TopicAdapterNotFound()
    if adapter.owner_id == topic.owner_id:
        raise TopicGrantNotNeeded()
    return adapter


def publisher_grant(*, topic: Topic, adapter_id: int) -> bool:
    """Let another owner's adapter publish to ``topic``; whether the grant is new."""
    adapter = _other_owners_adapter(topic, adapter_id)
    try:
        _, created = TopicPublisher.objects.get_or_create(topic=topic, adapter=adapter)
    except IntegrityError:  # the topic was deleted meanwhile
        raise TopicNotFound() from None
    return created


def publisher_revoke(*, topic: Topic, adapter_id: int) -> None:
    deleted, _ = TopicPublisher.objects.filter(topic=topic, adapter_id=adapter_id).delete()
    if not deleted:
        raise NotFound("This adapter has no grant to publish to this topic.")


def subscriber_allow(*, topic: Topic, adapter_id: int) -> bool:
    """Let another owner's adapter be subscribed to ``topic`` (by its owner); whether the
    allowance is new."""
    adapter = _other_owners_adapter(topic, adapter_id)
    try:
        _, created = TopicSubscriber.objects.get_or_create(topic=topic, adapter=adapter)
    except IntegrityError:  # the topic was deleted meanwhile
        raise TopicNotFound() from None
    return created


@transaction.atomic
def subscriber_disallow(*, topic: Topic, adapter_id: int) -> None:
    """Withdraw the allowance, and the adapter's subscription with it. The allowance goes
    first: a subscription being made waits for it (subscription_put locks it) and is then
    deleted here."""
    deleted, _ = TopicSubscriber.objects.filter(topic=topic, adapter_id=adapter_id).delete()
    if not deleted:
        raise NotFound("This adapter is not allowed to subscribe to this topic.")
    Subscription.objects.filter(topic=topic, adapter_id=adapter_id).delete()


def subscription_put(
    *, user: User, topic: Topic, adapter_id: int, types: Sequence[str] | None
) -> tuple[Subscription, bool]:
    """Subscribe ``user``'s adapter to ``topic``, to every type or to ``types``; a second call
    changes the types. Whether the subscription is new."""
    adapter = adapter_for_owner(owner=user, adapter_id=adapter_id)
    try:
        with transaction.atomic():
            if topic.owner_id != user.pk:
                allowance = TopicSubscriber.objects.select_for_update().filter(
                    topic=topic, adapter=adapter
                )
                if not allowance.exists():
                    raise SubscribeNotAllowed()
            return Subscription.objects.update_or_create(
                topic=topic,
                adapter=adapter,
                defaults={"types": None if types is None else sorted(set(types))},
            )
    except IntegrityError:  # the topic was deleted meanwhile
        raise TopicNotFound() from None


def subscription_delete(*, user: User, topic: Topic, adapter_id: int) -> None:
    """End an adapter's subscription: the adapter's owner or the topic's may."""
    subscriptions = Subscription.objects.filter(topic=topic, adapter_id=adapter_id)
    if topic.owner_id != user.pk:
        subscriptions = subscriptions.filter(adapter__owner=user)
    deleted, _ = subscriptions.delete()
    if not deleted:
        raise NotFound("This adapter has no subscription to this topic.")


@dataclass(frozen=True)
class TopicView:
    """A topic as ``viewer`` sees it: all of it when it is theirs, else what concerns their
    adapters."""

    topic: Topic
    own: bool
    publishers: list[User]
    subscribers: list[User]
    subscriptions: list[Subscription]


def topics_described(*, viewer: User, topics: Sequence[Topic]) -> list[TopicView]:
    """``topics`` (visible to ``viewer``) with their grants and subscriptions, in three queries."""
    ids = [topic.pk for topic in topics]

    def seen(rows: QuerySet[Any]) -> QuerySet[Any]:
        # The viewer's topics show everything; the others, the viewer's adapters only.
        return rows.filter(Q(topic__owner=viewer) | Q(adapter__owner=viewer))

    by_topic: dict[str, dict[int, list[Any]]] = {
        "publishers": {},
        "subscribers": {},
        "subscriptions": {},
    }
    for grant in seen(TopicPublisher.objects.filter(topic_id__in=ids)).select_related("adapter"):
        by_topic["publishers"].setdefault(grant.topic_id, []).append(grant.adapter)
    for allowed in seen(TopicSubscriber.objects.filter(topic_id__in=ids)).select_related("adapter"):
        by_topic["subscribers"].setdefault(allowed.topic_id, []).append(allowed.adapter)
    for subscription in seen(Subscription.objects.filter(topic_id__in=ids)).select_related(
        "adapter"
    ):
        by_topic["subscriptions"].setdefault(subscription.topic_id, []).append(subscription)
    return [
        TopicView(
            topic=topic,
            own=topic.owner_id == viewer.pk,
            publishers=sorted(by_topic["publishers"].get(topic.pk, []), key=_by_login),
            subscribers=sorted(by_topic["subscribers"].get(topic.pk, []), key=_by_login),
            subscriptions=sorted(
                by_topic["subscriptions"].get(topic.pk, []), key=lambda s: s.adapter.username
            ),
        )
        for topic in topics
    ]


def _by_login(adapter: User) -> str:
    return adapter.username
