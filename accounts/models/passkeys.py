"""Passkeys (WebAuthn credentials) of cabinet users, and the challenges of their ceremonies
(docs/sessions.md, "Passkeys")."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models.functions import Now

from accounts.models.users import User


class Passkey(models.Model):
    """A public-key credential a person registered: what verifies its assertions, and the sign
    count that tells a cloned authenticator (one whose count goes backwards) from the original."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="passkeys")
    credential_id = models.BinaryField(unique=True)
    public_key = models.BinaryField()  # COSE_Key, as the attestation gave it
    sign_count = models.BigIntegerField(default=0)
    transports = models.JSONField(default=list)
    aaguid = models.CharField(max_length=36, blank=True, default="")
    # Whether the authenticator may back the credential up (a synced passkey), and whether it is
    # backed up now: reported by the authenticator at registration and at each use.
    backup_eligible = models.BooleanField(default=False)
    backed_up = models.BooleanField(default=False)
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id})"


class PasskeyChallenge(models.Model):
    """The random challenge of one ceremony (``requestId``): used once, within its minutes, by
    the flow it was made for and, but for a passwordless sign-in, by the person it was made
    for."""

    class Purpose(models.TextChoices):
        REGISTRATION = "REGISTRATION", "Registering a passkey"
        SIGN_IN = "SIGN_IN", "Signing in with a passkey"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    challenge = models.BinaryField()
    created_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="accounts_passkey_chal_age_idx")]

    def __str__(self) -> str:
        return f"{self.get_purpose_display()} {self.pk}"
