"""Receiving the platform's webhooks: check that a delivery is the platform's, and recent.

The platform signs each POST as the Standard Webhooks specification says: ``webhook-id`` (the
messageId, the same on every attempt), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,`` and the base64 of HMAC-SHA256 over ``{id}.{timestamp}.{body}``
keyed with the secret's bytes; two such entries, separated by a space, while a rotated secret is
still valid). ``verify`` checks the signature against the raw body as it arrived (before any JSON
parsing) and the timestamp against ``tolerance``, and returns the message::

    from exchange_client.webhooks import WebhookVerificationError, verify

    def receive(request):  # any web framework: the raw body and the headers
        try:
            message = verify(SECRET, request.headers, request.body)
        except WebhookVerificationError:
            return 400
        handle(message)  # idempotent by message.message_id: delivery is at least once
        return 204  # any 2xx acknowledges the message
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from exchange_client.messages import Message

PREFIX = "whsec_"


class WebhookVerificationError(Exception):
    """The delivery is not signed with the secret, or its timestamp is out of tolerance, or its
    headers or body are malformed: answer 4xx and do not act on it."""


def verify(
    secret: str, headers: Mapping[str, str], body: bytes | str, tolerance: int = 300
) -> Message:
    """The delivered message, if ``body`` and ``headers`` are a delivery signed with ``secret``
    (``whsec_...``, as the cabinet showed it) within ``tolerance`` seconds of now; else
    WebhookVerificationError."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    named = {key.lower(): value for key, value in headers.items()}
    try:
        webhook_id = named["webhook-id"]
        timestamp = int(named["webhook-timestamp"])
        signatures = named["webhook-signature"].split(" ")
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (KeyError, ValueError) as error:
        raise WebhookVerificationError(f"Not a signed delivery: {error}") from None
    if abs(time.time() - timestamp) > tolerance:
        raise WebhookVerificationError("The timestamp is out of tolerance (a replay?)")
    signed = f"{webhook_id}.{timestamp}.".encode() + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    if not any(
        version == "v1" and hmac.compare_digest(value, expected)
        for version, _, value in (entry.partition(",") for entry in signatures)
    ):
        raise WebhookVerificationError("No signature matches the secret")
    try:
        return Message.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError) as error:
        raise WebhookVerificationError(f"The body is not a message: {error}") from None
