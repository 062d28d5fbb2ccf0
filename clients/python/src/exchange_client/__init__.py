"""The exchange platform's client for adapters.

from exchange_client import ExchangeClient

client = ExchangeClient("https://exchange.example.org", "erp-bridge", "...",
                        device_id="erp-consumer-1")
client.consume(lambda message: print(message.payload))
"""

from exchange_client.client import ExchangeClient, __version__, default_device_id
from exchange_client.consumer import Release, Summary
from exchange_client.errors import (
    AuthenticationError,
    Conflict,
    ExchangeError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    SessionError,
    StreamReplaced,
    StreamUnsupported,
    Unavailable,
    ValidationError,
)
from exchange_client.messages import Message, Outgoing, Publication, Published, Sent
from exchange_client.retries import RetryPolicy
from exchange_client.stream import MessageStream, StreamEvent

__all__ = [
    "AuthenticationError",
    "Conflict",
    "ExchangeClient",
    "ExchangeError",
    "Message",
    "MessageStream",
    "NotFound",
    "Outgoing",
    "PayloadTooLarge",
    "PermissionDenied",
    "Publication",
    "Published",
    "Release",
    "RetryPolicy",
    "Sent",
    "SessionError",
    "StreamEvent",
    "StreamReplaced",
    "StreamUnsupported",
    "Summary",
    "Unavailable",
    "ValidationError",
    "__version__",
    "default_device_id",
]
