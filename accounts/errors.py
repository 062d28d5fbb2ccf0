"""The accounts domain's errors, each with its stable code (docs/errors.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from platform_site.errors import ApplicationError, RateLimited
from platform_site.timestamps import rfc3339


class BadCredentials(ApplicationError):
    """The API's answer is the same every time. The cabinet also reads what the sign-in gate
    counted, which is the same for an unknown identifier as for an account: the wrong passwords
    still allowed before the lock, and the lock this failure set (None when it set none)."""

    status = 401
    code = "BAD_CREDENTIALS"
    default_detail = "The login or password is wrong."

    def __init__(
        self, *, attempts_remaining: int | None = None, locked_until: datetime | None = None
    ) -> None:
        super().__init__()
        self.attempts_remaining = attempts_remaining
        self.locked_until = locked_until


class AccountLocked(ApplicationError):
    status = 423
    code = "ACCOUNT_LOCKED"
    default_detail = "Too many wrong passwords: the account is locked."

    def __init__(self, *, locked_until: datetime, device_token: bool = False) -> None:
        until = rfc3339(locked_until)
        detail = (
            f"Too many wrong passwords with this device token: it is locked until {until}; "
            "the account itself is not."
            if device_token
            else f"Too many wrong passwords: the account is locked until {until}."
        )
        super().__init__(detail, extra={"lockedUntil": until})
        self.locked_until = locked_until


class SignInBusy(RateLimited):
    default_detail = "Other sign-ins to this account are being checked; retry in a moment."

    def __init__(self) -> None:
        super().__init__(retry_after_seconds=1)


class AccountDisabled(ApplicationError):
    status = 403
    code = "ACCOUNT_DISABLED"
    default_detail = "The account is disabled."


class StaffOnly(ApplicationError):
    """The administration's door: the password was right, but the account is not staff."""

    status = 403
    code = "STAFF_ONLY"
    default_detail = "Only staff accounts sign in to the administration."


class AccountExpired(ApplicationError):
    status = 403
    code = "ACCOUNT_EXPIRED"
    default_detail = "The account has expired."


class CredentialsExpired(ApplicationError):
    status = 401
    code = "ACTION_RESET_PASSWORD"
    default_detail = "The password has expired: reset it to sign in again."


class TokenExpired(ApplicationError):
    status = 401
    code = "TOKEN_EXPIRED"
    default_detail = (
        "The token has expired: refresh the pair, or sign in again if refreshing fails."
    )


class TokenRevoked(ApplicationError):
    status = 401
    code = "TOKEN_REVOKED"
    default_detail = "The session of this token has ended: sign in again."


class DeviceMismatch(ApplicationError):
    status = 401
    code = "DEVICE_MISMATCH"
    default_detail = "The token belongs to another device: send the X-Device-ID it was issued for."


class RefreshTokenReused(ApplicationError):
    status = 401
    code = "REFRESH_TOKEN_REUSED"
    default_detail = "This refresh token was already used: the session is revoked, sign in again."


class InvalidDeviceId(ApplicationError):
    code = "VALIDATION_FAILED"
    default_detail = "X-Device-ID must be 1 to 128 printable ASCII characters."

    def __init__(self) -> None:
        super().__init__(extra={"errors": {"X-Device-ID": [self.default_detail]}})


class LoginTaken(ApplicationError):
    status = 409
    code = "LOGIN_TAKEN"
    default_detail = "Another account already uses this login."


class AdapterNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "You have no adapter with this id."


class EmailTaken(ApplicationError):
    status = 409
    code = "EMAIL_TAKEN"
    default_detail = (
        "An account with this e-mail address already exists: sign in or reset the password."
    )


class EmailNotConfirmed(ApplicationError):
    status = 409
    code = "EMAIL_NOT_CONFIRMED"
    default_detail = (
        "Confirm the e-mail address first: a code was sent; "
        "continue with /api/auth/register/verify-email/confirm."
    )

    def __init__(self, *, request_id: str, retry_after_seconds: int) -> None:
        super().__init__(extra={"requestId": request_id, "retryAfterSeconds": retry_after_seconds})


