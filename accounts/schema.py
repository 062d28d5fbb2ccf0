"""drf-spectacular extensions: the platform's bearer tokens, the X-Device-ID header of the
operations that depend on it, and the rules of fields that their services enforce, stated in the
OpenAPI schema so that a generated client knows them."""

from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter

from accounts.devices import DEVICE_ID_HEADER, DEVICE_ID_SCHEMA

DEVICE_HEADER = OpenApiParameter(
    DEVICE_ID_HEADER,
    DEVICE_ID_SCHEMA,
    OpenApiParameter.HEADER,
    description="The device or adapter instance (1..128 printable ASCII). A sign-in binds its "
    "session to it, and the session's later requests (each call with its access token, refresh) "
    "must send the same one, or are 401 DEVICE_MISMATCH. Without it the session is bound to a "
    "fingerprint of User-Agent and client IP.",
)


class PlatformAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the two rules that generated clients are built from.

    - A view with ``device_bound = True`` declares X-Device-ID (DEVICE_HEADER) on every operation:
      its answer depends on the header (it signs in, or takes a session's tokens). The marker sits
      on the views' base classes, so a new exchange or cabinet endpoint cannot forget it; each
      operation lists the 400 that a malformed header gets among its own responses.
    - An operation without an authenticator has no security requirement at all. drf-spectacular
      states AllowAny as ``security: [{}]``, which openapi-python-client reads as "requires
      security" and types sign-in as needing an AuthenticatedClient, a token one does not have yet.
    """

    def get_override_parameters(self) -> list[Any]:
        parameters: list[Any] = super().get_override_parameters()
        if getattr(self.view, "device_bound", False):
            return [*parameters, DEVICE_HEADER]
        return parameters

    def get_auth(self) -> list[dict[str, list[str]]]:
        if not self.view.get_authenticators():
            return []
        requirements: list[dict[str, list[str]]] = super().get_auth()
        return requirements


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
