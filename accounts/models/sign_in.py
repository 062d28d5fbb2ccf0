from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from accounts.models.users import User


class Session(models.Model):
    """The server-side session behind a token pair: every access token is checked against it.

    Rotation keeps the current refresh token's ``jti`` here; a refresh presents it and swaps it in
    one conditional UPDATE, so exactly one of two parallel refreshes wins.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="sessions")
    device_key = models.CharField(
        max_length=160, help_text="d:<X-Device-ID> or f:<hash of User-Agent and client IP>."
    )
    device_id = models.CharField(max_length=128, blank=True, help_text="X-Device-ID, if sent.")
    user_agent = models.CharField(max_length=512, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(help_text="Absolute end: refreshing never extends it.")
    refresh_jti = models.UUIDField()
    previous_refresh_jti = models.UUIDField(null=True, blank=True)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"], name="accounts_session_user_idx")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.device_id or self.device_key[:12]}"


class SignInGate(models.Model):
    """Consecutive wrong passwords per account (or per unknown identifier) and the lock they set.

    A password is checked only after an attempt is reserved here with one conditional UPDATE,
    so parallel attempts cannot get more than the allowed number of checks through.
    """

    key = models.CharField(max_length=300, primary_key=True)
    failures = models.PositiveSmallIntegerField(default=0)
    locked_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.key


class Challenge(models.Model):
    """A confirmation code sent to a user: one mechanism for the four flows (docs/sessions.md,
    "Confirmation codes").

    The code itself is never stored, only its keyed hash. ``attempts_left`` is spent by one
    conditional UPDATE before the comparison, so parallel guesses cannot exceed the budget. A
    challenge without a user (a password reset for an unknown e-mail, a registration of a taken
    one) behaves exactly like a real one whose code is never right.
    """

    class Purpose(models.TextChoices):
        REGISTRATION = "REGISTRATION", "E-mail confirmation"
        SIGN_IN = "SIGN_IN", "Two-factor sign-in"
        ENABLE_TWO_FACTOR = "ENABLE_TWO_FACTOR", "Enabling two-factor sign-in"
        PASSWORD_RESET = "PASSWORD_RESET", "Password reset"
        ENABLE_TOTP = "ENABLE_TOTP", "Enabling an authenticator app"
        EMAIL_CHANGE = "EMAIL_CHANGE", "Changing the e-mail address"
        REAUTHENTICATION = "REAUTHENTICATION", "Confirming it is the owner"

    class Method(models.TextChoices):
        EMAIL = "EMAIL", "E-mail"
        SMS = "SMS", "SMS"
        TOTP = "TOTP", "Authenticator app"
        PASSKEY = "PASSKEY", "Passkey"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    purpose = models.CharField(max_length=24, choices=Purpose.choices)
    method = models.CharField(max_length=8, choices=Method.choices)
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, null=True, blank=True, related_name="challenges"
    )
    address = models.CharField(
        max_length=254, help_text="Where the code goes: an e-mail address or an E.164 phone."
    )
    code_hash = models.CharField(max_length=64)
    attempts_left = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(default=timezone.now, help_text="The last (re)send.")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    device_key = models.CharField(
        max_length=160, blank=True, help_text="The device a sign-in challenge was started from."
    )
    authenticator = models.ForeignKey(
        "Authenticator",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="A TOTP challenge's authenticator app, whose code confirms it.",
    )
    passkey_challenge = models.BinaryField(
        null=True,
        blank=True,
        help_text="A PASSKEY challenge's WebAuthn challenge, which a passkey's assertion signs.",
    )

    class Meta:
        indexes = [models.Index(fields=["user", "purpose", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.get_purpose_display()} {self.pk}"


class Authenticator(models.Model):
    """An authenticator app (TOTP, RFC 6238) of a cabinet user: pending until a first code from
    the app confirms it, then the account's second factor (docs/sessions.md, "Second factors").

    The secret is stored encrypted (accounts.factor_secrets), so a dump of the database alone
    does not yield it. ``last_used_step`` is the newest 30-second step whose code passed: a code
    passes only for a later step, so no code passes twice.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="authenticators")
    secret = models.TextField(help_text="The base32 secret, encrypted with AES-256-GCM.")
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    last_used_step = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(confirmed_at__isnull=False),
                name="accounts_authenticator_one_confirmed",
            )
        ]

    def __str__(self) -> str:
        return f"Authenticator app of {self.user}"


class RecoveryCode(models.Model):
    """One of a user's single-use recovery codes, stored as a keyed hash only."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="recovery_codes")
    code_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "code_hash"], name="accounts_recovery_code_idx")]

    def __str__(self) -> str:
        return f"Recovery code of {self.user}"
