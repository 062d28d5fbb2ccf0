"""The exchange domain's errors, each with a stable code."""

from __future__ import annotations

from platform_site.errors import ApplicationError, RateLimited, ServerBusy, ServiceUnavailable


class SendNotAllowed(ApplicationError):
    status = 403
    code = "SEND_NOT_ALLOWED"
    default_detail = (
        "You may send to your owner's adapters and to adapters whose owner granted you a route."
    )


class IdempotencyKeyReused(ApplicationError):
    status = 409
    code = "IDEMPOTENCY_KEY_REUSED"
    default_detail = "This Idempotency-Key was used for a different message."


class SendInterrupted(ServiceUnavailable):
    """A message's idempotency key kept changing hands while it was sent (forgotten, claimed
    again): rare enough that the sender simply retries."""

    default_detail = "The message's idempotency key changed hands while it was sent; send again."


class MessageNotFound(ApplicationError):
    status = 404
    code = "MESSAGE_NOT_FOUND"
    default_detail = "You have no message with this id waiting for an acknowledgement."


class QueueFull(RateLimited):
    """The recipient's queue holds EXCHANGE_MAX_QUEUE_DEPTH messages: RabbitMQ's reject-publish.
    The sender retries after Retry-After, once the recipient has received and acknowledged."""

    code = "QUEUE_FULL"
    default_detail = "The recipient's queue is full; retry once it has taken messages off it."
    retry_after = 5

    def __init__(self) -> None:
        super().__init__(retry_after_seconds=self.retry_after)


class RouteSenderNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "There is no adapter with this senderAdapterId."


class RouteNotAllowed(ApplicationError):
    status = 400
    code = "VALIDATION_FAILED"
    default_detail = "A route must name another owner's adapter."

    def __init__(self, detail: str) -> None:
        super().__init__(detail, extra={"errors": {"senderAdapterId": [detail]}})

    @classmethod
    def schema_example(cls) -> RouteNotAllowed:
        """The OpenAPI schema's example of it (accounts.schema)."""
        return cls("An adapter needs no route to itself.")


class StreamOpen(ApplicationError):
    """A receive from a device whose push stream is open: the stream delivers its messages."""

    status = 409
    code = "STREAM_OPEN"
    default_detail = (
        "This X-Device-ID has a message stream open, which delivers its messages: receive on "
        "the stream, or close it first."
    )


class WebhookActive(ApplicationError):
    """A receive, or a stream, of an adapter whose webhook is enabled: its messages are pushed."""

    status = 409
    code = "WEBHOOK_ACTIVE"
    default_detail = (
        "This adapter's webhook is enabled: its messages are pushed there. Its owner can disable "
        "or delete the webhook to receive them here."
    )


class WebhookNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "This adapter has no webhook."


class WebhookDisabled(ApplicationError):
    status = 409
    code = "WEBHOOK_DISABLED"
    default_detail = "The webhook is disabled: enable it to send it a test event."


class StreamsBusy(ServerBusy):
    """This server process holds EXCHANGE_STREAM_MAX_CONNECTIONS streams (or holds none at all:
    a server without an event loop)."""

    default_detail = "This server is out of room for streams; retry shortly."
