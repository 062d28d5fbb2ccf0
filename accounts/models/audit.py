from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.models.users import User


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
        PASSWORD_CHANGE_FAILED = (
            "PASSWORD_CHANGE_FAILED",
            _("Password change refused: wrong current password"),
        )
        REAUTHENTICATION_FAILED = (
            "REAUTHENTICATION_FAILED",
            _("Proof of the owner refused: wrong password"),
        )
        PASSWORD_RESET = "PASSWORD_RESET", _("Password reset")
        PASSWORD_CHANGE_REQUIRED = "PASSWORD_CHANGE_REQUIRED", _("Password change required")
        TWO_FACTOR_ENABLED = "TWO_FACTOR_ENABLED", _("Two-factor sign-in enabled")
        TWO_FACTOR_DISABLED = "TWO_FACTOR_DISABLED", _("Two-factor sign-in disabled")
        TWO_FACTOR_CHANGED = "TWO_FACTOR_CHANGED", _("Second factor replaced")
        FACTOR_ADDED = "FACTOR_ADDED", _("Second factor added")
        FACTOR_REMOVED = "FACTOR_REMOVED", _("Second factor removed")
        PHONE_CHANGED = "PHONE_CHANGED", _("Phone changed")
        REFRESH_TOKEN_REUSED = "REFRESH_TOKEN_REUSED", _("Refresh token reused")
        SESSION_REVOKED = "SESSION_REVOKED", _("Session revoked")
        ACCOUNT_DISABLED = "ACCOUNT_DISABLED", _("Account disabled")
        ACCOUNT_ENABLED = "ACCOUNT_ENABLED", _("Account enabled")
        ACCOUNT_EXPIRY_SET = "ACCOUNT_EXPIRY_SET", _("Account expiry set")
        CREDENTIALS_EXPIRY_SET = "CREDENTIALS_EXPIRY_SET", _("Credentials expiry set")
        QUEUE_PURGED = "QUEUE_PURGED", _("Queue purged")
        DEAD_LETTERS_DISCARDED = "DEAD_LETTERS_DISCARDED", _("Dead letters discarded")
        RECOVERY_CODES_GENERATED = "RECOVERY_CODES_GENERATED", _("New recovery codes")
        RECOVERY_CODE_USED = "RECOVERY_CODE_USED", _("Recovery code used")
        TWO_FACTOR_RESET = "TWO_FACTOR_RESET", _("Two-factor sign-in reset by an administrator")
        ADAPTER_PASSWORD_ROTATED = "ADAPTER_PASSWORD_ROTATED", _("Adapter password rotated")
        PASSKEY_ADDED = "PASSKEY_ADDED", _("Passkey added")
        PASSKEY_REMOVED = "PASSKEY_REMOVED", _("Passkey removed")
        PASSKEY_CLONED = "PASSKEY_CLONED", _("Passkey refused: its sign count went backwards")
        EMAIL_CHANGED = "EMAIL_CHANGED", _("E-mail address changed")
        ACCOUNT_DELETED = "ACCOUNT_DELETED", _("Account deleted")

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
