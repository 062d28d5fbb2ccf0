"""``GET /api/users/me/export``: a person's data in one JSON document (exchange.services.export)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.api.serializers import UserDtoOutput, user_dto
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.models import User
from exchange.services.export import personal_data

EXPORT_FILE = "personal-data.json"


def export_document(user: User) -> dict[str, Any]:
    """The export: the userDto, then what the platform keeps of the person (the API's answer and
    the cabinet's download alike)."""
    return {"profile": user_dto(user), **personal_data(user=user)}


class ExportOutput(serializers.Serializer[Any]):
    profile = UserDtoOutput()
    account = serializers.DictField(help_text="language, dateJoined, lastLogin.")
    sessions = serializers.ListField(child=serializers.DictField())
    passkeys = serializers.ListField(child=serializers.DictField())
    auditEvents = serializers.ListField(child=serializers.DictField())
    adapters = serializers.ListField(child=serializers.DictField())
    routes = serializers.ListField(child=serializers.DictField())
    topics = serializers.ListField(child=serializers.DictField())
    subscriptions = serializers.ListField(child=serializers.DictField())
    webhooks = serializers.ListField(child=serializers.DictField())


class ExportApi(CabinetApi):
    @extend_schema(
        operation_id="users_me_export",
        summary="Your data: profile, sessions, audit events, adapters, routes, topics, "
        "subscriptions and webhooks",
        description="One JSON document, as a download (personal-data.json). No secrets and no "
        "hashes, and no message contents.",
        responses={200: ExportOutput},
        tags=["profile"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        response = Response(export_document(request.user))
        response["Content-Disposition"] = f'attachment; filename="{EXPORT_FILE}"'
        response["Cache-Control"] = "no-store"
        return response
