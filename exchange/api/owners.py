"""The owner's side of the exchange: a cabinet user's adapters with their queues, routes and
purges (/api/users/adapters...). The adapters are accounts (accounts.services.adapters); their
queues and routes are the exchange's."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response

from accounts.api.serializers import AdapterLoginField, EmptyOutput
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import AdapterNotFound, LoginTaken
from accounts.services.adapters import (
    DISPLAY_NAME_MAX_LENGTH,
    adapter_create,
    adapter_for_owner,
    adapter_password_rotate,
    adapter_update,
)
from exchange.errors import RouteNotNeeded, RouteSenderNotFound
from exchange.selectors import AdapterSummary, adapters_for_owner
from exchange.services.adapters import adapter_remove
from exchange.services.queues import queue_purge
from exchange.services.routes import route_grant, route_withdraw
from platform_site.errors import NotFound
from platform_site.internals import http_request_of
from platform_site.openapi import answers
from platform_site.serializers import Input
from platform_site.timestamps import rfc3339


class AdapterCreateInput(Input):
    login = AdapterLoginField(max_length=150, required=False, trim_whitespace=False)


class AdapterCredentialsOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()
    password = serializers.CharField(help_text="Shown only in this response.")


class AdapterPasswordOutput(serializers.Serializer[Any]):
    password = serializers.CharField(help_text="The new password, shown only in this response.")


class AdapterUpdateInput(Input):
    """At least one of the two; each that is sent is changed."""

    active = serializers.BooleanField(
        required=False, help_text="false disables the adapter (its sessions end); true enables it."
    )
    displayName = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=DISPLAY_NAME_MAX_LENGTH,
        help_text="The adapter's name for people, shown beside its login; empty: none.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            problem = "Send active, displayName or both."
            raise serializers.ValidationError({"active": [problem], "displayName": [problem]})
        return attrs


class PurgedOutput(serializers.Serializer[Any]):
    purged = serializers.IntegerField(help_text="How many messages the purge deleted.")


class RouteCreateInput(Input):
    """The sender by its login or by its id: exactly one of the two."""

    senderLogin = serializers.CharField(
        required=False, max_length=150, help_text="The login of another owner's adapter."
    )
    senderAdapterId = serializers.IntegerField(
        required=False, min_value=1, help_text="The id of another owner's adapter."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("senderLogin" in attrs) == ("senderAdapterId" in attrs):
            problem = "Send either senderLogin or senderAdapterId."
            raise serializers.ValidationError(
                {"senderLogin": [problem], "senderAdapterId": [problem]}
            )
        return attrs


# Named as the answer's component was when it echoed RouteCreateInput: clients generated from the
# schema keep their class (tests/platform/test_openapi.py), which gains the sender's names.
@extend_schema_serializer(component_name="RouteCreateInput")
class RouteOutput(serializers.Serializer[Any]):
    senderAdapterId = serializers.IntegerField()
    senderLogin = serializers.CharField()
    senderDisplayName = serializers.CharField()


class RouteSenderOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()
    displayName = serializers.CharField()


class QueueOutput(serializers.Serializer[Any]):
    available = serializers.IntegerField()
    inFlight = serializers.IntegerField()
    delayed = serializers.IntegerField()
    deadLettered = serializers.IntegerField()
    oldestAgeSeconds = serializers.IntegerField(allow_null=True)


class AdapterOutput(serializers.Serializer[Any]):
    adapterId = serializers.IntegerField()
    login = serializers.CharField()
    displayName = serializers.CharField(help_text="Empty when the adapter has none.")
    active = serializers.BooleanField()
    createdAt = serializers.DateTimeField()
    lastSignInAt = serializers.DateTimeField(allow_null=True)
    activeSessions = serializers.IntegerField()
    queue = QueueOutput()
    allowedSenderIds = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Adapters of other owners granted a route to this one.",
    )
    allowedSenders = RouteSenderOutput(
        many=True,
        help_text="The same adapters with their logins and display names, by id.",
    )


class AdapterListOutput(serializers.Serializer[Any]):
    adapters = AdapterOutput(many=True)


def adapter_json(summary: AdapterSummary) -> dict[str, Any]:
    adapter = summary.adapter
    return {
        "adapterId": adapter.pk,
        "login": adapter.username,
        "displayName": adapter.display_name,
        "active": adapter.is_active,
        "createdAt": rfc3339(adapter.date_joined),
        "lastSignInAt": None if adapter.last_login is None else rfc3339(adapter.last_login),
        "activeSessions": summary.active_sessions,
        "queue": summary.queue.as_json(),
        "allowedSenderIds": summary.allowed_sender_ids,
        "allowedSenders": [
            {"adapterId": s.adapter_id, "login": s.login, "displayName": s.display_name}
            for s in summary.allowed_senders
        ],
    }


class AdaptersApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_list",
        summary="Your adapters with their queue figures",
        responses={200: AdapterListOutput},
        tags=["adapters"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(
            {"adapters": [adapter_json(s) for s in adapters_for_owner(owner=request.user)]}
        )

    @extend_schema(
        operation_id="adapters_create",
        summary="Create an adapter; its password is shown in this response only",
        request=AdapterCreateInput,
        responses={201: AdapterCredentialsOutput},
        tags=["adapters"],
    )
    @answers(LoginTaken)
    def post(self, request: AuthenticatedRequest) -> Response:
        data = AdapterCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        credentials = adapter_create(owner=request.user, login=data.validated_data.get("login"))
        return Response(
            {
                "adapterId": credentials.adapter_id,
                "login": credentials.login,
                "password": credentials.password,
            },
            status=201,
        )


@answers(AdapterNotFound)
class AdapterApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_update",
        summary="Disable (active: false; its sessions end) or enable an adapter, or name it",
        request=AdapterUpdateInput,
        responses={200: AdapterOutput},
        tags=["adapters"],
    )
    def patch(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        data = AdapterUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        adapter_update(
            adapter=adapter,
            active=data.validated_data.get("active"),
            display_name=data.validated_data.get("displayName"),
            actor=request.user,
        )
        [summary] = [
            s for s in adapters_for_owner(owner=request.user) if s.adapter.pk == adapter.pk
        ]
        return Response(adapter_json(summary))

    @extend_schema(
        operation_id="adapters_delete",
        summary="Delete an adapter with its waiting messages",
        responses={200: EmptyOutput},
        tags=["adapters"],
    )
    def delete(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        adapter_remove(adapter=adapter, actor=request.user)
        return Response({})


@answers(AdapterNotFound)
class AdapterPasswordApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_password_rotate",
        summary="Give the adapter a new password (shown only here); its sessions end",
        request=None,
        responses={200: AdapterPasswordOutput},
        tags=["adapters"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        return Response(
            {"password": adapter_password_rotate(adapter=adapter, request=http_request_of(request))}
        )


@answers(AdapterNotFound)
class AdapterPurgeApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_purge",
        summary="Delete every message waiting for this adapter (its dead letters stay)",
        request=None,
        responses={200: PurgedOutput},
        tags=["adapters"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        return Response({"purged": queue_purge(adapter=adapter, actor=request.user)})


@answers(AdapterNotFound, RouteSenderNotFound, RouteNotNeeded)
class AdapterRoutesApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_routes_grant",
        summary="Let another owner's adapter, by its login or its id, send to this adapter",
        request=RouteCreateInput,
        responses={201: RouteOutput, 200: RouteOutput},
        tags=["adapters"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        data = RouteCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        route, created = route_grant(
            recipient=adapter,
            sender_id=data.validated_data.get("senderAdapterId"),
            sender_login=data.validated_data.get("senderLogin"),
            granted_by=request.user,
        )
        sender = route.sender
        return Response(
            {
                "senderAdapterId": sender.pk,
                "senderLogin": sender.username,
                "senderDisplayName": sender.display_name,
            },
            status=201 if created else 200,
        )


@answers(AdapterNotFound, NotFound)
class AdapterRouteApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_routes_withdraw",
        summary="Withdraw a route: that adapter may no longer send to this one",
        responses={200: EmptyOutput},
        tags=["adapters"],
    )
    def delete(self, request: AuthenticatedRequest, adapter_id: int, sender_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        route_withdraw(recipient=adapter, sender_id=sender_id)
        return Response({})
