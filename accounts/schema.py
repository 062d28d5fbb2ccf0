"""drf-spectacular extensions: the platform's bearer tokens, the X-Device-ID header of the
operations that depend on it, every operation's error responses, and the rules of fields that
their services enforce, stated in the OpenAPI schema so that a generated client knows them."""

from datetime import UTC, datetime
from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter

from accounts.authentication import AccessTokenAuthentication
from accounts.device_tokens import DEVICE_TOKEN_HEADER
from accounts.devices import DEVICE_ID_HEADER, DEVICE_ID_SCHEMA
from accounts.errors import (
    AccountLocked,
    CodeAlreadyUsed,
    CodeExpired,
    CodeInvalid,
    DeviceMismatch,
    EmailNotConfirmed,
    InvalidDeviceId,
    ResendTooEarly,
    TokenExpired,
    TokenRevoked,
    TwoFactorRequired,
)
from platform_site.errors import (
    ApplicationError,
    CacheUnavailable,
    DatabaseUnavailable,
    MalformedBody,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    TokenMalformed,
    TokenMissing,
    UnknownField,
    UnsupportedMediaType,
    ValidationFailed,
)
from platform_site.openapi import Answer, Declaration, ErrorClass, answered, problem_responses
from platform_site.serializers import ProblemOutput

DEVICE_HEADER = OpenApiParameter(
    DEVICE_ID_HEADER,
    DEVICE_ID_SCHEMA,
    OpenApiParameter.HEADER,
    description="The device or adapter instance (1..128 printable ASCII). A sign-in binds its "
    "session to it, and the session's later requests (each call with its access token, refresh) "
    "must send the same one, or are 401 DEVICE_MISMATCH. Without it the session is bound to a "
    "fingerprint of User-Agent and client IP.",
)

# On the operations that check a password or a second-factor code (docs/sessions.md).
DEVICE_TOKEN_PARAMETER = OpenApiParameter(
    DEVICE_TOKEN_HEADER,
    str,
    OpenApiParameter.HEADER,
    description="The deviceToken of an earlier sign-in to the same account. With a valid one, "
    "wrong passwords and wrong second-factor codes count against this token alone: 5 wrong "
    "passwords lock the token (423 ACCOUNT_LOCKED with its lockedUntil), not the account, and a "
    "lock of the account does not refuse it. A forged, expired or other account's token counts "
    "as none.",
)


# Every operation: the database or the shared cache may be unreachable for a moment, and an Accept
# header may name nothing JSON.
EVERY_OPERATION: tuple[ErrorClass, ...] = (NotAcceptable, DatabaseUnavailable, CacheUnavailable)
# An operation that takes a JSON body (platform_site.parsers, platform_site.serializers.Input).
BODY: tuple[ErrorClass, ...] = (
    ValidationFailed,
    UnknownField,
    MalformedBody,
    PayloadTooLarge,
    UnsupportedMediaType,
)
# What the API's authentication answers on every operation it guards (its permissions say what
# they answer themselves: accounts.permissions' ``refusals``).
GUARDS: dict[type, tuple[ErrorClass, ...]] = {
    AccessTokenAuthentication: (
        TokenMissing,
        TokenMalformed,
        TokenExpired,
        TokenRevoked,
        DeviceMismatch,
    ),
}

_EXAMPLE_TIME = datetime(2026, 11, 21, 9, 45, tzinfo=UTC)
_EXAMPLE_REQUEST_ID = "0b6f3c1e-5d2a-4c8e-9f47-2a1d6e8b9c30"
# The schema's example of each error whose class needs arguments (the others are built bare).
EXAMPLES: dict[ErrorClass, ApplicationError] = {
    error.__class__: error
    for error in (
        ValidationFailed({"email": ["Enter a valid email address."]}),
        UnknownField({"nickname": ["This field is not accepted."]}),
        RateLimited(retry_after_seconds=42),
        AccountLocked(locked_until=_EXAMPLE_TIME),
        EmailNotConfirmed(request_id=_EXAMPLE_REQUEST_ID, retry_after_seconds=60),
        TwoFactorRequired(
            {
                "requestId": _EXAMPLE_REQUEST_ID,
                "confirmMethod": "SMS",
                "retryAfterSeconds": 60,
                "otherMethods": ["PASSKEY"],
            }
        ),
        CodeInvalid(attempts_remaining=4),
        CodeExpired(attempts_remaining=4),
        CodeAlreadyUsed(attempts_remaining=4),
        ResendTooEarly(retry_after_seconds=42),
    )
}


