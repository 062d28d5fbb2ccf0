"""Registration, e-mail confirmation, two-factor sign-in and password reset (docs/sessions.md,
"Confirmation codes").

Every endpoint here is unauthenticated; its flow counts it against the rate limits of the
client's IP and of the account or challenge it names.
"""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.serializers import (
    ChallengeOutput,
    ConfirmedOutput,
    ConfirmInput,
    LoginSuccessOutput,
    RegisterInput,
    ResendInput,
    ResendOutput,
    ResetPasswordConfirmInput,
    ResetPasswordInput,
    TwoFactorConfirmInput,
    TwoFactorResendInput,
    TwoFactorResendOutput,
    login_success,
)
from accounts.api.views import SIGN_IN_CHECKS, SIGN_IN_STEPS, AuthApi
from accounts.devices import device_of
from accounts.errors import (
    AttemptsExceeded,
    ChallengeNotFound,
    CodeAlreadyUsed,
    CodeExpired,
    CodeInvalid,
    EmailNotConfirmed,
    EmailTaken,
    NothingToResend,
    PasskeyInvalid,
    ResendTooEarly,
    SignInBusy,
)
from accounts.models import Challenge
from accounts.schema import DEVICE_TOKEN_PARAMETER
from accounts.services.challenges import Started, challenge_resend
from accounts.services.passwords import password_reset_confirm, password_reset_request
from accounts.services.registration import email_confirm, register
from accounts.services.sign_in import SignIn
from accounts.services.sign_in_challenges import sign_in_two_factor_resend
from accounts.services.sign_in_second_factor import (
    sign_in_passkey_confirm,
    sign_in_two_factor_confirm,
)
from platform_site.internals import http_request_of
from platform_site.openapi import answers

# A code confirmed (challenge_confirm) and a code resent (challenge_resend).
CODE_ERRORS = (CodeInvalid, CodeExpired, AttemptsExceeded)
# The operations that take an authenticator app's code: one that passed before is refused apart.
APP_CODE_ERRORS = (*CODE_ERRORS, CodeAlreadyUsed)
RESEND_ERRORS = (ChallengeNotFound, AttemptsExceeded, ResendTooEarly)


def resend_json(started: Started) -> dict[str, object]:
    return {
        "requestId": str(started.challenge.pk),
        "retryAfterSeconds": started.retry_after_seconds,
    }


def signed_in_by_code(request: Request, confirm: Callable[..., SignIn]) -> Response:
    """Confirm ``{requestId, token}`` with ``confirm`` and answer with the sign-in it ends in."""
    data = ConfirmInput(data=request.data)
    data.is_valid(raise_exception=True)
    result = confirm(
        request_id=data.validated_data["requestId"],
        code=data.validated_data["token"].strip(),
        device=device_of(http_request_of(request)),
        request=http_request_of(request),
    )
    return Response(login_success(result))


@answers(EmailTaken)
class RegisterApi(AuthApi):
    @extend_schema(
        operation_id="register",
        summary="Register a cabinet user; a code is e-mailed to confirm the address",
        description="409 EMAIL_TAKEN for an address that has an account, unless the server "
        "runs with ACCOUNTS_PREVENT_ENUMERATION (then 200 like any other, and the owner gets an "
        "e-mail).",
        request=RegisterInput,
        responses={200: ChallengeOutput},
        tags=["registration"],
    )
    def post(self, request: Request) -> Response:
        data = RegisterInput(data=request.data)
        data.is_valid(raise_exception=True)
        started = register(
            email=data.validated_data["email"],
            password=data.validated_data["password"],
            request=http_request_of(request),
        )
        return Response(started.as_json())


@answers(*CODE_ERRORS, *(step for step in SIGN_IN_STEPS if step is not EmailNotConfirmed))
class VerifyEmailConfirmApi(AuthApi):
    device_bound = True  # signs in: the session starts bound to the request's device

    @extend_schema(
        operation_id="register_verify_email_confirm",
        summary="Confirm the e-mail address with its code; signs in",
        description="After the address is confirmed the sign-in goes on in the order of "
        "/api/auth/login/email: 401 ACTION_RESET_PASSWORD and 428 TWO_FACTOR_REQUIRED still apply.",
        request=ConfirmInput,
        responses={200: LoginSuccessOutput},
        tags=["registration"],
    )
    def post(self, request: Request) -> Response:
        return signed_in_by_code(request, email_confirm)


@answers(*RESEND_ERRORS)
class ResendApi(AuthApi):
    purpose: Challenge.Purpose

    def post(self, request: Request) -> Response:
        data = ResendInput(data=request.data)
        data.is_valid(raise_exception=True)
        started = challenge_resend(
            request_id=data.validated_data["requestId"],
            purpose=self.purpose,
            request=http_request_of(request),
        )
        return Response(resend_json(started))


