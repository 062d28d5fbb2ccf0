"""A software WebAuthn authenticator for the API tests: it answers creation and request options
as a browser with a platform authenticator would, in the WebAuthn JSON form (credential.toJSON()),
with an ES256 key, "none" attestation and a sign count of its own. The browser tests use
Chromium's virtual authenticator instead."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import struct
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, AT = 0x01, 0x04, 0x40  # authenticator data flags: user present, verified, attested data


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftAuthenticator:
    """One credential: made by ``create``, used by ``get`` (each use counts one up)."""

    def __init__(self, *, origin: str = "http://localhost:8000", rp_id: str = "localhost"):
        self.origin, self.rp_id = origin, rp_id
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(16)
        self.sign_count = 0
        self.user_handle = b""

    def clone(self) -> SoftAuthenticator:
        """A copy of the key and its count, as an attacker who copied the authenticator has."""
        twin = copy.copy(self)
        return twin

    def _client_data(self, kind: str, options: dict[str, Any]) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": options["challenge"], "origin": self.origin}
        ).encode()

    def _auth_data(self, flags: int, extra: bytes = b"") -> bytes:
        rp_hash = hashlib.sha256(self.rp_id.encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.sign_count) + extra

    def create(self, options: dict[str, Any], *, verified: bool = True) -> dict[str, Any]:
        """The RegistrationResponseJSON for creation ``options``."""
        self.user_handle = unb64url(options["user"]["id"])
        numbers = self.key.public_key().public_numbers()
        cose_key = cbor2.dumps(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )
        attested = (
            bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cose_key
        )
        auth_data = self._auth_data(UP | AT | (UV if verified else 0), attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(self._client_data("webauthn.create", options)),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def get(self, options: dict[str, Any], *, verified: bool = True) -> dict[str, Any]:
        """The AuthenticationResponseJSON for request ``options``; the count goes up by one."""
        self.sign_count += 1
        auth_data = self._auth_data(UP | (UV if verified else 0))
        client_data = self._client_data("webauthn.get", options)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": b64url(self.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }
