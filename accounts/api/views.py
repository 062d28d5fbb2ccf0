"""The accounts API: signing in and keeping a token pair; the base of a signed-in cabinet user's
endpoints (CabinetApi), which the exchange's owner endpoints share (exchange/api/owners.py)."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.serializers import (
    EmptyOutput,
    LoginEmailInput,
    LoginSuccessOutput,
    LoginUsernameInput,
    RefreshTokenInput,
    TokenPairOutput,
    login_success,
)
from accounts.authentication import AuthenticatedRequest
from accounts.devices import device_of
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    BadCredentials,
    CredentialsExpired,
    DeviceMismatch,
    EmailNotConfirmed,
    RefreshTokenReused,
    SignInBusy,
    TokenExpired,
    TokenRevoked,
    TwoFactorRequired,
)
from accounts.permissions import IsCabinetUser
from accounts.ratelimits import auth_limits_consume, auth_limits_consume_refused, user_limits
from accounts.schema import DEVICE_TOKEN_PARAMETER, PASSKEY_STEP
from accounts.services.sessions import session_logout, session_refresh
from accounts.services.sign_in import IdentifierKind, sign_in
from accounts.services.tokens import UNREADABLE_REFRESH
from platform_site.errors import RateLimited, TokenMalformed
from platform_site.internals import http_request_of
from platform_site.openapi import answers
from platform_site.ratelimits import Limit, RateLimitedApiMixin, rate_limit_usage_of


@answers(RateLimited)
class AuthApi(APIView):
    """Unauthenticated endpoints, limited per client IP and per account named. Each flow
    counts its action's limits itself (platform_site.ratelimits.auth_limits_consume), as the
    cabinet's pages calling the same flow do; the view answers the usage in the headers."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def handle_exception(self, exc: Exception) -> Response:
        # A request refused before its flow counted it (a body that cannot be read, or fails
        # validation) still counts against the client's IP; past the limit, 429 is the answer.
        try:
            auth_limits_consume_refused(http_request_of(self.request))
        except RateLimited as limited:
            exc = limited
        return super().handle_exception(exc)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        usage = rate_limit_usage_of(http_request_of(request))
        if usage is not None:
            for name, value in usage.headers().items():
                response.setdefault(name, value)  # a 429's own headers name its exceeded limit
        return response


# The checks after the password (sign_in_continue), which every way of signing in ends with,
# and the second step they end with while two-factor sign-in is on (a code's or a passkey's).
SIGN_IN_CHECKS = (AccountDisabled, AccountExpired, EmailNotConfirmed, CredentialsExpired)
SIGN_IN_STEPS = (*SIGN_IN_CHECKS, TwoFactorRequired, PASSKEY_STEP)


@answers(AccountLocked, BadCredentials, SignInBusy, *SIGN_IN_STEPS)
class LoginApi(AuthApi):
    device_bound = True  # the session starts bound to the request's device (accounts.schema)
    kind: IdentifierKind

    def sign_in(self, request: Request, identifier: str, password: str) -> Response:
        result = sign_in(
            kind=self.kind,
            identifier=identifier,
            password=password,
            device=device_of(http_request_of(request)),
            request=http_request_of(request),
        )
        return Response(login_success(result))


class LoginEmailApi(LoginApi):
    kind = "email"

    @extend_schema(
        operation_id="login_email",
        summary="Sign in with e-mail and password (cabinet users)",
        description="Outcomes in order: 423 locked, 401 BAD_CREDENTIALS, 403 disabled or "
        "expired, 409 EMAIL_NOT_CONFIRMED (a code is e-mailed), 401 ACTION_RESET_PASSWORD, "
        "428 TWO_FACTOR_REQUIRED (a code is sent by SMS), 200.",
        request=LoginEmailInput,
        parameters=[DEVICE_TOKEN_PARAMETER],
        responses={200: LoginSuccessOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        data = LoginEmailInput(data=request.data)
        data.is_valid(raise_exception=True)
        return self.sign_in(request, data.validated_data["email"], data.validated_data["password"])


class LoginUsernameApi(LoginApi):
    kind = "username"

    @extend_schema(
        operation_id="login_username",
        summary="Sign in with login and password (adapters and cabinet users)",
        description="The outcomes of /api/auth/login/email, in the same order.",
        request=LoginUsernameInput,
        parameters=[DEVICE_TOKEN_PARAMETER],
        responses={200: LoginSuccessOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        data = LoginUsernameInput(data=request.data)
        data.is_valid(raise_exception=True)
        return self.sign_in(
            request, data.validated_data["username"], data.validated_data["password"]
        )


# The token in the body is a refresh token; what the service says of it (accounts.services.tokens).
REFRESH_TOKEN_MALFORMED = TokenMalformed(UNREADABLE_REFRESH)


@answers(REFRESH_TOKEN_MALFORMED, TokenExpired, TokenRevoked, DeviceMismatch, RefreshTokenReused)
class RefreshApi(AuthApi):
    device_bound = True  # from another device than the session's: 401 DEVICE_MISMATCH

    @extend_schema(
        operation_id="token_refresh",
        summary="Exchange the refresh token for a new pair (the old refresh token dies)",
        request=RefreshTokenInput,
        responses={200: TokenPairOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        # The API's alone: no flow of the cabinet's to count it in.
        auth_limits_consume(http_request_of(request), kind=None, identifier=None)
        data = RefreshTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        pair = session_refresh(
            refresh_token=data.validated_data["refreshToken"],
            device=device_of(http_request_of(request)),
        )
        return Response(pair.as_json())


@answers(REFRESH_TOKEN_MALFORMED, TokenExpired)
class LogoutApi(AuthApi):
    # Declared like on the session's other calls, and its form checked as there. The session's
    # own device is not compared: possession of the refresh token is the proof (session_logout).
    device_bound = True

    @extend_schema(
        operation_id="logout",
        summary="End the session of this refresh token: both of its tokens stop working",
        request=RefreshTokenInput,
        responses={200: EmptyOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        # The API's alone: no flow of the cabinet's to count it in.
        auth_limits_consume(http_request_of(request), kind=None, identifier=None)
        data = RefreshTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        device_of(http_request_of(request))  # a malformed X-Device-ID is 400 VALIDATION_FAILED
        session_logout(refresh_token=data.validated_data["refreshToken"])
        return Response({})


@answers(RateLimited)
class CabinetApi(RateLimitedApiMixin, APIView):
    """Endpoints of a signed-in cabinet user, limited per user. The access token's errors and the
    permissions' 403s come with the view's authentication and permissions (accounts.schema)."""

    permission_classes: list[Any] = [IsCabinetUser]
    device_bound = True  # the access token's session is bound to a device (accounts.schema)

    def rate_limits(self, request: Request) -> list[Limit]:
        return user_limits(cast(AuthenticatedRequest, request).user.pk)
