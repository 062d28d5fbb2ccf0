"""A fresh proof of the owner in the requests that need one (docs/sessions.md,
"Reauthentication"), and the challenge a second factor's proof answers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from accounts.api.serializers import ReauthInput, ReauthStartInput, TwoFactorResendOutput
from accounts.api.views import CabinetApi
from accounts.authentication import AuthenticatedRequest
from accounts.services.reauthentication import (
    PROOF_REFUSALS,
    Proof,
    Reauthentication,
    reauthentication_start,
)

# What a request that needs a fresh proof may answer besides its own errors.
REAUTH_ERRORS = PROOF_REFUSALS


def proof_of(data: dict[str, Any]) -> Proof:
    """The proof members of a validated ReauthInput (or of an input that extends it)."""
    return Proof(
        password=data.get("password"),
        token=None if data.get("token") is None else str(data["token"]).strip(),
        credential=data.get("credential"),
        request_id=data.get("requestId"),
    )


def reauth_of(
    request: AuthenticatedRequest, data: dict[str, Any] | None = None
) -> Reauthentication:
    """The request's session and device, and the proof of ``data`` (the request's body, as a
    ReauthInput, when not given)."""
    if data is None:
        data = ReauthInput.validated(request.data)
    return Reauthentication(
        session=request.auth.session, proof=proof_of(data), device=request.auth.device
    )


class ReauthenticationApi(CabinetApi):
    @extend_schema(
        operation_id="users_reauthentication_start",
        summary="Start proving a second factor: an SMS code is sent, or a passkey's options",
        description="For a request that needs a fresh proof (docs/sessions.md, "
        '"Reauthentication"): send its requestId with the SMS code as token, or with the '
        "passkey's answer as credential. An authenticator app's code needs no requestId.",
        request=ReauthStartInput,
        responses={200: TwoFactorResendOutput},
        tags=["profile"],
    )
    def post(self, request: AuthenticatedRequest) -> Response:
        data = ReauthStartInput.validated(request.data)
        asked = reauthentication_start(
            user=request.user, method=data.get("method"), device=request.auth.device
        )
        return Response(asked.as_json())
