"""drf-spectacular extensions: the platform's bearer tokens, and the rules of fields that their
services enforce, stated in the OpenAPI schema so that a generated client knows them."""

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)


class AccessTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "accounts.authentication.AccessTokenAuthentication"
    name = "accessToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "The accessToken of a sign-in or refresh. Send X-Device-ID with it if "
            "the session was started with one.",
        }


class AdapterLoginFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """Django's ASCIIUsernameValidator, which accounts.services.adapters applies, as a pattern."""

    target_class = "accounts.api.serializers.AdapterLoginField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": self.target.max_length,
            "pattern": ADAPTER_LOGIN_PATTERN,
        }


ADAPTER_LOGIN_PATTERN = r"^[A-Za-z0-9_.@+-]+$"
