"""Publishing to a topic (POST /api/exchange/topics/{topicId}/messages[/batch]; docs/exchange.md,
"Topics"): each subscriber gets a copy, received as any message is."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from accounts.authentication import AuthenticatedRequest
from exchange.api.inputs import PUBLISH, batch_items, send_input
from exchange.api.responses import json_response
from exchange.api.serializers import (
    BATCH_STATUSES,
    ItemErrorField,
    PublishBatchInput,
    PublishInput,
)
from exchange.api.views import (
    IDEMPOTENCY_HEADER,
    ExchangeApi,
    batch_failure,
    batch_outcomes,
    idempotency_key_of,
)
from exchange.errors import IdempotencyKeyReused, PublishNotAllowed, SendInterrupted
from exchange.services.publishing import (
    Published,
    Publishing,
    topic_publish,
    topic_publish_many,
)
from platform_site.errors import ApplicationError
from platform_site.openapi import answers

RECIPIENTS_HELP = "The subscribers that got a copy."
REFUSED_HELP = "The subscribers whose queue was full (QUEUE_FULL): they got no copy."


class PublishedOutput(serializers.Serializer[Any]):
    publicationId = serializers.UUIDField()
    recipients = serializers.IntegerField(help_text=RECIPIENTS_HELP)
    refused = serializers.IntegerField(help_text=REFUSED_HELP)
    duplicate = serializers.BooleanField(required=False, help_text="Present (true) on a replay.")


class PublishBatchResultOutput(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=BATCH_STATUSES)
    publicationId = serializers.UUIDField(
        required=False, help_text="sent: the new publication; duplicate: the key's first one."
    )
    recipients = serializers.IntegerField(required=False, help_text=RECIPIENTS_HELP)
    refused = serializers.IntegerField(required=False, help_text=REFUSED_HELP)
    error = ItemErrorField(required=False)


class PublishBatchOutput(serializers.Serializer[Any]):
    results = PublishBatchResultOutput(
        many=True, help_text="One per message, in the request's order."
    )


def _published_json(published: Published) -> dict[str, Any]:
    return {
        "publicationId": str(published.publication_id),
        "recipients": published.recipients,
        "refused": published.refused,
    }


@answers(PublishNotAllowed, IdempotencyKeyReused, SendInterrupted)
class TopicMessagesApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_publish",
        summary="Publish to a topic: each subscriber gets its own copy",
        description="Each subscription of the topic whose types take the message's type gets a "
        "copy, queued like a sent message (its own messageId, lease, ACK and dead letters); a "
        "subscriber whose queue is full gets none, counted in refused. The Idempotency-Key "
        "shares the namespace of your sends.",
        request=PublishInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: PublishedOutput, 200: PublishedOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest, topic_id: int) -> HttpResponse:
        key = idempotency_key_of(request)
        message = send_input(request.data, PUBLISH)
        published = topic_publish(
            publisher=request.user,
            topic_id=topic_id,
            publication=Publishing(
                type=message["type"],
                payload=message["payload"],
                headers=message["headers"],
                idempotency_key=key,
            ),
        )
        if published.duplicate:
            return json_response({**_published_json(published), "duplicate": True})
        return json_response(_published_json(published), status=201)


class TopicMessagesBatchApi(ExchangeApi):
    body_limit_setting = "EXCHANGE_BATCH_MAX_BODY_BYTES"  # platform_site.errors.body_limit

    @extend_schema(
        operation_id="exchange_publish_batch",
        summary="Publish up to 100 messages to a topic: each published, a duplicate, or failed",
        description="As the batch send: each message on its own, its idempotencyKey in the "
        "namespace of your sends, results in the request's order, each counting once against "
        "EXCHANGE_RATE_LIMIT.",
        request=PublishBatchInput,
        responses={200: PublishBatchOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest, topic_id: int) -> HttpResponse:
        outcomes = batch_outcomes(
            request,
            batch_items(request.data, PUBLISH),
            lambda items: topic_publish_many(
                publisher=request.user, topic_id=topic_id, items=items
            ),
        )
        return json_response({"results": [_batch_result(outcome) for outcome in outcomes]})


def _batch_result(outcome: Published | ApplicationError) -> dict[str, Any]:
    if isinstance(outcome, ApplicationError):
        return batch_failure(outcome)
    status = "duplicate" if outcome.duplicate else "sent"
    return {"status": status, **_published_json(outcome)}
