"""An adapter's traffic over time, for its owner (GET /api/users/adapters/{id}/traffic;
docs/exchange.md, "Traffic over time")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import AdapterNotFound
from accounts.services.adapters import adapter_for_owner
from exchange.api.serializers import QueryInput
from exchange.services.traffic import RANGES, Traffic, traffic_points
from platform_site.errors import UnknownField, ValidationFailed
from platform_site.openapi import answers
from platform_site.timestamps import rfc3339

TRAFFIC_RANGES = tuple(RANGES)


class TrafficInput(QueryInput):
    range = serializers.ChoiceField(
        choices=TRAFFIC_RANGES,
        default="1h",
        help_text="The last hour or 24 hours by the minute, or the last 7 days by the hour.",
    )


class TrafficPointOutput(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="The start of the step, a multiple of it (UTC).")
    sent = serializers.IntegerField(
        help_text="Messages the adapter sent (a publication once, whatever its subscribers)."
    )
    received = serializers.IntegerField(
        help_text="Deliveries to it: receives, stream events, webhook posts; redeliveries too."
    )
    acked = serializers.IntegerField(help_text="Its messages acknowledged (its webhook's 2xx).")
    deadLettered = serializers.IntegerField(help_text="Messages of its queue dead-lettered.")
    refused = serializers.IntegerField(
        help_text="Messages it sent that the recipient's full queue refused (QUEUE_FULL)."
    )
    depth = serializers.IntegerField(
        help_text="Messages in its queue at the end of the step (now, for the last step)."
    )


class TrafficOutput(serializers.Serializer[Any]):
    range = serializers.ChoiceField(choices=TRAFFIC_RANGES)
    step = serializers.IntegerField(help_text="Seconds: 60 for 1h and 24h, 3600 for 7d.")
    points = TrafficPointOutput(
        many=True, help_text="Every step of the range, oldest first, the last one now's."
    )


def traffic_json(traffic: Traffic) -> dict[str, Any]:
    return {
        "range": traffic.range,
        "step": traffic.step,
        "points": [
            {
                "at": rfc3339(point.at),
                "sent": point.sent,
                "received": point.received,
                "acked": point.acked,
                "deadLettered": point.dead_lettered,
                "refused": point.refused,
                "depth": point.depth,
            }
            for point in traffic.points
        ],
    }


@answers(AdapterNotFound, ValidationFailed, UnknownField)
class AdapterTrafficApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_traffic",
        summary="The adapter's traffic per minute or hour, and its queue's depth, over a range",
        description=(
            "Counted as the messages move, so the minute now is already there. Minutes are "
            "kept 48 hours, hours 90 days."
        ),
        parameters=[TrafficInput],
        responses={200: TrafficOutput},
        tags=["adapters"],
    )
    def get(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        options = TrafficInput.validated(request.query_params)
        traffic = traffic_points(adapter_ids=[adapter.pk], range_name=options["range"])
        return Response(traffic_json(traffic[adapter.pk]))