# The 428 of a sign-in whose second step is a passkey: its request options instead of a code's
# cooldown. Declared beside TwoFactorRequired, so the schema names the members of both shapes.
PASSKEY_STEP = TwoFactorRequired(
    {
        "requestId": _EXAMPLE_REQUEST_ID,
        "confirmMethod": "PASSKEY",
        "options": {
            "challenge": "0t7Zr1xH4u9m3VbQ2cKfP8sN6wYgLdJeA5oTnRiUqMk",
            "timeout": 300000,
            "rpId": "localhost",
            "allowCredentials": [
                {"id": "mQx3b2Zt9Lr4YwKcN1pV7A", "type": "public-key", "transports": ["internal"]}
            ],
            "userVerification": "preferred",
        },
        "otherMethods": ["SMS"],
    }
)


def answer_of(declared: Declaration) -> Answer | None:
    """What the schema shows of a declared error: an instance as the platform raises it (the
    declared one, EXAMPLES', the class's own ``schema_example()``, or the class built bare) and
    its meaning (the declared instance's detail, or the class's default_detail). None when the
    class needs arguments and has no example."""
    if isinstance(declared, ApplicationError):
        return Answer(declared, declared.detail, shared=False)
    example = EXAMPLES.get(declared)
    if example is None and hasattr(declared, "schema_example"):
        example = declared.schema_example()  # an app's own error that needs arguments
    if example is None:
        try:
            example = declared()
        except TypeError:
            return None
    return Answer(example, declared.default_detail)


class PlatformAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the rules that generated clients are built from.

    - A view with ``device_bound = True`` declares X-Device-ID (DEVICE_HEADER) on every operation:
      its answer depends on the header (it signs in, or takes a session's tokens). The marker sits
      on the views' base classes, so a new exchange or cabinet endpoint cannot forget it; each
      operation lists the 400 that a malformed header gets among its own responses.
    - An operation without an authenticator has no security requirement at all. drf-spectacular
      states AllowAny as ``security: [{}]``, which openapi-python-client reads as "requires
      security" and types sign-in as needing an AuthenticatedClient, a token one does not have yet.
    - An operation's error responses are generated from the errors it can answer
      (platform_site.openapi): EVERY_OPERATION's, BODY's when it takes a JSON body,
      InvalidDeviceId's when it is device-bound, its authenticators' (GUARDS), its permissions'
      (their ``refusals``), what its view declares with ``@answers``, and NotFound when its path
      has parameters. An error class is shown as the platform raises it: EXAMPLES holds an
      instance of each class that needs arguments.
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

    def _get_request_body(self, direction: str = "request") -> Any:
        """drf-spectacular shows bodies for PUT, PATCH and POST only; a DELETE of a view marked
        ``delete_takes_body`` (the proof of the owner it takes: docs/sessions.md,
        "Reauthentication") shows its declared one too.
        This module's one reach into drf-spectacular's private API, pinned by
        tests/platform/test_openapi.py's test of DELETE /api/users/me."""
        if self.method != "DELETE" or not getattr(self.view, "delete_takes_body", False):
            return super()._get_request_body(direction)  # type: ignore[no-untyped-call]
        self.method = "POST"
        try:
            return super()._get_request_body(direction)  # type: ignore[no-untyped-call]
        finally:
            self.method = "DELETE"

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        answers = [
            answer
            for declared in dict.fromkeys(
                self.answered(
                    body="requestBody" in operation,
                    in_path=any(p["in"] == "path" for p in operation.get("parameters", [])),
                )
            )
            if (answer := answer_of(declared)) is not None
        ]
        problem = self.resolve_serializer(ProblemOutput, "response").ref
        operation["responses"].update(problem_responses(answers, problem, self.example_component))
        return operation

    def example_component(self, name: str, example: dict[str, Any]) -> dict[str, Any]:
        """A reference to ``example`` as components/examples/``name``: each error's example is
        in the schema once, not in every operation that answers it."""
        kind = ResolvedComponent.EXAMPLE
        component = ResolvedComponent(name, kind, example, example)  # type: ignore[no-untyped-call]
        if component in self.registry and self.registry[component].schema != example:
            return example  # another error class of the same name
        self.registry.register_on_missing(component)
        return component.ref

    def answered(self, *, body: bool, in_path: bool) -> list[Declaration]:
        """Every error this operation can answer, in the order its description lists them."""
        errors: list[Declaration] = list(EVERY_OPERATION)
        if body:
            errors += BODY
        if getattr(self.view, "device_bound", False):
            errors.append(InvalidDeviceId)
        for guard in [*self.view.get_authenticators(), *self.view.get_permissions()]:
            errors += getattr(guard, "refusals", GUARDS.get(type(guard), ()))
        handler = getattr(self.view, self.method.lower(), None)
        errors += answered(type(self.view), handler)
        if in_path:
            errors.append(NotFound)  # a path parameter its pattern refuses: no such path
        return errors


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
