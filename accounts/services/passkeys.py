"""Passkeys (WebAuthn), with Duo Labs' py_webauthn (docs/sessions.md, "Passkeys"): registering
one (a signed-in person), and signing in with one alone (passwordless: a discoverable credential
and user verification, so the passkey is both factors).

Each ceremony has a challenge of its own (PasskeyChallenge, its id the ``requestId``), used once:
the conditional UPDATE that spends it is the check, so two answers to one challenge cannot both
pass. Every answer that fails verification is PasskeyInvalid and counts toward nothing (nothing
of a passkey can be guessed); a sign count that goes backwards (a cloned authenticator) is
refused and audited.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone
from webauthn import (
    generate_registration_options,
    options_to_json,
    verify_registration_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from accounts import liveness
from accounts.devices import Device
from accounts.errors import PasskeyInvalid
from accounts.models import AuditEvent, Passkey, PasskeyChallenge, User
from accounts.ratelimits import auth_limits_consume
from accounts.services.audit import audit
from accounts.services.factors import factor_change_tell, factors_settle, user_locked
from accounts.services.passkey_assertions import assertion_ask, assertion_verified, passkey_of
from accounts.services.reauthentication import Reauthentication, reauthenticated
from accounts.services.sign_in import SignIn, sign_in_continue

MAX_NAME = 100


@dataclass(frozen=True)
class Ceremony:
    """A ceremony's ``requestId`` and its options, in the WebAuthn JSON form."""

    request_id: str
    options: dict[str, Any]


def _challenge_open(
    purpose: PasskeyChallenge.Purpose, challenge: bytes, user: User | None
) -> PasskeyChallenge:
    expires = timezone.now() + timedelta(seconds=settings.WEBAUTHN_CHALLENGE_SECONDS)
    return PasskeyChallenge.objects.create(
        purpose=purpose, user=user, challenge=challenge, expires_at=expires
    )


def _challenge_spend(
    request_id: str, purpose: PasskeyChallenge.Purpose, user: User | None
) -> bytes:
    """The challenge of ``request_id``, spent now: PasskeyInvalid if it is unknown, of another
    flow or person, used or expired."""
    try:
        key = uuid.UUID(request_id)
    except ValueError:
        raise PasskeyInvalid() from None
    now = timezone.now()
    spent = PasskeyChallenge.objects.filter(
        pk=key, purpose=purpose, user=user, used_at__isnull=True, expires_at__gt=now
    )
    challenge = spent.values_list("challenge", flat=True).first()
    if challenge is None or not spent.update(used_at=now):
        raise PasskeyInvalid()
    return bytes(challenge)


