from __future__ import annotations

import uuid
from typing import Any, ClassVar

import phonenumbers
from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as DjangoUserManager
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts import identifiers

EMAIL_TAKEN_MESSAGE = "A user with this e-mail address already exists."


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


class UserManager(DjangoUserManager["User"]):
    # createsuperuser and scripts come through these: the address's canonical form with it.
    def create_user(
        self, username: str, email: str | None = None, password: str | None = None, **fields: Any
    ) -> User:
        fields.setdefault("email_canonical", identifiers.email_canonical(email or ""))
        return super().create_user(username, email, password, **fields)

    def create_superuser(
        self, username: str, email: str | None = None, password: str | None = None, **fields: Any
    ) -> User:
        fields.setdefault("email_canonical", identifiers.email_canonical(email or ""))
        return super().create_superuser(username, email, password, **fields)


def languages() -> list[tuple[str, str]]:
    return list(settings.LANGUAGES)


class TwoFactorMethod(models.TextChoices):
    SMS = "SMS", "SMS code"
    TOTP = "TOTP", "Authenticator app"


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
    # Empty for adapters, which have no address. Stored as typed, but only a plain address
    # (accounts.identifiers): the same in NFKC, and no character that folds into others.
    email = models.EmailField(
        "e-mail address", blank=True, validators=[identifiers.validate_plain_email]
    )
    # The address as compared: unique, and set wherever the address is (constraints below).
    # Whoever writes ``email`` writes this too: User.clean() for forms, the manager's
    # create_user() and create_superuser(), and the services.
    email_canonical = models.CharField(
        max_length=512,
        blank=True,
        default="",
        editable=False,
        help_text="The e-mail address in canonical form (NFKC, case-folded): what is compared.",
    )
    phone = models.CharField(
        max_length=16,
        blank=True,
        validators=[validate_e164],
        help_text="E.164, e.g. +4915112345678.",
    )
    email_confirmed = models.BooleanField(default=False)
    two_factor_enabled = models.BooleanField(default=False)
    # Which second factor two_factor_enabled turns on; read only while it is on.
    two_factor_method = models.CharField(
        max_length=8,
        choices=TwoFactorMethod.choices,
        default=TwoFactorMethod.SMS,
        db_default=TwoFactorMethod.SMS,
        help_text="The second factor while two-factor sign-in is on: an SMS code or an "
        "authenticator app.",
    )
    language = models.CharField(
        max_length=8,
        blank=True,
        default="",
        db_default="",
        choices=languages,
        help_text="The language of the security notices e-mailed to this person.",
    )
    reset_password_required = models.BooleanField(
        default=False,
        help_text="Tokens carry USER_PASSWORD_RESET_REQUIRED until the user changes the password.",
    )
    account_expires_at = models.DateTimeField(null=True, blank=True)
    credentials_expire_at = models.DateTimeField(null=True, blank=True)
    password_changed_at = models.DateTimeField(null=True, blank=True)

    REQUIRED_FIELDS = ["email"]

    objects: ClassVar[UserManager] = UserManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["email_canonical"],
                condition=~models.Q(email_canonical=""),
                name="accounts_user_email_canonical_unique",
                violation_error_message=EMAIL_TAKEN_MESSAGE,
            ),
            models.CheckConstraint(
                condition=models.Q(email="", email_canonical="")
                | (~models.Q(email="") & ~models.Q(email_canonical="")),
                name="accounts_user_email_canonical_set",
                violation_error_message="An e-mail address needs its canonical form.",
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
        super().clean()  # NFKC for the login; the domain of the address lower-cased
        self.email_canonical = identifiers.email_canonical(self.email)
        others = User.objects.exclude(pk=self.pk)
        if self.email_canonical and others.filter(email_canonical=self.email_canonical).exists():
            raise ValidationError({"email": EMAIL_TAKEN_MESSAGE})
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

    class Method(models.TextChoices):
        EMAIL = "EMAIL", "E-mail"
        SMS = "SMS", "SMS"
        TOTP = "TOTP", "Authenticator app"

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


class OutboxMessage(models.Model):
    """An e-mail or SMS to send, written in the transaction of the request that caused it.

    A Celery task sends it after that transaction commits; a periodic sweep sends whatever the
    broker missed. Bodies of messages that carry codes are erased once sent (unless DEBUG, where
    /dev/outbox shows them).
    """

    class Channel(models.TextChoices):
        EMAIL = "EMAIL", "E-mail"
        SMS = "SMS", "SMS"

    class Status(models.TextChoices):
        PENDING = "PENDING", "Pending"
        SENT = "SENT", "Sent"
        SKIPPED = "SKIPPED", "Skipped (no such account)"
        FAILED = "FAILED", "Failed"

    channel = models.CharField(max_length=8, choices=Channel.choices)
    to = models.CharField(max_length=254)
    user = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    template = models.CharField(max_length=64)
    subject = models.CharField(max_length=255, blank=True)
    text = models.TextField(blank=True)
    html = models.TextField(blank=True)
    # A password reset for an unknown address is written like any other, then skipped by the
    # worker: the request does the same work either way.
    requires_account = models.BooleanField(default=False)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=models.Q(status="PENDING"),
                name="accounts_outbox_pending_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} to {self.to}: {self.template}"


class AuditEvent(models.Model):
    """A security event (docs/sessions.md, "The audit log"), readable in the admin."""

    class Kind(models.TextChoices):
        SIGN_IN = "SIGN_IN", _("Signed in")
        SIGN_IN_FAILED = "SIGN_IN_FAILED", _("Sign-in failed")
        LOCKED = "LOCKED", _("Locked by wrong passwords")
        UNLOCKED = "UNLOCKED", _("Unlocked")
        REGISTERED = "REGISTERED", _("Registered")
        EMAIL_CONFIRMED = "EMAIL_CONFIRMED", _("E-mail confirmed")
        PASSWORD_CHANGED = "PASSWORD_CHANGED", _("Password changed")
        PASSWORD_RESET = "PASSWORD_RESET", _("Password reset")
        PASSWORD_CHANGE_REQUIRED = "PASSWORD_CHANGE_REQUIRED", _("Password change required")
        TWO_FACTOR_ENABLED = "TWO_FACTOR_ENABLED", _("Two-factor sign-in enabled")
        TWO_FACTOR_DISABLED = "TWO_FACTOR_DISABLED", _("Two-factor sign-in disabled")
        PHONE_CHANGED = "PHONE_CHANGED", _("Phone changed")
        REFRESH_TOKEN_REUSED = "REFRESH_TOKEN_REUSED", _("Refresh token reused")
        SESSION_REVOKED = "SESSION_REVOKED", _("Session revoked")
        ACCOUNT_DISABLED = "ACCOUNT_DISABLED", _("Account disabled")
        ACCOUNT_ENABLED = "ACCOUNT_ENABLED", _("Account enabled")
        ACCOUNT_EXPIRY_SET = "ACCOUNT_EXPIRY_SET", _("Account expiry set")
        CREDENTIALS_EXPIRY_SET = "CREDENTIALS_EXPIRY_SET", _("Credentials expiry set")
        QUEUE_PURGED = "QUEUE_PURGED", _("Queue purged")
        RECOVERY_CODES_GENERATED = "RECOVERY_CODES_GENERATED", _("New recovery codes")
        RECOVERY_CODE_USED = "RECOVERY_CODE_USED", _("Recovery code used")
        TWO_FACTOR_RESET = "TWO_FACTOR_RESET", _("Two-factor sign-in reset by an administrator")
        ADAPTER_PASSWORD_ROTATED = "ADAPTER_PASSWORD_ROTATED", _("Adapter password rotated")

    kind = models.CharField(max_length=32, choices=Kind.choices)
    user = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    actor = models.ForeignKey(
        User,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The administrator who acted, when it was not the user.",
    )
    identifier = models.CharField(
        max_length=254, blank=True, help_text="What was typed, for failures of unknown accounts."
    )
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=512, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.created_at:%Y-%m-%d %H:%M:%S})"
