from __future__ import annotations

from typing import Any, ClassVar

import phonenumbers
from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as DjangoUserManager
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

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
    """A second factor: what a sign-in may ask for after the password."""

    SMS = "SMS", "SMS code"
    TOTP = "TOTP", "Authenticator app"
    PASSKEY = "PASSKEY", "Passkey"


class CodeFactor(models.TextChoices):
    """The second factors that are a typed code: one of them at a time."""

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
    # The second factors (docs/sessions.md, "Second factors"): a code factor (code_factor) and
    # passkeys (accounts.Passkey rows). Whoever changes one settles the two fields after it,
    # from what the person holds (accounts.services.factors.factors_settle).
    code_factor = models.CharField(
        max_length=8,
        choices=CodeFactor.choices,
        blank=True,
        default="",
        db_default="",
        help_text="The code factor that is on: an SMS code or an authenticator app; empty: none.",
    )
    two_factor_enabled = models.BooleanField(
        default=False, help_text="Whether the person holds a second factor: a code or a passkey."
    )
    two_factor_method = models.CharField(
        max_length=8,
        choices=TwoFactorMethod.choices,
        default=TwoFactorMethod.SMS,
        db_default=TwoFactorMethod.SMS,
        help_text="The second factor a sign-in asks for first, one the person holds; read only "
        "while two-factor sign-in is on.",
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
    display_name = models.CharField(
        max_length=100,
        blank=True,
        default="",
        db_default="",
        help_text="An adapter's name for people, shown beside its login; its owner sets it.",
    )
    # Set on an adapter that its owner's disabling disabled (accounts.services.accounts): enabling
    # the owner enables those again, and only those; one its owner disabled stays disabled.
    disabled_with_owner = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Disabled because its owner was: enabling the owner enables it again.",
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
                condition=models.Q(code_factor="") | models.Q(two_factor_enabled=True),
                name="accounts_user_code_factor_is_two_factor",
                violation_error_message="A code factor turns two-factor sign-in on.",
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
