"""The accounts API: signing in, keeping a token pair, and cabinet users' adapters."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.serializers import (
    AdapterCreateInput,
    AdapterCredentialsOutput,
    AdapterListOutput,
    AdapterOutput,
    AdapterPasswordOutput,
    AdapterUpdateInput,
    EmptyOutput,
    LoginEmailInput,
    LoginSuccessOutput,
    LoginUsernameInput,
    PurgedOutput,
    RefreshTokenInput,
    RouteCreateInput,
    TokenPairOutput,
    login_success,
)
from accounts.authentication import AuthenticatedRequest
from accounts.devices import device_of
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    AdapterNotFound,
    BadCredentials,
    CredentialsExpired,
    DeviceMismatch,
    EmailNotConfirmed,
    LoginTaken,
    RefreshTokenReused,
    SignInBusy,
    TokenExpired,
    TokenRevoked,
    TwoFactorRequired,
)
from accounts.permissions import IsCabinetUser
from accounts.schema import DEVICE_TOKEN_PARAMETER
from accounts.selectors import AdapterSummary, adapters_for_owner
from accounts.services.accounts import account_set_active
from accounts.services.adapters import (
    adapter_create,
    adapter_delete,
    adapter_for_owner,
    adapter_password_rotate,
)
from accounts.services.sessions import session_logout, session_refresh
from accounts.services.sign_in import IdentifierKind, sign_in
from accounts.services.tokens import UNREADABLE_REFRESH
from exchange.errors import RouteNotAllowed, RouteSenderNotFound
from exchange.services.queues import queue_purge
from exchange.services.routes import route_grant, route_withdraw
from platform_site.errors import NotFound, RateLimited, TokenMalformed
from platform_site.openapi import answers
from platform_site.ratelimits import (
    Limit,
    RateLimitedApiMixin,
    auth_limits_consume,
    auth_limits_consume_refused,
    rate_limit_usage_of,
    user_limits,
)
from platform_site.timestamps import rfc3339


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
            auth_limits_consume_refused(self.request._request)
        except RateLimited as limited:
            exc = limited
        return super().handle_exception(exc)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        usage = rate_limit_usage_of(request._request)
        if usage is not None:
            for name, value in usage.headers().items():
                response.setdefault(name, value)  # a 429's own headers name its exceeded limit
        return response


# The checks after the password (sign_in_continue), which every way of signing in ends with.
SIGN_IN_STEPS = (
    AccountDisabled,
    AccountExpired,
    EmailNotConfirmed,
    CredentialsExpired,
    TwoFactorRequired,
)


@answers(AccountLocked, BadCredentials, SignInBusy, *SIGN_IN_STEPS)
class LoginApi(AuthApi):
    device_bound = True  # the session starts bound to the request's device (accounts.schema)
    kind: IdentifierKind

    def sign_in(self, request: Request, identifier: str, password: str) -> Response:
        result = sign_in(
            kind=self.kind,
            identifier=identifier,
            password=password,
            device=device_of(request._request),
            request=request._request,
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
        auth_limits_consume(request._request, kind=None, identifier=None)
        data = RefreshTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        pair = session_refresh(
            refresh_token=data.validated_data["refreshToken"], device=device_of(request._request)
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
        auth_limits_consume(request._request, kind=None, identifier=None)
        data = RefreshTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        device_of(request._request)  # a malformed X-Device-ID is 400 VALIDATION_FAILED
        session_logout(refresh_token=data.validated_data["refreshToken"])
        return Response({})


def adapter_json(summary: AdapterSummary) -> dict[str, Any]:
    adapter = summary.adapter
    return {
        "adapterId": adapter.pk,
        "login": adapter.username,
        "active": adapter.is_active,
        "createdAt": rfc3339(adapter.date_joined),
        "lastSignInAt": None if adapter.last_login is None else rfc3339(adapter.last_login),
        "activeSessions": summary.active_sessions,
        "queue": summary.queue.as_json(),
        "allowedSenderIds": summary.allowed_sender_ids,
    }


@answers(RateLimited)
class CabinetApi(RateLimitedApiMixin, APIView):
    """Endpoints of a signed-in cabinet user, limited per user. The access token's errors and the
    permissions' 403s come with the view's authentication and permissions (accounts.schema)."""

    permission_classes: list[Any] = [IsCabinetUser]
    device_bound = True  # the access token's session is bound to a device (accounts.schema)

    def rate_limits(self, request: Request) -> list[Limit]:
        return user_limits(cast(AuthenticatedRequest, request).user.pk)


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
        summary="Disable (active: false; its sessions end) or enable an adapter",
        request=AdapterUpdateInput,
        responses={200: AdapterOutput},
        tags=["adapters"],
    )
    def patch(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        data = AdapterUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        account_set_active(user=adapter, active=data.validated_data["active"], actor=request.user)
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
        adapter_delete(adapter=adapter_for_owner(owner=request.user, adapter_id=adapter_id))
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
            {"password": adapter_password_rotate(adapter=adapter, request=request._request)}
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


@answers(AdapterNotFound, RouteSenderNotFound, RouteNotAllowed)
class AdapterRoutesApi(CabinetApi):
    @extend_schema(
        operation_id="adapters_routes_grant",
        summary="Let another owner's adapter send to this adapter",
        request=RouteCreateInput,
        responses={201: RouteCreateInput, 200: RouteCreateInput},
        tags=["adapters"],
    )
    def post(self, request: AuthenticatedRequest, adapter_id: int) -> Response:
        adapter = adapter_for_owner(owner=request.user, adapter_id=adapter_id)
        data = RouteCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        route, created = route_grant(
            recipient=adapter,
            sender_id=data.validated_data["senderAdapterId"],
            granted_by=request.user,
        )
        return Response({"senderAdapterId": route.sender_id}, status=201 if created else 200)


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
