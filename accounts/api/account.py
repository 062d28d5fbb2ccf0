"""A signed-in person's own address (docs/users-api.md, "Changing the e-mail address"), and the
challenge a second factor's proof answers (accounts.api.reauthentication)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from accounts.api.confirmations import CODE_ERRORS, RESEND_ERRORS, resend_json
from accounts.api.reauthentication import REAUTH_ERRORS, reauth_of
from accounts.api.serializers import (
    ChallengeOutput,
    ConfirmInput,
    EmailChangeInput,
    ResendInput,
    ResendOutput,
    UserDtoOutput,
    user_dto,
)
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.errors import EmailTaken
from accounts.services.email_change import (
    email_change_confirm,
    email_change_resend,
    email_change_start,
)
from platform_site.internals import http_request_of
from platform_site.openapi import answers


@answers(EmailTaken, *REAUTH_ERRORS)
class EmailChangeApi(CabinetApi):
    @extend_schema(
        operation_id="users_me_email",
        summary="Change your e-mail address: a code goes to the new one",
        description="Needs a fresh proof (password, token or credential) unless you signed in "
        "within ACCOUNTS_REAUTH_SECONDS: 403 REAUTHENTICATION_REQUIRED. An address another "
        "account has is 409 EMAIL_TAKEN, or with ACCOUNTS_PREVENT_ENUMERATION the same 200 as "
        "any other (no code then confirms it, and that account's owner is told).",
        request=EmailChangeInput,
        responses={200: ChallengeOutput},
        tags=["profile"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = EmailChangeInput.validated(request.data)
        started = email_change_start(
            user=request.user,
            new_email=data["newEmail"],
            reauth=reauth_of(request, data),
            request=http_request_of(request),
        )
        return Response(started.as_json())


@answers(*RESEND_ERRORS)
class EmailChangeResendApi(CabinetApi):
    @extend_schema(
        operation_id="users_me_email_resend",
        summary="E-mail a new code to the new address (the old code stops working)",
        request=ResendInput,
        responses={200: ResendOutput},
        tags=["profile"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = ResendInput.validated(request.data)
        started = email_change_resend(
            request_id=data["requestId"], request=http_request_of(request)
        )
        return Response(resend_json(started))


@answers(*CODE_ERRORS, EmailTaken)
class EmailChangeConfirmApi(CabinetApi):
    @extend_schema(
        operation_id="users_me_email_confirm",
        summary="Confirm the new address with its code: it is your e-mail address now",
        description="The old address is told; every other session of yours ends.",
        request=ConfirmInput,
        responses={200: UserDtoOutput},
        tags=["profile"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = ConfirmInput.validated(request.data)
        user = email_change_confirm(
            user=request.user,
            request_id=data["requestId"],
            code=data["token"].strip(),
            session=request.auth.session,
            request=http_request_of(request),
        )
        return Response(user_dto(user))
