"""The push stream's endpoint: GET /api/exchange/messages/stream (the stream itself is
exchange/streams.py)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema

from accounts.authentication import AuthenticatedRequest
from exchange.api.serializers import StreamInput
from exchange.api.views import ExchangeApi
from exchange.errors import StreamsBusy
from exchange.streams import END_DETAILS, stream_response
from platform_site.errors import NotAcceptable, UnknownField, ValidationFailed
from platform_site.negotiation import EVENT_STREAM, EventStreamNegotiation, EventStreamRenderer
from platform_site.openapi import answers

# One event of the stream, as OpenAPI 3.2's itemSchema of text/event-stream describes them. OpenAPI
# 3.0 has no contentSchema for the JSON text in ``data``: its descriptions name the shapes.
STREAM_EVENT = {
    "oneOf": [
        {
            "type": "object",
            "required": ["event", "id", "data"],
            "properties": {
                "event": {"type": "string", "enum": ["message"]},
                "id": {"type": "string", "format": "uuid", "description": "The messageId."},
                "data": {
                    "type": "string",
                    "description": "JSON: a received message, exactly a DeliveryOutput (an item "
                    "of GET /api/exchange/messages's messages).",
                },
            },
        },
        {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": ["end"]},
                "data": {
                    "type": "string",
                    "description": "JSON: {code, detail}, code one of "
                    + ", ".join(END_DETAILS)
                    + ". The server closes the stream after it.",
                },
            },
        },
    ]
}


class MessagesStreamApi(ExchangeApi):
    renderer_classes = [EventStreamRenderer]
    content_negotiation_class = EventStreamNegotiation

    @extend_schema(
        operation_id="exchange_stream",
        summary="Push stream: messages as Server-Sent Events as they arrive, paced by credits",
        description=(
            "Ask with Accept: text/event-stream (anything else is 406 NOT_ACCEPTABLE). Each "
            "message is an event `message` whose `id` is its messageId and whose `data` is the "
            "JSON of a received message, exactly as an item of GET /api/exchange/messages; "
            "a comment `: keep-alive` comes every EXCHANGE_STREAM_HEARTBEAT_SECONDS (15). At most "
            "maxOutstanding messages are delivered and not yet settled: settle them with the "
            "ACK, NACK and lease endpoints, and each settled message (or lease run out) frees a "
            "credit at once. One stream per X-Device-ID: a second one ends the first, and a "
            "receive from a device whose stream is open is 409 STREAM_OPEN. Before the server "
            "ends a stream it sends an event `end` with data {code, detail}: TOKEN_EXPIRED, "
            "TOKEN_REVOKED, REPLACED or SHUTDOWN. Opening counts once against "
            "EXCHANGE_RATE_LIMIT; deliveries do not."
        ),
        parameters=[StreamInput],
        responses={
            (200, EVENT_STREAM): OpenApiResponse(
                response=STREAM_EVENT,
                description="Server-Sent Events, each as this schema describes it: `message` "
                "events (data: a received message), an `end` event (data: {code, detail}), and "
                "`: keep-alive` comments, which are no events.",
            )
        },
        tags=["exchange"],
    )
    @answers(ValidationFailed, UnknownField, NotAcceptable, StreamsBusy)
    def get(self, request: AuthenticatedRequest) -> StreamingHttpResponse:
        options = StreamInput.validated(request.query_params)
        return stream_response(
            request,
            max_outstanding=options["maxOutstanding"],
            lease_seconds=options["leaseSeconds"],
        )
