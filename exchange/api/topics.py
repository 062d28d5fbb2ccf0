"""The owner's side of topics (/api/users/topics...; docs/exchange.md, "Topics"): topics, who
may publish to them, who may subscribe, and subscriptions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.api.serializers import EmptyOutput
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import AdapterNotFound
from accounts.models import User
from exchange.errors import (
    SubscribeNotAllowed,
    TopicAdapterNotFound,
    TopicGrantNotNeeded,
    TopicNameTaken,
    TopicNotFound,
    TopicNotYours,
)
from exchange.models import Subscription
from exchange.services.topics import (
    TopicView,
    publisher_grant,
    publisher_revoke,
    subscriber_allow,
    subscriber_disallow,
    subscription_delete,
    subscription_put,
    topic_create,
    topic_delete,
    topic_for,
    topic_owned,
    topics_described,
    topics_visible,
)
from platform_site.errors import NotFound
from platform_site.openapi import answers
from platform_site.serializers import Input
from platform_site.timestamps import rfc3339

MAX_TYPES = 100


class TopicCreateInput(Input):
    name = serializers.CharField(min_length=1, max_length=100, help_text="Unique among yours.")


class TopicAdapterInput(Input):
    adapterId = serializers.IntegerField(min_value=1)


class SubscriptionInput(Input):
    adapterId = serializers.IntegerField(min_value=1, help_text="One of your adapters.")
    types = serializers.ListField(
        child=serializers.CharField(min_length=1, max_length=128),
        min_length=1,
        max_length=MAX_TYPES,
        allow_null=True,
        required=False,
        default=None,
        help_text="Only publications of these message types; absent or null: every type.",
    )


class TopicAdapterOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()


class SubscriptionOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()
    types = serializers.ListField(
        child=serializers.CharField(), allow_null=True, help_text="null: every type."
    )
    createdAt = serializers.DateTimeField()


class TopicCreatedOutput(serializers.Serializer[Any]):
    topicId = serializers.IntegerField()
    name = serializers.CharField()


class TopicOutput(TopicCreatedOutput):
    own = serializers.BooleanField(
        help_text="Yours; false: another owner's, open to one of your adapters."
    )
    createdAt = serializers.DateTimeField()
    publishers = TopicAdapterOutput(
        many=True,
        help_text="Other owners' adapters granted publishing (yours may without a grant); on "
        "another owner's topic, only your adapters.",
    )
    subscribers = TopicAdapterOutput(
        many=True,
        help_text="Other owners' adapters allowed to subscribe; on another owner's topic, only "
        "your adapters.",
    )
    subscriptions = SubscriptionOutput(
        many=True, help_text="On another owner's topic, only your adapters'."
    )


class TopicListOutput(serializers.Serializer[Any]):
    topics = TopicOutput(many=True)


def _adapter_json(adapter: User) -> dict[str, Any]:
    return {"adapterId": adapter.pk, "login": adapter.username}


def subscription_json(subscription: Subscription) -> dict[str, Any]:
    return {
        **_adapter_json(subscription.adapter),
        "types": subscription.types,
        "createdAt": rfc3339(subscription.created_at),
    }


def topic_json(view: TopicView) -> dict[str, Any]:
    return {
        "topicId": view.topic.pk,
        "name": view.topic.name,
        "own": view.own,
        "createdAt": rfc3339(view.topic.created_at),
        "publishers": [_adapter_json(adapter) for adapter in view.publishers],
        "subscribers": [_adapter_json(adapter) for adapter in view.subscribers],
        "subscriptions": [subscription_json(s) for s in view.subscriptions],
    }


class TopicsApi(CabinetApi):
    @extend_schema(
        operation_id="topics_list",
        summary="Your topics, and other owners' topics open to your adapters",
        responses={200: TopicListOutput},
        tags=["topics"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        topics = list(topics_visible(request.user).order_by("name", "pk"))
        views = topics_described(viewer=request.user, topics=topics)
        return Response({"topics": [topic_json(view) for view in views]})

    @extend_schema(
        operation_id="topics_create",
        summary="Create a topic: your adapters may publish to it and subscribe to it",
        request=TopicCreateInput,
        responses={201: TopicCreatedOutput},
        tags=["topics"],
    )
    @answers(TopicNameTaken)
    def post(self, request: AuthenticatedRequest) -> Response:
        data = TopicCreateInput.validated(request.data)
        topic = topic_create(owner=request.user, name=data["name"])
        return Response({"topicId": topic.pk, "name": topic.name}, status=201)


@answers(TopicNotFound)
class TopicApi(CabinetApi):
    @extend_schema(
        operation_id="topics_get",
        summary="A topic with its grants and subscriptions",
        responses={200: TopicOutput},
        tags=["topics"],
    )
    def get(self, request: AuthenticatedRequest, topic_id: int) -> Response:
        topic = topic_for(request.user, topic_id)
        [view] = topics_described(viewer=request.user, topics=[topic])
        return Response(topic_json(view))

    @extend_schema(
        operation_id="topics_delete",
        summary="Delete a topic: its grants and subscriptions end; copies already queued stay",
        responses={200: EmptyOutput},
        tags=["topics"],
    )
    @answers(TopicNotYours)
    def delete(self, request: AuthenticatedRequest, topic_id: int) -> Response:
        topic_delete(topic=topic_owned(request.user, topic_id))
        return Response({})


@answers(TopicNotFound, TopicNotYours, TopicAdapterNotFound, TopicGrantNotNeeded)
class TopicPublishersApi(CabinetApi):
    @extend_schema(
        operation_id="topics_publishers_grant",
        summary="Let another owner's adapter publish to your topic",
        request=TopicAdapterInput,
        responses={201: TopicAdapterInput, 200: TopicAdapterInput},
        tags=["topics"],
    )
    def post(self, request: AuthenticatedRequest, topic_id: int) -> Response:
        topic = topic_owned(request.user, topic_id)
        adapter_id = TopicAdapterInput.validated(request.data)["adapterId"]
        created = publisher_grant(topic=topic, adapter_id=adapter_id)
        return Response({"adapterId": adapter_id}, status=201 if created else 200)


@answers(TopicNotFound, TopicNotYours, NotFound)
class TopicPublisherApi(CabinetApi):
    @extend_schema(
        operation_id="topics_publishers_revoke",
        summary="Withdraw a grant: that adapter may no longer publish to your topic",
        responses={200: EmptyOutput},
        tags=["topics"],
    )
    def delete(self, request: AuthenticatedRequest, topic_id: int, adapter_id: int) -> Response:
        publisher_revoke(topic=topic_owned(request.user, topic_id), adapter_id=adapter_id)
        return Response({})


@answers(TopicNotFound, TopicNotYours, TopicAdapterNotFound, TopicGrantNotNeeded)
class TopicSubscribersApi(CabinetApi):
    @extend_schema(
        operation_id="topics_subscribers_allow",
        summary="Let another owner's adapter be subscribed to your topic (its owner subscribes it)",
        request=TopicAdapterInput,
        responses={201: TopicAdapterInput, 200: TopicAdapterInput},
        tags=["topics"],
    )
    def post(self, request: AuthenticatedRequest, topic_id: int) -> Response:
        topic = topic_owned(request.user, topic_id)
        adapter_id = TopicAdapterInput.validated(request.data)["adapterId"]
        created = subscriber_allow(topic=topic, adapter_id=adapter_id)
        return Response({"adapterId": adapter_id}, status=201 if created else 200)


@answers(TopicNotFound, TopicNotYours, NotFound)
class TopicSubscriberApi(CabinetApi):
    @extend_schema(
        operation_id="topics_subscribers_disallow",
        summary="Withdraw an allowance to subscribe, and that adapter's subscription with it",
        responses={200: EmptyOutput},
        tags=["topics"],
    )
    def delete(self, request: AuthenticatedRequest, topic_id: int, adapter_id: int) -> Response:
        subscriber_disallow(topic=topic_owned(request.user, topic_id), adapter_id=adapter_id)
        return Response({})


@answers(TopicNotFound, AdapterNotFound, SubscribeNotAllowed)
class TopicSubscriptionsApi(CabinetApi):
    @extend_schema(
        operation_id="topics_subscribe",
        summary="Subscribe one of your adapters: it gets a copy of each publication from now on",
        description="Subscribing again changes the types (200).",
        request=SubscriptionInput,
        responses={201: SubscriptionOutput, 200: SubscriptionOutput},
        tags=["topics"],
    )
    def post(self, request: AuthenticatedRequest, topic_id: int) -> Response:
        topic = topic_for(request.user, topic_id)
        data = SubscriptionInput.validated(request.data)
        subscription, created = subscription_put(
            user=request.user, topic=topic, adapter_id=data["adapterId"], types=data["types"]
        )
        return Response(subscription_json(subscription), status=201 if created else 200)


@answers(TopicNotFound, NotFound)
class TopicSubscriptionApi(CabinetApi):
    @extend_schema(
        operation_id="topics_unsubscribe",
        summary="End an adapter's subscription (the adapter's owner or the topic's)",
        responses={200: EmptyOutput},
        tags=["topics"],
    )
    def delete(self, request: AuthenticatedRequest, topic_id: int, adapter_id: int) -> Response:
        topic = topic_for(request.user, topic_id)
        subscription_delete(user=request.user, topic=topic, adapter_id=adapter_id)
        return Response({})
