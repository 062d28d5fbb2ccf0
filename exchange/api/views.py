"""The exchange API: adapters send, receive and acknowledge messages."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.authentication import AccessTokenAuthentication, AuthenticatedRequest
from accounts.permissions import IsAdapter
from exchange.api.inputs import ack_input, batch_items, receive_options, send_input
from exchange.api.responses import acked_results, deliveries_response, json_response, long_poll
from exchange.api.serializers import (
    IDEMPOTENCY_KEY_RULE,
    IDEMPOTENCY_KEY_SCHEMA,
    AckInput,
    AckOutput,
    LeaseInput,
    ReceiveInput,
    ReceiveOutput,
    ReleaseInput,
    ResultOutput,
    ResultsOutput,
    SendBatchInput,
    SendBatchOutput,
    SendInput,
    SentOutput,
    StatsOutput,
    WhoAmIOutput,
    idempotency_key_valid,
)
from exchange.errors import (
    IdempotencyKeyReused,
    MessageNotFound,
    QueueFull,
    SendInterrupted,
    SendNotAllowed,
    StreamOpen,
    WebhookActive,
)
from exchange.selectors import queue_stats
from exchange.services.leases import Receipt, leases_extend, messages_release, receipt_parse
from exchange.services.messages import messages_ack, messages_ack_receive, messages_receive
from exchange.services.sending import Sent, message_send, messages_send
from exchange.wakeups import wakeups
from platform_site.deferral import resumed
from platform_site.errors import (
    ApplicationError,
    RateLimited,
    ServerBusy,
    UnknownField,
    ValidationFailed,
)
from platform_site.openapi import answers
from platform_site.ratelimits import (
    Limit,
    RateLimitedApiMixin,
    Usage,
    rate_limit_count_more,
)
from platform_site.timestamps import rfc3339

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    IDEMPOTENCY_KEY_SCHEMA,
    OpenApiParameter.HEADER,
    description=f"{IDEMPOTENCY_KEY_RULE} A replay with the same body answers 200 with "
    "the first messageId and duplicate: true; with another body, 409 IDEMPOTENCY_KEY_REUSED.",
)


def idempotency_key_of(request: AuthenticatedRequest) -> str | None:
    """The request's Idempotency-Key header (a send's or a publish's), or None; a value that
    breaks IDEMPOTENCY_KEY_RULE is 400 VALIDATION_FAILED."""
    key = request.headers.get("Idempotency-Key")
    if key is not None and not idempotency_key_valid(key):
        raise ValidationFailed({"Idempotency-Key": [IDEMPOTENCY_KEY_RULE]})
    return key


def exchange_limits(user_id: int) -> list[Limit]:
    """An adapter's exchange requests: counted in the session check's round trip with Redis."""
    return [Limit("exchange", f"adapter:{user_id}", settings.EXCHANGE_RATE_LIMIT)]


@answers(RateLimited)
class ExchangeApi(RateLimitedApiMixin, APIView):
    """Adapters only; every call counts against the adapter's EXCHANGE_RATE_LIMIT. The access
    token's errors and the permission's 403s come with the view's authentication and permission
    (accounts.schema)."""

    permission_classes = [IsAdapter]
    device_bound = True  # the access token's session is bound to a device (accounts.schema)

    def get_authenticators(self) -> list[BaseAuthentication]:
        # With Redis, the count and the session check share one round trip (accounts.liveness).
        # A deferred long poll's later passes check the session again and count nothing: its
        # first pass counted the request (RateLimitedApiMixin keeps that pass's usage).
        counters = None if resumed(self.request)[0] else self.counters
        return [AccessTokenAuthentication(counters=counters)]

    counters = staticmethod(exchange_limits)

    def rate_limits(self, request: Request) -> list[Limit]:
        return exchange_limits(cast(AuthenticatedRequest, request).user.pk)


class WhoAmIApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_whoami",
        summary="Who this token signs in as: for monitoring the exchange API",
        responses={200: WhoAmIOutput},
        tags=["exchange"],
    )
    def get(self, request: AuthenticatedRequest) -> HttpResponse:
        adapter, auth = request.user, request.auth
        return json_response(
            {
                "adapterId": adapter.pk,
                "login": adapter.username,
                "ownerId": adapter.owner_id,
                "sessionId": str(auth.session.pk),
                "deviceId": auth.session.device_id or None,
                "accessTokenExpiresAt": rfc3339(auth.claims.expires_at),
            }
        )


class MessagesApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_receive",
        summary="Receive: lease up to max messages, waiting up to waitSeconds for one",
        description="Messages this X-Device-ID received and did not acknowledge come back first, "
        "with redelivered: true, even inside their lease. After EXCHANGE_MAX_DELIVERIES "
        "deliveries a message moves to the dead letters.",
        parameters=[ReceiveInput],
        responses={200: ReceiveOutput},
        tags=["exchange"],
    )
    # the query; a long poll; the device's stream or the adapter's webhook delivers instead
    @answers(ValidationFailed, UnknownField, ServerBusy, StreamOpen, WebhookActive)
    def get(self, request: AuthenticatedRequest) -> HttpResponse:
        options = receive_options(request.query_params)
        ticket = wakeups.ticket(request.user.pk)  # before the look: see exchange.wakeups
        deliveries = messages_receive(
            adapter=request.user,
            device_key=request.auth.device.key,
            max_messages=options["max"],
            lease_seconds=options["leaseSeconds"],
        )
        return long_poll(request, deliveries_response(deliveries), deliveries, ticket, options)

    @extend_schema(
        operation_id="exchange_send",
        summary="Send a message to an adapter of your owner, or one that granted you a route",
        request=SendInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: SentOutput, 200: SentOutput},
        tags=["exchange"],
    )
    @answers(SendNotAllowed, IdempotencyKeyReused, QueueFull, SendInterrupted)
    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        key = idempotency_key_of(request)
        message = send_input(request.data)
        sent = message_send(
            sender=request.user,
            to=message["to"],
            type=message["type"],
            payload=message["payload"],
            headers=message["headers"],
            idempotency_key=key,
        )
        if sent.duplicate:
            return json_response({"messageId": str(sent.message_id), "duplicate": True})
        return json_response({"messageId": str(sent.message_id)}, status=201)


class MessagesBatchApi(ExchangeApi):
    body_limit_setting = "EXCHANGE_BATCH_MAX_BODY_BYTES"  # platform_site.errors.body_limit

    @extend_schema(
        operation_id="exchange_send_batch",
        summary="Send up to 100 messages: each sent, a duplicate, or failed on its own",
        description="Each message follows the single send's rules: the same routes, payload "
        "limit and queue bound, and its idempotencyKey lives in the namespace of the single "
        "send's Idempotency-Key header (a key given twice in one batch: the second is a "
        "duplicate of the first). One message's failure does not fail the others; results "
        "come in the request's order. Each message counts once against EXCHANGE_RATE_LIMIT: "
        "those past it fail with RATE_LIMITED. The body may be up to "
        "EXCHANGE_BATCH_MAX_BODY_BYTES (4 MiB).",
        request=SendBatchInput,
        responses={200: SendBatchOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        outcomes = batch_outcomes(
            request,
            batch_items(request.data),
            lambda messages: messages_send(sender=request.user, messages=messages),
        )
        return json_response({"results": [_batch_result(outcome) for outcome in outcomes]})


def batch_outcomes(
    request: AuthenticatedRequest,
    items: list[Any],
    perform: Callable[[list[Any]], Sequence[Any]],
) -> list[Any]:
    """A batch's outcomes, in its order: for each item, the refusal it came as (an
    ApplicationError), or what ``perform`` made of it (an outcome or its error), or RATE_LIMITED
    for those past the adapter's EXCHANGE_RATE_LIMIT: each counts once against it."""
    # The request counted once already, for its first item.
    fitting = 1 + rate_limit_count_more(request, exchange_limits(request.user.pk), len(items) - 1)
    performing = {
        position: item
        for position, item in enumerate(items[:fitting])
        if not isinstance(item, ApplicationError)
    }
    performed = dict(zip(performing, perform(list(performing.values())), strict=True))
    outcomes: list[Any] = []
    for position, item in enumerate(items):
        if isinstance(item, ApplicationError):
            outcomes.append(item)
        elif position in performed:
            outcomes.append(performed[position])
        else:
            usage: Usage = request.rate_limit_usage  # type: ignore[attr-defined]
            outcomes.append(RateLimited(retry_after_seconds=usage.retry_after_seconds))
    return outcomes