class TwoFactorRequired(ApplicationError):
    """The password was right; the second factor comes next (``confirmMethod``): an SMS code
    was sent (and may be resent after ``retryAfterSeconds``), the code comes from the
    authenticator app (TOTP), or a passkey answers ``options`` (PASSKEY); nothing is sent for
    the last two, so their answer has no ``retryAfterSeconds``. ``otherMethods`` are the
    person's other factors, which /api/auth/login/two-factor/resend switches to."""

    status = 428
    code = "TWO_FACTOR_REQUIRED"
    default_detail = "Enter the code sent by SMS: continue with /api/auth/login/two-factor/confirm."
    DETAILS = {
        "TOTP": "Enter the code your authenticator app shows: continue with "
        "/api/auth/login/two-factor/confirm.",
        "PASSKEY": "Confirm with your passkey: send its credential to "
        "/api/auth/login/two-factor/confirm.",
    }

    def __init__(self, asked: dict[str, Any]) -> None:
        extra = {name: value for name, value in asked.items() if value is not None}
        self.confirm_method = str(extra["confirmMethod"])
        super().__init__(self.DETAILS.get(self.confirm_method), extra=extra)


class CodeInvalid(ApplicationError):
    code = "CODE_INVALID"
    default_detail = "The code is wrong."

    def __init__(self, *, attempts_remaining: int, detail: str | None = None) -> None:
        super().__init__(detail, extra={"attemptsRemaining": attempts_remaining})


class CodeExpired(CodeInvalid):
    code = "CODE_EXPIRED"
    default_detail = "The code has expired: ask for a new one with resend."


class CodeAlreadyUsed(CodeInvalid):
    """An authenticator app's code that passed before (or one older than a code that did): it
    never passes twice, so the person waits for the app's next one."""

    code = "CODE_ALREADY_USED"
    default_detail = "The code was already used: wait for the next code the app shows."


class AttemptsExceeded(ApplicationError):
    status = 429
    code = "ATTEMPTS_EXCEEDED"
    default_detail = "Too many wrong codes: this confirmation is closed; start again."

    def __init__(self) -> None:
        super().__init__(extra={"attemptsRemaining": 0}, headers={"Cache-Control": "no-store"})


class ResendTooEarly(RateLimited):
    code = "RESEND_TOO_EARLY"
    default_detail = "A code was sent moments ago: wait retryAfterSeconds before asking again."


class NothingToResend(ApplicationError):
    code = "NOTHING_TO_RESEND"
    default_detail = (
        "This sign-in takes the code your authenticator app shows (or a recovery code): "
        "nothing is sent, so there is nothing to resend."
    )


class TwoFactorNotEnabled(ApplicationError):
    status = 409
    code = "TWO_FACTOR_NOT_ENABLED"
    default_detail = "Two-factor sign-in is off: recovery codes come with turning it on."


class ChallengeNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "No pending confirmation has this requestId."


class PhoneRequired(ApplicationError):
    code = "PHONE_REQUIRED"
    default_detail = "Add a phone number to your profile first (PATCH /api/users/me)."


class TwoFactorAlreadyEnabled(ApplicationError):
    status = 409
    code = "TWO_FACTOR_ALREADY_ENABLED"
    default_detail = "Two-factor sign-in is already enabled."


class PasswordChangeRequired(ApplicationError):
    status = 403
    code = "PASSWORD_CHANGE_REQUIRED"
    default_detail = (
        "An administrator requires a new password: change it with "
        "PATCH /api/users/change-password before anything else."
    )


class SessionNotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "You have no live session with this id."


class PasskeyInvalid(ApplicationError):
    """An attestation or assertion that failed verification: a wrong, used or expired challenge
    (requestId), an unknown or removed credential, a signature that does not verify, a sign
    count going backwards, user verification missing where required."""

    status = 400
    code = "PASSKEY_INVALID"
    default_detail = "The passkey's answer could not be verified; start again."


class ReauthenticationRequired(ApplicationError):
    """What the request would do hands the account over (a factor off or replaced, the e-mail
    changed, the account deleted): it needs a fresh proof of the owner (docs/sessions.md,
    "Reauthentication")."""

    status = 403
    code = "REAUTHENTICATION_REQUIRED"
    default_detail = (
        "Confirm it is you: send your password (password), a code of your second factor "
        "(token) or a passkey's answer (credential) with this request."
    )
