"""Serializer bases shared by every API: strict request bodies and the problem+json schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from rest_framework import serializers

UNKNOWN_FIELD = "unknown_field"
BIGINT_MAX = 2**63 - 1


class Input(serializers.Serializer[Any]):
    """Base of every request serializer: a field it does not declare is refused, never ignored.

    Integer fields without bounds get PostgreSQL's bigint range, so a huge number is a 400 here
    rather than a database error later.
    """

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        for field in fields.values():
            if isinstance(field, serializers.IntegerField):
                if field.max_value is None:
                    field.validators.append(MaxValueValidator(BIGINT_MAX))
                if field.min_value is None:
                    field.validators.append(MinValueValidator(-BIGINT_MAX - 1))
        return fields

    @classmethod
    def validated(cls, data: Any) -> dict[str, Any]:
        """``data`` validated, or the 400 that says why."""
        serializer = cls(data=data)
        serializer.is_valid(raise_exception=True)
        validated: dict[str, Any] = serializer.validated_data
        return validated

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in writable)
            if unknown:
                raise serializers.ValidationError(
                    {
                        name: [
                            serializers.ErrorDetail("This field is not accepted.", UNKNOWN_FIELD)
                        ]
                        for name in unknown
                    }
                )
        return super().to_internal_value(data)


def has_unknown_field(detail: Any) -> bool:
    if isinstance(detail, serializers.ErrorDetail):
        return detail.code == UNKNOWN_FIELD
    if isinstance(detail, Mapping):
        return any(has_unknown_field(value) for value in detail.values())
    if isinstance(detail, list):
        return any(has_unknown_field(value) for value in detail)
    return False


class ProblemOutput(serializers.Serializer[Any]):
    """RFC 9457 problem details; error-specific members (lockedUntil...) sit beside these."""

    type = serializers.CharField(default="about:blank")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable UPPER_SNAKE identifier of the error.")

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # Added here because a class attribute named "errors" would hide Serializer.errors.
        fields = super().get_fields()
        fields["errors"] = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            required=False,
            help_text="Validation errors by field (VALIDATION_FAILED, UNKNOWN_FIELD).",
        )
        return fields


_PROBLEM_DESCRIPTIONS = {
    400: "Invalid request: VALIDATION_FAILED, UNKNOWN_FIELD or MALFORMED_JSON.",
    401: "Not authenticated: TOKEN_MISSING, TOKEN_MALFORMED, TOKEN_EXPIRED, TOKEN_REVOKED, "
    "DEVICE_MISMATCH.",
    403: "Not allowed for this principal.",
    404: "Not found (or not yours).",
    409: "Conflict.",
    413: "PAYLOAD_TOO_LARGE.",
    423: "ACCOUNT_LOCKED, with lockedUntil.",
    429: "RATE_LIMITED, with Retry-After and retryAfterSeconds.",
}


def problem_responses(*statuses: int, **descriptions: str) -> dict[Any, Any]:
    """OpenAPI responses for error statuses, each an RFC 9457 application/problem+json body."""
    from drf_spectacular.utils import OpenApiResponse

    return {
        (status, "application/problem+json"): OpenApiResponse(
            response=ProblemOutput,
            description=descriptions.get(f"s{status}", _PROBLEM_DESCRIPTIONS.get(status, "Error.")),
        )
        for status in statuses
    }
