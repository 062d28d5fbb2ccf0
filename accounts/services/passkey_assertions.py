"""Asking for a passkey and checking its answer (a WebAuthn assertion), with py_webauthn: what
a passwordless sign-in (accounts.services.passkeys) and a passkey as the second step of a
sign-in (accounts.services.sign_in_challenges) share (docs/sessions.md, "Passkeys")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from webauthn import (
    generate_authentication_options,
    options_to_json,
    verify_authentication_response,
)
from webauthn.helpers import base64url_to_bytes, parse_authentication_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    UserVerificationRequirement,
)

from accounts.errors import PasskeyInvalid
from accounts.models import AuditEvent, Passkey, User
from accounts.services.audit import audit

TRANSPORTS = {transport.value: transport for transport in AuthenticatorTransport}


@dataclass(frozen=True)
class AssertionAsked:
    """The random challenge an assertion must sign, and the request options (the WebAuthn JSON
    form, what ``PublicKeyCredential.parseRequestOptionsFromJSON`` takes) that carry it."""

    challenge: bytes
    options: dict[str, Any]


def assertion_ask(*, user: User | None) -> AssertionAsked:
    """Options asking for a passkey: of ``user`` (its passkeys listed, user verification
    preferred: the password was the first factor), or of anyone (None: a discoverable credential,
    user verification required, for the passkey is both factors)."""
    if user is None:
        options = generate_authentication_options(
            rp_id=settings.WEBAUTHN_RP_ID,
            user_verification=UserVerificationRequirement.REQUIRED,
            timeout=settings.WEBAUTHN_CHALLENGE_SECONDS * 1000,
        )
    else:
        options = generate_authentication_options(
            rp_id=settings.WEBAUTHN_RP_ID,
            allow_credentials=[
                PublicKeyCredentialDescriptor(
                    id=bytes(credential_id),
                    transports=[TRANSPORTS[name] for name in transports if name in TRANSPORTS],
                )
                for credential_id, transports in Passkey.objects.filter(user=user)
                .order_by("created_at")
                .values_list("credential_id", "transports")
            ],
            user_verification=UserVerificationRequirement.PREFERRED,
            timeout=settings.WEBAUTHN_CHALLENGE_SECONDS * 1000,
        )
    return AssertionAsked(options.challenge, json.loads(options_to_json(options)))


def passkey_of(credential: dict[str, Any]) -> Passkey:
    try:
        raw_id = base64url_to_bytes(str(credential["rawId"]))
    except (KeyError, ValueError, TypeError):
        raise PasskeyInvalid() from None
    passkey = Passkey.objects.select_related("user").filter(credential_id=raw_id).first()
    if passkey is None:
        raise PasskeyInvalid()
    return passkey


def assertion_verified(
    passkey: Passkey,
    credential: dict[str, Any],
    challenge: bytes,
    request: HttpRequest | None,
    *,
    user_verification: bool,
) -> None:
    """Verify the assertion against ``passkey``, then its sign count: one that does not go up
    (where the authenticator counts at all) is a cloned authenticator's, refused and audited.
    The count is compared here, after the signature verified, so a forged answer cannot make
    an audit event."""
    try:
        parsed = parse_authentication_credential_json(json.dumps(credential))
        verified = verify_authentication_response(
            credential=parsed,
            expected_challenge=challenge,
            expected_rp_id=settings.WEBAUTHN_RP_ID,
            expected_origin=settings.WEBAUTHN_ORIGINS,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=0,  # compared below, once the signature verified
            require_user_verification=user_verification,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError):
        raise PasskeyInvalid() from None
    counted = verified.new_sign_count > 0 or passkey.sign_count > 0
    if counted and verified.new_sign_count <= passkey.sign_count:
        audit(
            AuditEvent.Kind.PASSKEY_CLONED,
            user=passkey.user,
            request=request,
            passkey=str(passkey.pk),
            signCount=verified.new_sign_count,
            known=passkey.sign_count,
        )
        raise PasskeyInvalid("The passkey's sign count went backwards: it may be a copy.")
    Passkey.objects.filter(pk=passkey.pk).update(
        sign_count=verified.new_sign_count,
        backed_up=verified.credential_backed_up,
        last_used_at=timezone.now(),
    )