def _user_handle(user: User) -> bytes:
    """The WebAuthn user.id: the same for every passkey of a person (an authenticator keeps one
    credential per person and site), and nothing personal."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"passkey-user:{user.pk}").bytes


def passkey_registration_start(*, user: User) -> Ceremony:
    """Options to create a discoverable credential for ``user``, excluding the passkeys they
    have (an authenticator that holds one says so instead of making another)."""
    options = generate_registration_options(
        rp_id=settings.WEBAUTHN_RP_ID,
        rp_name=settings.PLATFORM_NAME,
        user_id=_user_handle(user),
        user_name=user.email or user.username,
        user_display_name=user.get_full_name() or user.email or user.username,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.PREFERRED,
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(id=bytes(credential_id))
            for credential_id in Passkey.objects.filter(user=user).values_list(
                "credential_id", flat=True
            )
        ],
        timeout=settings.WEBAUTHN_CHALLENGE_SECONDS * 1000,
    )
    challenge = _challenge_open(PasskeyChallenge.Purpose.REGISTRATION, options.challenge, user)
    return Ceremony(request_id=str(challenge.pk), options=json.loads(options_to_json(options)))


def passkey_register(
    *,
    user: User,
    request_id: str,
    credential: dict[str, Any],
    name: str | None,
    request: HttpRequest | None,
) -> Passkey:
    """Verify the attestation ``credential`` (RegistrationResponseJSON) against the challenge
    of ``request_id`` and keep the passkey; PasskeyInvalid if it does not verify."""
    challenge = _challenge_spend(request_id, PasskeyChallenge.Purpose.REGISTRATION, user)
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=settings.WEBAUTHN_RP_ID,
            expected_origin=settings.WEBAUTHN_ORIGINS,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError):
        raise PasskeyInvalid() from None
    transports = [
        transport
        for transport in credential.get("response", {}).get("transports", []) or []
        if transport in {t.value for t in AuthenticatorTransport}
    ]
    try:
        with transaction.atomic(), liveness.changing([user.pk]):
            locked = user_locked(user)
            passkey = Passkey.objects.create(
                user=user,
                credential_id=verified.credential_id,
                public_key=verified.credential_public_key,
                sign_count=verified.sign_count,
                transports=transports,
                aaguid=verified.aaguid,
                backup_eligible=verified.credential_device_type == "multi_device",
                backed_up=verified.credential_backed_up,
                name=(name or "").strip()[:MAX_NAME] or _default_name(user),
            )
            was_on = factors_settle(locked)
            audit(
                AuditEvent.Kind.PASSKEY_ADDED, user=user, request=request, passkey=str(passkey.pk)
            )
            factor_change_tell(
                user=locked, was_on=was_on, method="PASSKEY", added=True, request=request
            )
    except IntegrityError:  # the credential id is unique: registered already
        raise PasskeyInvalid("This passkey is registered already.") from None
    return passkey


def _default_name(user: User) -> str:
    return f"Passkey {Passkey.objects.filter(user=user).count() + 1}"


def passkeys_of(*, user: User) -> list[Passkey]:
    return list(Passkey.objects.filter(user=user).order_by("created_at"))


def passkey_remove(
    *,
    user: User,
    passkey_id: uuid.UUID,
    reauth: Reauthentication,
    request: HttpRequest | None,
) -> bool:
    """Remove one of ``user``'s passkeys, with a fresh proof of the owner; whether there was
    one. The last one of a person without a code factor turns two-factor sign-in off."""
    reauthenticated(user=user, reauth=reauth, request=request)
    return _passkey_removed(user=user, passkey_id=passkey_id, request=request)


@transaction.atomic
def _passkey_removed(*, user: User, passkey_id: uuid.UUID, request: HttpRequest | None) -> bool:
    locked = user_locked(user)
    deleted, _ = Passkey.objects.filter(user=locked, pk=passkey_id).delete()
    if not deleted:
        return False
    with liveness.changing([user.pk]):
        factors_settle(locked)
        audit(AuditEvent.Kind.PASSKEY_REMOVED, user=user, request=request, passkey=str(passkey_id))
        if not Passkey.objects.filter(user=locked).exists():  # the factor is gone
            factor_change_tell(
                user=locked, was_on=True, method="PASSKEY", added=False, request=request
            )
    return True


def passkey_sign_in_start(*, request: HttpRequest | None) -> Ceremony:
    """Options for a passwordless sign-in: no account named (a discoverable credential), user
    verification required. Counts against the sign-in's rate limits of the client's IP."""
    auth_limits_consume(request, kind=None, identifier=None)
    asked = assertion_ask(user=None)
    challenge = _challenge_open(PasskeyChallenge.Purpose.SIGN_IN, asked.challenge, None)
    return Ceremony(request_id=str(challenge.pk), options=asked.options)


def passkey_sign_in(
    *, request_id: str, credential: dict[str, Any], device: Device, request: HttpRequest | None
) -> SignIn:
    """A passwordless sign-in: the assertion ``credential`` (AuthenticationResponseJSON) of a
    registered passkey, with user verification, then the steps every sign-in ends with
    (sign_in_continue: a disabled account, an unconfirmed e-mail...). A password lock does not
    block it. PasskeyInvalid for anything that does not verify."""
    challenge = _challenge_spend(request_id, PasskeyChallenge.Purpose.SIGN_IN, None)
    passkey = passkey_of(credential)
    auth_limits_consume(request, kind="email", identifier=passkey.user.email)
    assertion_verified(passkey, credential, challenge, request, user_verification=True)
    return sign_in_continue(user=passkey.user, device=device, request=request, two_factor_done=True)
