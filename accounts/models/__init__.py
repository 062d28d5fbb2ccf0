"""The accounts' models, one module per topic; every model is importable from here (Django and
the migrations look them up as accounts.models.<name>)."""

from accounts.models.audit import AuditEvent
from accounts.models.outbox import OutboxMessage
from accounts.models.passkeys import Passkey, PasskeyChallenge
from accounts.models.sign_in import Authenticator, Challenge, RecoveryCode, Session, SignInGate
from accounts.models.users import (
    EMAIL_TAKEN_MESSAGE,
    CodeFactor,
    TwoFactorMethod,
    User,
    UserManager,
    languages,
    validate_e164,
)

__all__ = [
    "EMAIL_TAKEN_MESSAGE",
    "AuditEvent",
    "Authenticator",
    "Challenge",
    "CodeFactor",
    "OutboxMessage",
    "Passkey",
    "PasskeyChallenge",
    "RecoveryCode",
    "Session",
    "SignInGate",
    "TwoFactorMethod",
    "User",
    "UserManager",
    "languages",
    "validate_e164",
]
