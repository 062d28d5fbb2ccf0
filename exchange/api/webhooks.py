"""The owner's side of an adapter's webhook (/api/users/adapters/{id}/webhook...; docs/exchange.md,
"Webhooks")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.api.serializers import EmptyOutput
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import AdapterNotFound
from accounts.services.adapters import adapter_for_owner
from exchange.errors import WebhookDisabled, WebhookNotFound
from exchange.models import Webhook, WebhookAttempt
from exchange.services.webhooks import (
    webhook_attempts,
    webhook_delete,
    webhook_get,
    webhook_put,
    webhook_secret_rotate,
    webhook_test_send,
)
from exchange.webhooks.targets import MAX_URL_LENGTH
from platform_site.openapi import answers
from platform_site.serializers import Input
from platform_site.timestamps import rfc3339

# Named in the schema by SPECTACULAR_SETTINGS' ENUM_NAME_OVERRIDES (platform_site/wiring.py).
DISABLED_REASONS = Webhook.DisabledReason.values
OUTCOMES = WebhookAttempt.Outcome.values
URL_HELP = (
    "Where the adapter's messages are POSTed: https:// and a public address (unless the "
    "platform sets EXCHANGE_WEBHOOK_ALLOW_PRIVATE)."
)


# What a JSON Schema pattern can say of a webhook's URL: http(s) and printable ASCII. The rest is
# url_problem's (https only unless EXCHANGE_WEBHOOK_ALLOW_PRIVATE, a host name or a public
# address, no credentials): rules of the address and of a setting, not of the string's shape.
URL_PATTERN = r"^https?://[!-~]+$"


class WebhookInput(Input):
    url = serializers.RegexField(
        URL_PATTERN,
        max_length=MAX_URL_LENGTH,
        help_text=URL_HELP,
        error_messages={"invalid": "Enter an https:// URL in printable ASCII, without spaces."},
    )
    enabled = serializers.BooleanField(required=False, default=True)


class WebhookSetOutput(serializers.Serializer[Any]):
    url = serializers.CharField()
    enabled = serializers.BooleanField()
    secret = serializers.CharField(
        required=False,
        help_text="whsec_ and the base64 of 32 random bytes: shown when the webhook is created, "
        "only then.",
    )


class WebhookOutput(serializers.Serializer[Any]):
    url = serializers.CharField()
    enabled = serializers.BooleanField()
    disabledReason = serializers.ChoiceField(
        choices=DISABLED_REASONS,
        allow_null=True,
        help_text="Why the platform turned it off: GONE (the endpoint answered 410), FAILING "
        "(failures without a success for EXCHANGE_WEBHOOK_DISABLE_AFTER_DAYS); null otherwise.",
    )


class WebhookSecretOutput(serializers.Serializer[Any]):
    secret = serializers.CharField(
        help_text="The new secret. The previous one still signs, beside it, for "
        "EXCHANGE_WEBHOOK_SECRET_OVERLAP_SECONDS."
    )


class WebhookTestOutput(serializers.Serializer[Any]):
    messageId = serializers.UUIDField()


class WebhookAttemptOutput(serializers.Serializer[Any]):
    messageId = serializers.UUIDField()
    attempt = serializers.IntegerField(help_text="Counted from 1 for each message.")
    at = serializers.DateTimeField()
    status = serializers.IntegerField(allow_null=True, help_text="The HTTP status, if any came.")
    outcome = serializers.ChoiceField(choices=OUTCOMES)
    latencyMs = serializers.IntegerField()
    error = serializers.CharField(
        help_text="The first 200 bytes of an error answer, or what failed; empty when delivered."
    )


class WebhookAttemptsOutput(serializers.Serializer[Any]):
    attempts = WebhookAttemptOutput(many=True)


def webhook_json(webhook: Webhook) -> dict[str, Any]:
    return {
        "url": webhook.url,
        "enabled": webhook.enabled,
        "disabledReason": webhook.disabled_reason,
    }


def attempt_json(attempt: WebhookAttempt) -> dict[str, Any]:
    return {
        "messageId": str(attempt.message_id),
        "attempt": attempt.attempt,
        "at": rfc3339(attempt.at),
        "status": attempt.status,
        "outcome": attempt.outcome,
        "latencyMs": attempt.latency_ms,
        "error": attempt.error,
    }


@answers(AdapterNotFound, WebhookNotFound)
class WebhookApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_webhook_get",
        summary="The adapter's webhook",
        responses={200: WebhookOutput},
        tags=["webhooks"],
    )
    def get(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        return Response(webhook_json(webhook_get(adapter=adapter)))

    @extend_schema(
        operation_id="adapters_webhook_put",
        summary="Push the adapter's messages to a URL (its secret is shown when it is created)",
        description="While the webhook is enabled, the adapter's messages are POSTed to the URL, "
        "signed as the Standard Webhooks specification says, and not handed out otherwise: a "
        "receive answers 409 WEBHOOK_ACTIVE and a stream ends with WEBHOOK_ACTIVE. A 2xx "
        "acknowledges the message; other answers are retried on EXCHANGE_WEBHOOK_RETRY_SCHEDULE. "
        "Enabling it (again), or a new URL, starts every waiting message's schedule afresh.",
        request=WebhookInput,
        responses={200: WebhookSetOutput},
        tags=["webhooks"],
    )
    def put(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        data = WebhookInput(data=request.data)
        data.is_valid(raise_exception=True)
        done = webhook_put(
            adapter=adapter, url=data.validated_data["url"], enabled=data.validated_data["enabled"]
        )
        answer: dict[str, Any] = {"url": done.webhook.url, "enabled": done.webhook.enabled}
        if done.secret is not None:
            answer["secret"] = done.secret
        return Response(answer)

    @extend_schema(
        operation_id="adapters_webhook_delete",
        summary="Delete the webhook and its log: the adapter receives its messages again",
        responses={200: EmptyOutput},
        tags=["webhooks"],
    )
    def delete(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        webhook_delete(adapter=adapter)
        return Response({})


@answers(AdapterNotFound, WebhookNotFound)
class WebhookSecretApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_webhook_secret_rotate",
        summary="Rotate the webhook's secret; the old one signs beside it for a day",
        request=None,
        responses={200: WebhookSecretOutput},
        tags=["webhooks"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        return Response({"secret": webhook_secret_rotate(adapter=adapter)})


@answers(AdapterNotFound, WebhookNotFound, WebhookDisabled)
class WebhookTestApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_webhook_test",
        summary="Queue a test event (type webhook.test) for the webhook, pushed as any message",
        request=None,
        responses={202: WebhookTestOutput},
        tags=["webhooks"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        message = webhook_test_send(adapter=adapter)
        return Response({"messageId": str(message.message_id)}, status=202)


@answers(AdapterNotFound, WebhookNotFound)
class WebhookAttemptsApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_webhook_attempts",
        summary="The webhook's delivery log, newest first (the last 100 attempts)",
        responses={200: WebhookAttemptsOutput},
        tags=["webhooks"],
    )
    def get(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        return Response({"attempts": [attempt_json(a) for a in webhook_attempts(adapter=adapter)]})