class VerifyEmailResendApi(ResendApi):
    purpose = Challenge.Purpose.REGISTRATION

    @extend_schema(
        operation_id="register_verify_email_resend",
        summary="E-mail a new confirmation code (the old one stops working)",
        request=ResendInput,
        responses={200: ResendOutput},
        tags=["registration"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


# A wrong code for an authenticator app counts under the account's sign-in gate (SignInBusy).
@answers(
    *APP_CODE_ERRORS,
    PasskeyInvalid,
    SignInBusy,
    *SIGN_IN_CHECKS,
)
class TwoFactorConfirmApi(AuthApi):
    device_bound = True  # signs in: the session starts bound to the request's device

    @extend_schema(
        operation_id="login_two_factor_confirm",
        summary="Finish a sign-in with the SMS code, the authenticator app's code, a recovery "
        "code (token), or a passkey (credential)",
        description="The 428's confirmMethod says what the sign-in takes now (SMS, TOTP or "
        "PASSKEY); a recovery code (xxxxx-xxxxx) works for any, once. A TOTP sign-in is "
        "confirmed from the device that typed the password. Wrong codes count across sign-ins: "
        "10 in a row lock the account (423 on the next sign-in); with X-Device-Token, the token "
        "instead. A passkey's answer that does not verify is 400 PASSKEY_INVALID and counts "
        "toward no lock.",
        request=TwoFactorConfirmInput,
        parameters=[DEVICE_TOKEN_PARAMETER],
        responses={200: LoginSuccessOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        data = TwoFactorConfirmInput.validated(request.data)
        device, http_request = device_of(http_request_of(request)), http_request_of(request)
        if "credential" in data:
            result = sign_in_passkey_confirm(
                request_id=data["requestId"],
                credential=data["credential"],
                device=device,
                request=http_request,
            )
        else:
            result = sign_in_two_factor_confirm(
                request_id=data["requestId"],
                code=data["token"].strip(),
                device=device,
                request=http_request,
            )
        return Response(login_success(result))


@answers(*RESEND_ERRORS, NothingToResend)  # a sign-in by an authenticator app sends nothing
class TwoFactorResendApi(AuthApi):
    @extend_schema(
        operation_id="login_two_factor_resend",
        summary="Send a new sign-in code by SMS, or switch the sign-in to another of your factors",
        description="Without method: a new SMS code (the old one stops working) once the "
        "cooldown has passed; 400 NOTHING_TO_RESEND for an authenticator app (TOTP). With "
        "method (one of the 428's otherMethods): the sign-in switches at once, keeping its "
        "requestId and its attempts; switching to SMS sends a code unless one went within the "
        "cooldown, which stays good; PASSKEY answers new options.",
        request=TwoFactorResendInput,
        responses={200: TwoFactorResendOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        data = TwoFactorResendInput.validated(request.data)
        asked = sign_in_two_factor_resend(
            request_id=data["requestId"],
            method=data.get("method"),
            request=http_request_of(request),
        )
        return Response(asked.as_json())


class ResetPasswordApi(AuthApi):
    @extend_schema(
        operation_id="reset_password",
        summary="E-mail a password reset code; the same answer whether or not the account exists",
        request=ResetPasswordInput,
        responses={200: ResendOutput},
        tags=["password reset"],
    )
    def post(self, request: Request) -> Response:
        data = ResetPasswordInput(data=request.data)
        data.is_valid(raise_exception=True)
        started = password_reset_request(
            email=data.validated_data["email"], request=http_request_of(request)
        )
        return Response(resend_json(started))


class ResetPasswordResendApi(ResendApi):
    purpose = Challenge.Purpose.PASSWORD_RESET

    @extend_schema(
        operation_id="reset_password_resend",
        summary="E-mail a new password reset code (the old one stops working)",
        request=ResendInput,
        responses={200: ResendOutput},
        tags=["password reset"],
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


@answers(*CODE_ERRORS)
class ResetPasswordConfirmApi(AuthApi):
    @extend_schema(
        operation_id="reset_password_confirm",
        summary="Set a new password with the e-mailed code; every session ends",
        request=ResetPasswordConfirmInput,
        responses={200: ConfirmedOutput},
        tags=["password reset"],
    )
    def post(self, request: Request) -> Response:
        data = ResetPasswordConfirmInput(data=request.data)
        data.is_valid(raise_exception=True)
        password_reset_confirm(
            request_id=data.validated_data["requestId"],
            code=data.validated_data["token"].strip(),
            new_password=data.validated_data["newPassword"],
            request=http_request_of(request),
        )
        return Response({"confirmed": True})
