"""The exchange domain's errors, each with a stable code."""

from __future__ import annotations

from platform_site.errors import ApplicationError, RateLimited, ServerBusy, ServiceUnavailable


class SendNotAllowed(ApplicationError):
    status = 403
    code = "SEND_NOT_ALLOWED"
    default_detail = (
        "You may send to your owner's adapters and to adapters whose owner granted you a route."
    )


class PublishNotAllowed(ApplicationError):
    status = 403
    code = "PUBLISH_NOT_ALLOWED"
    default_detail = (
        "You may publish to your owner's topics and to topics whose owner granted you publishing."
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
    """A route's sender that is no adapter: nothing has this id or login, or a cabinet user has
    it (the same answer)."""

    status = 404
    code = "NOT_FOUND"
    default_detail = "There is no adapter with this senderAdapterId."


class RouteNotNeeded(ApplicationError):
    """A route from one of the recipient owner's own adapters (the recipient itself included):
    adapters of one owner may send to each other without one."""

    status = 400
    code = "ROUTE_NOT_NEEDED"
    default_detail = (
        "Your own adapters may send to each other already: a route names another owner's adapter."
    )


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


class TopicNotFound(ApplicationError):
    """A topic that is not the caller's and not open to the caller's adapters, whether or not
    it exists."""

    status = 404
    code = "NOT_FOUND"
    default_detail = "You have no topic with this id."


class TopicNotYours(ApplicationError):
    """Changing a topic another owner opened to your adapters: only its owner may."""

    status = 403
    code = "PERMISSION_DENIED"
    default_detail = "Only the topic's owner may do this."


class TopicNameTaken(ApplicationError):
    status = 409
    code = "TOPIC_NAME_TAKEN"
    default_detail = "You have a topic with this name already."


class TopicAdapterNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "There is no adapter with this adapterId."


class TopicGrantNotNeeded(ApplicationError):
    """A grant to one of the topic owner's own adapters, which need none."""

    status = 400
    code = "VALIDATION_FAILED"
    default_detail = "Your own adapters may publish to and subscribe to your topics already."

    def __init__(self) -> None:
        super().__init__(extra={"errors": {"adapterId": [self.default_detail]}})


class SubscribeNotAllowed(ApplicationError):
    status = 403
    code = "SUBSCRIBE_NOT_ALLOWED"
    default_detail = "The topic's owner has not allowed this adapter to subscribe."
