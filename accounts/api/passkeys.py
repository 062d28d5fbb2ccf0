"""Passkeys (docs/users-api.md, "Passkeys"): a signed-in person registers, lists and removes
them (/api/users/passkeys...); anybody signs in with one alone (/api/auth/login/passkey...)."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.reauthentication import REAUTH_ERRORS, reauth_of
from accounts.api.serializers import (
    CREDENTIAL_HELP,
    OPTIONS_HELP,
    CredentialField,
    EmptyOutput,
    LoginSuccessOutput,
    ReauthInput,
    login_success,
)
from accounts.api.views import SIGN_IN_CHECKS, AuthApi, CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.devices import device_of
from accounts.errors import PasskeyInvalid
from accounts.models import Passkey
from accounts.schema import DEVICE_TOKEN_PARAMETER
from accounts.services.passkeys import (
    MAX_NAME,
    Ceremony,
    passkey_register,
    passkey_registration_start,
    passkey_remove,
    passkey_sign_in,
    passkey_sign_in_start,
    passkeys_of,
)
from platform_site.errors import NotFound
from platform_site.internals import http_request_of
from platform_site.openapi import answers
from platform_site.serializers import Input
from platform_site.timestamps import rfc3339


class CeremonyOutput(serializers.Serializer[Any]):
    requestId = serializers.UUIDField()
    options = serializers.DictField(help_text=OPTIONS_HELP)


class PasskeyCreateInput(Input):
    requestId = serializers.UUIDField()
    credential = CredentialField(help_text=CREDENTIAL_HELP)
    name = serializers.CharField(max_length=MAX_NAME, required=False, allow_blank=True)


class PasskeySignInInput(Input):
    requestId = serializers.UUIDField()
    credential = CredentialField(help_text=CREDENTIAL_HELP)


class PasskeyOutput(serializers.Serializer[Any]):
    passkeyId = serializers.UUIDField()
    name = serializers.CharField()
    createdAt = serializers.DateTimeField()
    lastUsedAt = serializers.DateTimeField(allow_null=True)


class PasskeyListOutput(serializers.Serializer[Any]):
    passkeys = PasskeyOutput(many=True)


def ceremony_json(ceremony: Ceremony) -> dict[str, Any]:
    return {"requestId": ceremony.request_id, "options": ceremony.options}


def passkey_json(passkey: Passkey) -> dict[str, Any]:
    return {
        "passkeyId": str(passkey.pk),
        "name": passkey.name,
        "createdAt": rfc3339(passkey.created_at),
        "lastUsedAt": None if passkey.last_used_at is None else rfc3339(passkey.last_used_at),
    }


class PasskeyRegistrationOptionsApi(CabinetApi):
    @extend_schema(
        operation_id="passkeys_registration_options",
        summary="Start registering a passkey: the creation options, for five minutes",
        request=None,
        responses={200: CeremonyOutput},
        tags=["passkeys"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        return Response(ceremony_json(passkey_registration_start(user=request.user)))


class PasskeysApi(CabinetApi):
    @extend_schema(
        operation_id="passkeys_list",
        summary="Your passkeys",
        responses={200: PasskeyListOutput},
        tags=["passkeys"],
    )
    def get(self, request: AuthenticatedRequest) -> Response:
        return Response({"passkeys": [passkey_json(p) for p in passkeys_of(user=request.user)]})

    @extend_schema(
        operation_id="passkeys_create",
        summary="Register a passkey: the browser's answer to the creation options",
        request=PasskeyCreateInput,
        responses={201: PasskeyOutput},
        tags=["passkeys"],
    )
    @answers(PasskeyInvalid)
    def post(self, request: AuthenticatedRequest) -> Response:
        data = PasskeyCreateInput.validated(request.data)
        passkey = passkey_register(
            user=request.user,
            request_id=str(data["requestId"]),
            credential=data["credential"],
            name=data.get("name"),
            request=http_request_of(request),
        )
        return Response(passkey_json(passkey), status=201)


@answers(NotFound, *REAUTH_ERRORS)
class PasskeyApi(CabinetApi):
    delete_takes_body = True  # a proof of the owner (accounts.schema)

    @extend_schema(
        operation_id="passkeys_delete",
        summary="Remove a passkey",
        description="Needs a fresh proof (password, token or credential) unless you signed in "
        "within ACCOUNTS_REAUTH_SECONDS: 403 REAUTHENTICATION_REQUIRED. The last passkey of a "
        "person without an SMS code or app turns two-factor sign-in off.",
        request=ReauthInput,
        responses={200: EmptyOutput},
        tags=["passkeys"],
    )
    def delete(self, request: AuthenticatedRequest, passkey_id: uuid.UUID) -> Response:
        if not passkey_remove(
            user=request.user,
            passkey_id=passkey_id,
            reauth=reauth_of(request),
            request=http_request_of(request),
        ):
            raise NotFound("You have no passkey with this id.")
        return Response({})


class PasskeySignInOptionsApi(AuthApi):
    @extend_schema(
        operation_id="login_passkey_options",
        summary="Start signing in with a passkey: request options naming no account",
        request=None,
        responses={200: CeremonyOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        return Response(ceremony_json(passkey_sign_in_start(request=http_request_of(request))))


# Every step after the password but the second factor's: a passkey with user verification is both.
@answers(PasskeyInvalid, *SIGN_IN_CHECKS)
class PasskeySignInApi(AuthApi):
    device_bound = True  # the session starts bound to the request's device (accounts.schema)

    @extend_schema(
        operation_id="login_passkey",
        summary="Sign in with a passkey alone (user verification required)",
        description="A password lock does not block it; a wrong answer counts toward nothing. "
        "Then the steps every sign-in ends with: 403 disabled or expired, 409 "
        "EMAIL_NOT_CONFIRMED, 401 ACTION_RESET_PASSWORD.",
        request=PasskeySignInInput,
        parameters=[DEVICE_TOKEN_PARAMETER],
        responses={200: LoginSuccessOutput},
        tags=["auth"],
    )
    def post(self, request: Request) -> Response:
        data = PasskeySignInInput.validated(request.data)
        result = passkey_sign_in(
            request_id=str(data["requestId"]),
            credential=data["credential"],
            device=device_of(http_request_of(request)),
            request=http_request_of(request),
        )
        return Response(login_success(result))
