from __future__ import annotations

import uuid

import phonenumbers
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone


def validate_e164(value: str) -> None:
    """A phone number stored as E.164 (+4915112345678): valid and already in that form."""
    try:
        number = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        number = None
    if (
        number is None
        or not phonenumbers.is_valid_number(number)
        or phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164) != value
    ):
        raise ValidationError(
            "Enter a phone number in international format, such as +4915112345678.",
            code="invalid_phone",
        )


class User(AbstractUser):
    """Every principal: a cabinet user (a person) or an adapter (a client system) they own."""

    class Kind(models.TextChoices):
        USER = "USER", "Cabinet user"
        ADAPTER = "ADAPTER", "Adapter"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.USER)
    owner = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="adapters",
        help_text="The cabinet user who owns this adapter; empty for cabinet users.",
    )
    # Unique case-insensitively (constraint below); empty for adapters, which have no address.
    email = models.EmailField("e-mail address", blank=True)
    phone = models.CharField(
        max_length=16,
        blank=True,
        validators=[validate_e164],
        help_text="E.164, e.g. +4915112345678.",
    )
    email_confirmed = models.BooleanField(default=False)
    two_factor_enabled = models.BooleanField(default=False)
    reset_password_required = models.BooleanField(
        default=False,
        help_text="Tokens carry USER_PASSWORD_RESET_REQUIRED until the user changes the password.",
    )
    account_expires_at = models.DateTimeField(null=True, blank=True)
    credentials_expire_at = models.DateTimeField(null=True, blank=True)
    password_changed_at = models.DateTimeField(null=True, blank=True)

    REQUIRED_FIELDS = ["email"]

    class Meta:
        constraints = [
            models.UniqueConstraint(
                Lower("email"),
                condition=~models.Q(email=""),
                name="accounts_user_email_unique_ci",
                violation_error_message="A user with this e-mail address already exists.",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(kind="USER", owner__isnull=True)
                    | models.Q(kind="ADAPTER", owner__isnull=False)
                ),
                name="accounts_user_adapter_has_owner",
                violation_error_message="An adapter has an owner; a cabinet user has none.",
            ),
        ]

    def __str__(self) -> str:
        return self.username

    def set_password(self, raw_password: str | None) -> None:
        # Every path that sets a password (services, admin, createsuperuser) comes through here,
        # so the credentials' age is always known.
        super().set_password(raw_password)
        self.password_changed_at = timezone.now()

    def clean(self) -> None:
        super().clean()
        if self.kind == self.Kind.ADAPTER and self.owner_id is None:
            raise ValidationError({"owner": "An adapter needs an owner."})
        if self.kind == self.Kind.USER and self.owner_id is not None:
            raise ValidationError({"owner": "A cabinet user has no owner."})

    @property
    def is_adapter(self) -> bool:
        return self.kind == self.Kind.ADAPTER


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

    @property
    def is_alive(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()


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
