"""The exchange's tables: messages and their history (messages.py), push delivery
(pushing.py), topics (topics.py), traffic over time (traffic.py)."""

from exchange.models.messages import (
    SEQUENCE,
    DeadLetter,
    DeliveryLog,
    IdempotencyKey,
    Message,
    NextValue,
    Route,
)
from exchange.models.pushing import Stream, Webhook, WebhookAttempt
from exchange.models.topics import (
    Publication,
    Subscription,
    Topic,
    TopicPublisher,
    TopicSubscriber,
)
from exchange.models.traffic import TrafficHour, TrafficMinute

__all__ = [
    "SEQUENCE",
    "DeadLetter",
    "DeliveryLog",
    "IdempotencyKey",
    "Message",
    "NextValue",
    "Publication",
    "Route",
    "Stream",
    "Subscription",
    "Topic",
    "TopicPublisher",
    "TopicSubscriber",
    "TrafficHour",
    "TrafficMinute",
    "Webhook",
    "WebhookAttempt",
]
