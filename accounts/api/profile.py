"""A signed-in cabinet user's own account: profile, password, two-factor sign-in, sessions."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from accounts.api.confirmations import APP_CODE_ERRORS, CODE_ERRORS, RESEND_ERRORS, resend_json
from accounts.api.reauthentication import REAUTH_ERRORS, reauth_of
from accounts.api.serializers import (
    AccountDeleteInput,
    ChallengeOutput,
    ChangePasswordInput,
    ConfirmInput,
    EmptyOutput,
    LoginSuccessOutput,
    ProfileInput,
    ReauthInput,
    RecoveryCodesOutput,
    ResendInput,
    ResendOutput,
    SessionListOutput,
    TotpConfirmInput,
    TotpStartOutput,
    TwoFactorEnabledOutput,
    TwoFactorOutput,
    UserDtoOutput,
    login_success,
    user_dto,
)
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import (
    AccountLocked,
    PhoneRequired,
    SessionNotFound,
    SignInBusy,
    TwoFactorAlreadyEnabled,
    TwoFactorNotEnabled,
)
from accounts.models import Challenge, Session
from accounts.permissions import IsCabinetUser, IsCabinetUserDoing
from accounts.selectors import sessions_live
from accounts.services.challenges import challenge_resend
from accounts.services.deletion import account_delete
from accounts.services.passwords import password_change
from accounts.services.profile import profile_update, session_revoke_own
from accounts.services.two_factor import (
    recovery_codes_regenerate,
    totp_enable_confirm,
    totp_enable_start,
    two_factor_disable,
    two_factor_enable_confirm,
    two_factor_enable_start,
)
from accounts.session_rules import Action
from platform_site.internals import http_request_of
from platform_site.openapi import answers
from platform_site.timestamps import rfc3339


class MeApi(CabinetApi):
    delete_takes_body = True  # a proof of the owner (accounts.schema)

    def get_permissions(self) -> list[Any]:
        if self.request.method == "GET":
            return [IsCabinetUserDoing(Action.READ_PROFILE)]
        return [IsCabinetUser()]

    @extend_schema(
        operation_id="users_me",
        summary="Your userDto",
        responses={200: UserDtoOutput},
        tags=["profile"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response(user_dto(request.user))

    @extend_schema(
        operation_id="users_me_update",
        summary="Complete or change your profile (each field optional)",
        description="A changed phone is announced by e-mail. While SMS codes are the code "
        "factor, the phone cannot be removed. twoFactorMethod chooses the factor a sign-in asks "
        "for first, among those you hold.",
        request=ProfileInput,
        responses={200: UserDtoOutput},
        tags=["profile"],
    )
    def patch(self, request: AuthenticatedRequest) -> Response:
        data = ProfileInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        user = profile_update(
            user=request.user,
            first_name=fields.get("firstName"),
            last_name=fields.get("lastName"),
            phone=fields.get("phone"),
            two_factor_method=fields.get("twoFactorMethod"),
            request=http_request_of(request),
        )
        return Response(user_dto(user))

    @extend_schema(
        operation_id="users_me_delete",
        summary="Delete your account, its adapters and their queues, routes, webhooks and topics",
        description="Always needs password, and a proof of your second factor as well while "
        "one is on (token, or credential with the requestId of "
        "POST /api/users/me/reauthentication): 403 REAUTHENTICATION_REQUIRED without them. "
        "Every session ends; messages your adapters sent stay with their recipients; the "
        "audit keeps its events under a pseudonym; a last e-mail confirms it.",
        request=AccountDeleteInput,
        responses={200: EmptyOutput},
        tags=["profile"],
    )
    @answers(*REAUTH_ERRORS)
    def delete(self, request: AuthenticatedRequest) -> Response:
        data = AccountDeleteInput.validated(request.data)
        account_delete(
            user=request.user, reauth=reauth_of(request, data), request=http_request_of(request)
        )
        return Response({})


# The current password is checked like a sign-in's, under the account's lock.
@answers(AccountLocked, SignInBusy)
class ChangePasswordApi(CabinetApi):
    def get_permissions(self) -> list[Any]:
        return [IsCabinetUserDoing(Action.CHANGE_PASSWORD)]

    @extend_schema(
        operation_id="users_change_password",
        summary="Change your password: every session ends and this device gets a new pair",
        description="Also the way out of USER_PASSWORD_RESET_REQUIRED: the new pair has role USER. "
        "A wrong currentPassword is 400 and counts toward the lock like a wrong sign-in.",
        request=ChangePasswordInput,
        responses={200: LoginSuccessOutput},
        tags=["profile"],
    )
    def patch(self, request: AuthenticatedRequest) -> Response:
        data = ChangePasswordInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = password_change(
            user=request.user,
            current_password=data.validated_data["currentPassword"],
            new_password=data.validated_data["newPassword"],
            device=request.auth.device,
            request=http_request_of(request),
        )
        return Response(login_success(result))


class TwoFactorApi(CabinetApi):
    delete_takes_body = True  # a proof of the owner (accounts.schema)

    @extend_schema(
        operation_id="users_two_factor_enable",
        summary="Start enabling two-factor sign-in: an SMS code goes to your phone",
        request=None,
        responses={200: ChallengeOutput},
        tags=["two-factor"],
    )
    @answers(TwoFactorAlreadyEnabled, PhoneRequired)
    def patch(self, request: AuthenticatedRequest) -> Response:
        return Response(two_factor_enable_start(user=request.user).as_json())

    @extend_schema(
        operation_id="users_two_factor_disable",
        summary="Turn the SMS code or the authenticator app off (you are told by e-mail)",
        description="Needs a fresh proof (password, token or credential) unless you signed in "
        "within ACCOUNTS_REAUTH_SECONDS: 403 REAUTHENTICATION_REQUIRED. Passkeys stay, and "
        "with them two-factor sign-in; with no factor left, the recovery codes stop working too.",
        request=ReauthInput,
        responses={200: TwoFactorOutput},
        tags=["two-factor"],
    )
    @answers(*REAUTH_ERRORS)
    def delete(self, request: AuthenticatedRequest) -> Response:
        user = two_factor_disable(
            user=request.user, reauth=reauth_of(request), request=http_request_of(request)
        )
        return Response({"twoFactorEnabled": user.two_factor_enabled})


@answers(*CODE_ERRORS, TwoFactorAlreadyEnabled)
class TwoFactorConfirmApi(CabinetApi):
    @extend_schema(
        operation_id="users_two_factor_confirm",
        summary="Confirm the SMS code: two-factor sign-in is on, with new recovery codes",
        description="recoveryCodes are shown only in this answer.",
        request=ConfirmInput,
        responses={200: TwoFactorEnabledOutput},
        tags=["two-factor"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = ConfirmInput(data=request.data)
        data.is_valid(raise_exception=True)
        enabled = two_factor_enable_confirm(
            user=request.user,
            request_id=data.validated_data["requestId"],
            code=data.validated_data["token"].strip(),
            request=http_request_of(request),
        )
        return Response({"twoFactorEnabled": True, "recoveryCodes": enabled.recovery_codes})


@answers(*RESEND_ERRORS)
class TwoFactorResendApi(CabinetApi):
    @extend_schema(
        operation_id="users_two_factor_resend",
        summary="Send a new code for enabling two-factor sign-in",
        request=ResendInput,
        responses={200: ResendOutput},
        tags=["two-factor"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = ResendInput(data=request.data)
        data.is_valid(raise_exception=True)
        started = challenge_resend(
            request_id=data.validated_data["requestId"],
            purpose=Challenge.Purpose.ENABLE_TWO_FACTOR,
            request=http_request_of(request),
            user=request.user,
        )
        return Response(resend_json(started))


@answers(*REAUTH_ERRORS)
class TotpApi(CabinetApi):
    @extend_schema(
        operation_id="users_two_factor_totp",
        summary="Start adding an authenticator app: its secret and otpauth URI",
        description="Put the secret into the app (the URI is the QR code's content), then "
        "confirm with the app's code. Confirming makes the app the account's code factor, in "
        "place of the SMS code or of another app; until then nothing changes. secret is shown "
        "only in this answer. Replacing a code factor needs a fresh proof (password, token or "
        "credential) unless you signed in within ACCOUNTS_REAUTH_SECONDS.",
        request=ReauthInput,
        responses={200: TotpStartOutput},
        tags=["two-factor"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        started = totp_enable_start(
            user=request.user, reauth=reauth_of(request), request=http_request_of(request)
        )
        return Response(
            {
                "requestId": str(started.challenge.pk),
                "secret": started.secret,
                "otpauthUri": started.otpauth_uri,
            }
        )


@answers(*APP_CODE_ERRORS)
class TotpConfirmApi(CabinetApi):
    @extend_schema(
        operation_id="users_two_factor_totp_confirm",
        summary="Confirm the authenticator app with its code: it is your second factor, with "
        "new recovery codes",
        description="Wrong codes follow the rules of every code: 400 CODE_INVALID with "
        "attemptsRemaining, then 429 ATTEMPTS_EXCEEDED; a code that passed before is 400 "
        "CODE_ALREADY_USED, counted the same. recoveryCodes are shown only here.",
        request=TotpConfirmInput,
        responses={200: RecoveryCodesOutput},
        tags=["two-factor"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = TotpConfirmInput(data=request.data)
        data.is_valid(raise_exception=True)
        enabled = totp_enable_confirm(
            user=request.user,
            request_id=data.validated_data["requestId"],
            code=data.validated_data["token"].strip(),
            request=http_request_of(request),
        )
        return Response({"recoveryCodes": enabled.recovery_codes})


@answers(TwoFactorNotEnabled, *REAUTH_ERRORS)
class RecoveryCodesApi(CabinetApi):
    @extend_schema(
        operation_id="users_two_factor_recovery_codes",
        summary="New recovery codes: the old ones stop working",
        description="recoveryCodes are shown only in this answer. 409 TWO_FACTOR_NOT_ENABLED "
        "while two-factor sign-in is off. Needs a fresh proof (password, token or credential) "
        "unless you signed in within ACCOUNTS_REAUTH_SECONDS.",
        request=ReauthInput,
        responses={200: RecoveryCodesOutput},
        tags=["two-factor"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        codes = recovery_codes_regenerate(
            user=request.user, reauth=reauth_of(request), request=http_request_of(request)
        )
        return Response({"recoveryCodes": codes})


def session_json(session: Session, current: uuid.UUID) -> dict[str, Any]:
    return {
        "sessionId": str(session.pk),
        "deviceId": session.device_id,
        "userAgent": session.user_agent,
        "ip": session.ip,
        "createdAt": rfc3339(session.created_at),
        "lastUsedAt": rfc3339(session.last_used_at),
        "expiresAt": rfc3339(session.expires_at),
        "current": session.pk == current,
    }


class SessionsApi(CabinetApi):
    @extend_schema(
        operation_id="users_sessions",
        summary="Your live sessions, most recently used first",
        responses={200: SessionListOutput},
        tags=["sessions"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        current = request.auth.session.pk
        return Response(
            {"sessions": [session_json(s, current) for s in sessions_live(user=request.user)]}
        )


@answers(SessionNotFound)
class SessionApi(CabinetApi):
    @extend_schema(
        operation_id="users_sessions_revoke",
        summary="Sign out one session: its tokens answer 401 from now on",
        responses={200: EmptyOutput},
        tags=["sessions"],
    )
    def delete(self, request: AuthenticatedRequest, session_id: uuid.UUID) -> Response:
        session_revoke_own(
            user=request.user, session_id=session_id, request=http_request_of(request)
        )
        return Response({})