def batch_failure(error: ApplicationError) -> dict[str, Any]:
    """A batch's failed item: its problem's members but type and title."""
    body = {"status": error.status, "code": error.code, "detail": error.detail}
    return {"status": "failed", "error": {**body, **error.extra}}


def _batch_result(outcome: Sent | ApplicationError) -> dict[str, Any]:
    if isinstance(outcome, ApplicationError):
        return batch_failure(outcome)
    status = "duplicate" if outcome.duplicate else "sent"
    return {"status": status, "messageId": str(outcome.message_id)}


# An ACK that receives may wait for messages, or find them streamed or pushed to a webhook.
@answers(ServerBusy, StreamOpen, WebhookActive)
class MessagesAckApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_ack",
        summary="Acknowledge messages: acked, alreadyAcked, deadLettered or notFound each",
        description="With receive, the ACK and then a receive run as one transaction, and the "
        "answer also holds the messages that GET /api/exchange/messages with those options would "
        "have answered after the ACK.",
        request=AckInput,
        responses={200: AckOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        message_ids, receive = ack_input(request.data)
        adapter, device_key = request.user, request.auth.device.key
        if receive is None:
            acked = messages_ack(adapter=adapter, device_key=device_key, message_ids=message_ids)
            return json_response({"results": acked_results(acked)})
        ticket = wakeups.ticket(adapter.pk)
        resuming, acked = resumed(request)
        if resuming:  # the first pass acknowledged, and found nothing to receive
            deliveries = messages_receive(
                adapter=adapter,
                device_key=device_key,
                max_messages=receive["max"],
                lease_seconds=receive["leaseSeconds"],
            )
        else:
            acked, deliveries = messages_ack_receive(
                adapter=adapter,
                device_key=device_key,
                message_ids=message_ids,
                max_messages=receive["max"],
                lease_seconds=receive["leaseSeconds"],
            )
        answer = deliveries_response(deliveries, results=acked_results(acked))
        return long_poll(request, answer, deliveries, ticket, receive, state=acked)


@answers(MessageNotFound)
class MessageAckApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_ack_one",
        summary="Acknowledge one message (200 acked or alreadyAcked, 404 otherwise)",
        request=None,
        responses={200: ResultOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest, message_id: uuid.UUID) -> HttpResponse:
        [(acked_id, status)] = messages_ack(
            adapter=request.user, device_key=request.auth.device.key, message_ids=[message_id]
        )
        if status == "deadLettered":
            raise MessageNotFound(
                "The message was moved to the dead letters; its owner can redrive it."
            )
        if status == "notFound":
            raise MessageNotFound()
        return json_response({"messageId": acked_id, "status": status})


def _receipts(handles: list[str]) -> list[Receipt]:
    receipts: list[Receipt] = []
    errors: dict[str, list[str]] = {}
    for index, handle in enumerate(handles):
        receipt = receipt_parse(handle)
        if receipt is None:
            errors[f"receiptHandles[{index}]"] = ["Not a receipt handle of this server."]
        else:
            receipts.append(receipt)
    if errors:
        raise ValidationFailed(errors)
    return receipts


class MessagesNackApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_nack",
        summary="Release leased messages now or after delaySeconds",
        request=ReleaseInput,
        responses={200: ResultsOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        data = ReleaseInput(data=request.data)
        data.is_valid(raise_exception=True)
        results = messages_release(
            adapter=request.user,
            receipts=_receipts(data.validated_data["receiptHandles"]),
            delay_seconds=data.validated_data["delaySeconds"],
        )
        return json_response(
            {"results": [{"messageId": str(mid), "status": status} for mid, status in results]}
        )


class MessagesLeaseApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_lease",
        summary="Extend leases still held: extended (with leaseExpiresAt), leaseLost or notFound",
        request=LeaseInput,
        responses={200: ResultsOutput},
        tags=["exchange"],
    )
    def post(self, request: AuthenticatedRequest) -> HttpResponse:
        data = LeaseInput(data=request.data)
        data.is_valid(raise_exception=True)
        results = leases_extend(
            adapter=request.user,
            receipts=_receipts(data.validated_data["receiptHandles"]),
            lease_seconds=data.validated_data["leaseSeconds"],
        )
        items: list[dict[str, Any]] = []
        for message_id, status, expires in results:
            item: dict[str, Any] = {"messageId": str(message_id), "status": status}
            if expires is not None:
                item["leaseExpiresAt"] = rfc3339(expires)
            items.append(item)
        return json_response({"results": items})


class StatsApi(ExchangeApi):
    @extend_schema(
        operation_id="exchange_stats",
        summary="Your queue: available, in flight, delayed, dead-lettered, oldest message age",
        responses={200: StatsOutput},
        tags=["exchange"],
    )
    def get(self, request: AuthenticatedRequest) -> HttpResponse:
        adapter_id: int = request.user.pk
        return json_response(queue_stats(recipient_ids=[adapter_id])[adapter_id].as_json())
