"""Serializer bases shared by every API: strict request bodies and the problem+json schema."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

from django.core.validators import (
    BaseValidator,
    MaxLengthValidator,
    MaxValueValidator,
    MinLengthValidator,
    MinValueValidator,
)
from django.utils.translation import ngettext_lazy
from rest_framework import serializers
from rest_framework.utils.formatting import lazy_format

UNKNOWN_FIELD = "unknown_field"
BIGINT_MAX = 2**63 - 1


def json_type_errors(field: serializers.Field[Any, Any, Any, Any], value: Any) -> Any:
    """What is wrong with the JSON type of ``value`` for ``field`` (None when nothing is): the
    field's own "invalid" message, or a dict of them by key or index for a list's or a dict's
    items.

    DRF coerces: 0 and "yes" pass as booleans, 12 as the string "12", 1e400 as "inf", an
    integer as a UUID. The API says strings, booleans and integers in its schema and takes
    exactly those.
    """
    if value is None:
        return None  # the field's own null rule answers
    if isinstance(field, serializers.BooleanField):
        fits = isinstance(value, bool)
    elif isinstance(field, serializers.IntegerField):
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.CharField | serializers.UUIDField):
        fits = isinstance(value, str)
    elif isinstance(field, serializers.ListField) and isinstance(value, list):
        items = {i: json_type_errors(field.child, item) for i, item in enumerate(value)}
        return {i: error for i, error in items.items() if error is not None} or None
    elif isinstance(field, serializers.DictField) and isinstance(value, dict):
        items = {key: json_type_errors(field.child, item) for key, item in value.items()}
        return {key: error for key, error in items.items() if error is not None} or None
    else:
        return None  # anything else checks its own type (a list, a dict, any JSON)
    return None if fits else [field.error_messages["invalid"]]


def _merged(first: Any, second: Any) -> Any:
    """Two error details in one; ``first`` wins where both name the same field or item."""
    if isinstance(first, dict) and isinstance(second, dict):
        keys = [*second, *(key for key in first if key not in second)]
        return {
            key: _merged(first[key], second[key])
            if key in first and key in second
            else first.get(key, second.get(key))
            for key in keys
        }
    return first


def _untrimmed(field: serializers.Field[Any, Any, Any, Any]) -> None:
    """A string arrives as sent: trimming would turn " " into a blank that the schema's
    minLength allows. Services trim where that is the rule (names, codes)."""
    if isinstance(field, serializers.CharField):
        field.trim_whitespace = False
    elif isinstance(field, serializers.ListField | serializers.DictField):
        _untrimmed(field.child)


# DRF's length messages are formatted, not counted ("at least 1 elements"), and its Russian
# catalogue lacks the list ones: ours take the number's plural form (locale/ holds Russian).
_LIST_LENGTH: dict[type[BaseValidator], Any] = {
    MinLengthValidator: ngettext_lazy(
        "Ensure this field has at least %(limit_value)d element.",
        "Ensure this field has at least %(limit_value)d elements.",
        "limit_value",
    ),
    MaxLengthValidator: ngettext_lazy(
        "Ensure this field has no more than %(limit_value)d element.",
        "Ensure this field has no more than %(limit_value)d elements.",
        "limit_value",
    ),
}
_TEXT_LENGTH: dict[type[BaseValidator], Any] = {
    MinLengthValidator: ngettext_lazy(
        "Ensure this field has at least %(limit_value)d character.",
        "Ensure this field has at least %(limit_value)d characters.",
        "limit_value",
    ),
    MaxLengthValidator: ngettext_lazy(
        "Ensure this field has no more than %(limit_value)d character.",
        "Ensure this field has no more than %(limit_value)d characters.",
        "limit_value",
    ),
}


def _counted(field: serializers.Field[Any, Any, Any, Any]) -> None:
    """DRF's own length validators of ``field`` (and of a list's items) with counted messages;
    a validator given a message of its own (a password's minimum length) keeps it."""
    if isinstance(field, serializers.ListField):
        messages = _LIST_LENGTH
        _counted(field.child)
    elif isinstance(field, serializers.CharField):
        messages = _TEXT_LENGTH
    else:
        if isinstance(field, serializers.DictField):
            _counted(field.child)
        return
    validators: list[Any] = []
    for validator in field.validators:
        if isinstance(validator, MinLengthValidator | MaxLengthValidator) and isinstance(
            validator.message, lazy_format
        ):
            kind = type(validator)
            validator = kind(validator.limit_value, message=messages[kind])
        validators.append(validator)
    field.validators = validators


class Input(serializers.Serializer[Any]):
    """Base of every request serializer: a field it does not declare is refused, never ignored,
    and a value of another JSON type than the field's is refused, never coerced.

    Integer fields without bounds get PostgreSQL's bigint range, so a huge number is a 400 here
    rather than a database error later.
    """

    # Query parameters arrive as text: a serializer of them reads "5" as an integer.
    strict_json_types: ClassVar[bool] = True

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        for field in fields.values():
            _untrimmed(field)
            _counted(field)
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
            mistyped = {
                name: error
                for name, field in self.fields.items()
                if self.strict_json_types
                and name in data
                and (error := json_type_errors(field, data[name])) is not None
            }
            if mistyped:
                # With whatever else is wrong, as DRF reports it: one answer names every error.
                try:
                    super().to_internal_value(data)
                except serializers.ValidationError as error:
                    raise serializers.ValidationError(_merged(mistyped, error.detail)) from None
                raise serializers.ValidationError(mistyped)
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


def openapi_request_bodies_closed(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular's postprocessing hook: the schema says what Input enforces.

    Every request body is an Input, and its component (COMPONENT_SPLIT_REQUEST names it
    ``...Request``) gets ``additionalProperties: false``, since an undeclared field is 400
    UNKNOWN_FIELD; a generated client or a fuzzer then knows not to send one. Input's own
    docstring, which drf-spectacular would give every such component, is dropped.

    An integer that Input bounds by PostgreSQL's bigint (an adapter's id: ``to``,
    ``senderAdapterId``) gets a small example: Swagger UI's "Try it out" would otherwise fill in
    its maximum, which JavaScript rounds to 9223372036854776000, a number the field refuses.
    """
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
            if component.get("description") == _INPUT_DESCRIPTION:
                del component["description"]
    _bigint_examples(result)
    return result


BIGINT_EXAMPLE = 2


def _bigint_examples(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "integer" and schema.get("maximum") == BIGINT_MAX:
            schema.setdefault("example", max(BIGINT_EXAMPLE, schema.get("minimum", BIGINT_EXAMPLE)))
        for value in schema.values():
            _bigint_examples(value)
    elif isinstance(schema, list):
        for value in schema:
            _bigint_examples(value)


_INPUT_DESCRIPTION = inspect.getdoc(Input)
