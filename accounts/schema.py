"""OpenAPI description of the platform's bearer tokens (drf-spectacular extension)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


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
