"""Request and response shapes of the accounts API (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.password_validation import (
    MinimumLengthValidator,
    get_default_password_validators,
)
from django.core.validators import MinLengthValidator
from rest_framework import serializers

from accounts.models import TwoFactorMethod, User
from accounts.services.recovery_codes import recovery_codes_remaining
from accounts.services.sign_in import SignIn
from accounts.services.tokens import role_of
from platform_site.serializers import Input

# Where a code that the platform sends goes (ChallengeOutput), and the second factors.
CODE_METHODS = ["EMAIL", "SMS"]
FACTOR_METHODS = list(TwoFactorMethod.values)

PASSWORD_MAX_LENGTH = 4096  # hashing an unbounded input is a way to burn the server's CPU


class LoginEmailInput(Input):
    email = serializers.CharField(max_length=254)
    password = serializers.CharField(max_length=PASSWORD_MAX_LENGTH, trim_whitespace=False)


class LoginUsernameInput(Input):
    username = serializers.CharField(max_length=150, trim_whitespace=False)
    password = serializers.CharField(max_length=PASSWORD_MAX_LENGTH, trim_whitespace=False)


class RefreshTokenInput(Input):
    refreshToken = serializers.CharField(max_length=4096, trim_whitespace=False)


class TokenPairOutput(serializers.Serializer[Any]):
    accessToken = serializers.CharField()
    accessTokenExpiresAt = serializers.DateTimeField()
    refreshToken = serializers.CharField()
    refreshTokenExpiresAt = serializers.DateTimeField()


class UserDtoOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=User.Kind.choices)
    email = serializers.CharField()
    username = serializers.CharField()
    firstName = serializers.CharField()
    lastName = serializers.CharField()
    phone = serializers.CharField()
    emailConfirmed = serializers.BooleanField()
    twoFactorEnabled = serializers.BooleanField()
    twoFactorMethod = serializers.ChoiceField(
        choices=FACTOR_METHODS,
        allow_null=True,
        help_text="The second factor a sign-in asks for first while two-factor sign-in is on: "
        "an SMS code, an authenticator app's code (TOTP) or a passkey; chosen by the person "
        "(PATCH /api/users/me) among the factors they hold; null while it is off.",
    )
    recoveryCodesRemaining = serializers.IntegerField(
        help_text="Unused recovery codes; 0 while two-factor sign-in is off."
    )
    profileIncompleted = serializers.BooleanField(
        help_text="A cabinet user without firstName, lastName or phone; always false for adapters."
    )
    resetPasswordRequired = serializers.BooleanField()
    roles = serializers.ListField(child=serializers.CharField())


class LoginSuccessOutput(TokenPairOutput):
    deviceToken = serializers.CharField(
        help_text="Proof of this sign-in, valid ACCOUNTS_DEVICE_TOKEN_DAYS (90 days). Send it "
        "back in the X-Device-Token header of the next sign-in: wrong passwords then count "
        "against this token alone, and a lock others caused does not keep you out."
    )
    userDto = UserDtoOutput()


class EmptyOutput(serializers.Serializer[Any]):
    pass


def user_dto(user: User) -> dict[str, Any]:
    return {
        "id": user.pk,
        "kind": user.kind,
        "email": user.email,
        "username": user.username,
        "firstName": user.first_name,
        "lastName": user.last_name,
        "phone": user.phone,
        "emailConfirmed": user.email_confirmed,
        "twoFactorEnabled": user.two_factor_enabled,
        "twoFactorMethod": user.two_factor_method if user.two_factor_enabled else None,
        "recoveryCodesRemaining": recovery_codes_remaining(user=user),
        "profileIncompleted": user.kind == User.Kind.USER
        and not (user.first_name and user.last_name and user.phone),
        "resetPasswordRequired": user.reset_password_required,
        "roles": [role_of(user)],
    }


def login_success(result: SignIn) -> dict[str, Any]:
    return {
        **result.tokens.as_json(),
        "deviceToken": result.device_token,
        "userDto": user_dto(result.user),
    }


class AdapterLoginField(serializers.CharField):
    """An adapter's login: ASCII letters, digits and @.+-_ (accounts.services.adapters checks it;
    accounts.schema states it)."""


CODE_MAX_LENGTH = 16


class NewPasswordField(serializers.CharField):
    """A password being set: Django's validators (accounts.services.passwords) judge it. Their
    minimum length is checked here too, with their words, so that the schema states it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=PASSWORD_MAX_LENGTH, trim_whitespace=False, **kwargs)
        for validator in get_default_password_validators():
            if isinstance(validator, MinimumLengthValidator):
                self.validators.append(
                    MinLengthValidator(validator.min_length, validator.get_error_message())
                )


# A new password typed twice: confirmPassword must repeat the field named by password_field.
class NewPasswordInput(Input):
    password_field = "newPassword"  # noqa: S105 (a field name)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs[self.password_field] != attrs["confirmPassword"]:
            raise serializers.ValidationError({"confirmPassword": ["The passwords differ."]})
        return attrs


class RegisterInput(NewPasswordInput):
    password_field = "password"  # noqa: S105 (a field name)

    email = serializers.EmailField(max_length=254)
    password = NewPasswordField()
    confirmPassword = serializers.CharField(max_length=PASSWORD_MAX_LENGTH)


class ChallengeOutput(serializers.Serializer[Any]):
    requestId = serializers.UUIDField()
    confirmMethod = serializers.ChoiceField(choices=CODE_METHODS)
    retryAfterSeconds = serializers.IntegerField(
        help_text="Seconds before resend may send another code."
    )


class ResendOutput(serializers.Serializer[Any]):
    requestId = serializers.UUIDField()
    retryAfterSeconds = serializers.IntegerField()


class ConfirmInput(Input):
    requestId = serializers.UUIDField()
    token = serializers.CharField(
        max_length=CODE_MAX_LENGTH,
        help_text="The 6-digit code. Finishing a two-factor sign-in, also the authenticator "
        "app's code or one of the account's recovery codes (xxxxx-xxxxx), then used up.",
    )


class ResendInput(Input):
    requestId = serializers.UUIDField()


OPTIONS_HELP = (
    "The WebAuthn options in their JSON form (base64url strings), as "
    "PublicKeyCredential.parse{Creation,Request}OptionsFromJSON take them."
)
CREDENTIAL_HELP = "The browser's credential.toJSON(), as WebAuthn defines it."


class CredentialField(serializers.DictField):
    """A credential's JSON object: the library reads and checks its members."""


class TwoFactorConfirmInput(Input):
    requestId = serializers.UUIDField()
    token = serializers.CharField(
        max_length=CODE_MAX_LENGTH,
        required=False,
        help_text="The SMS code, the authenticator app's code, or one of the account's recovery "
        "codes (xxxxx-xxxxx), then used up. Exactly one of token and credential.",
    )
    credential = CredentialField(
        required=False,
        help_text="For confirmMethod PASSKEY: the browser's credential.toJSON() of the "
        "assertion. Exactly one of token and credential.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("token" in attrs) == ("credential" in attrs):
            raise serializers.ValidationError(
                {"token": ["Send either token (a code) or credential (a passkey's answer)."]}
            )
        return attrs


class ReauthInput(Input):
    """A fresh proof of the account's owner (docs/sessions.md, "Reauthentication"): optional
    within ACCOUNTS_REAUTH_SECONDS of signing in; any that is sent is checked."""

    password = serializers.CharField(
        max_length=PASSWORD_MAX_LENGTH,
        required=False,
        trim_whitespace=False,
        help_text="Your current password; a wrong one is 401 BAD_CREDENTIALS and counts toward "
        "the lock.",
    )
    token = serializers.CharField(
        max_length=CODE_MAX_LENGTH,
        required=False,
        help_text="A code of your second factor: the authenticator app's or a recovery code; "
        "with requestId (POST /api/users/me/reauthentication), the SMS code it sent.",
    )
    credential = CredentialField(
        required=False,
        help_text="A passkey's answer (credential.toJSON()) to the options of requestId.",
    )
    requestId = serializers.UUIDField(
        required=False, help_text="The challenge of POST /api/users/me/reauthentication."
    )


class EmailChangeInput(ReauthInput):
    newEmail = serializers.EmailField(max_length=254)


class AccountDeleteInput(ReauthInput):
    password = serializers.CharField(
        max_length=PASSWORD_MAX_LENGTH,
        trim_whitespace=False,
        help_text="Your current password, always; a wrong one is 401 BAD_CREDENTIALS and counts "
        "toward the lock.",
    )


class ReauthStartInput(Input):
    method = serializers.ChoiceField(
        choices=FACTOR_METHODS,
        required=False,
        help_text="The factor to prove (one you hold); without it, the one asked first.",
    )


class TwoFactorResendInput(Input):
    requestId = serializers.UUIDField()
    method = serializers.ChoiceField(
        choices=FACTOR_METHODS,
        required=False,
        help_text="Switch the sign-in to another of your factors (otherMethods) at once: the "
        "same requestId, no cooldown. Without it, the SMS code is sent again.",
    )


class TwoFactorResendOutput(serializers.Serializer[Any]):
    requestId = serializers.UUIDField()
    confirmMethod = serializers.ChoiceField(choices=FACTOR_METHODS)
    retryAfterSeconds = serializers.IntegerField(
        allow_null=True,
        help_text="Seconds before an SMS code may be sent again; null when nothing was sent "
        "(TOTP, PASSKEY).",
    )
    otherMethods = serializers.ListField(child=serializers.ChoiceField(FACTOR_METHODS))
    options = serializers.DictField(
        required=False, help_text=f"For confirmMethod PASSKEY: the request options. {OPTIONS_HELP}"
    )


class ResetPasswordInput(Input):
    email = serializers.EmailField(max_length=254)


class ResetPasswordConfirmInput(ConfirmInput, NewPasswordInput):
    newPassword = NewPasswordField()
    confirmPassword = serializers.CharField(max_length=PASSWORD_MAX_LENGTH)


class ConfirmedOutput(serializers.Serializer[Any]):
    confirmed = serializers.BooleanField()


class ChangePasswordInput(NewPasswordInput):
    currentPassword = serializers.CharField(max_length=PASSWORD_MAX_LENGTH, trim_whitespace=False)
    newPassword = NewPasswordField()
    confirmPassword = serializers.CharField(max_length=PASSWORD_MAX_LENGTH)


class ProfileInput(Input):
    firstName = serializers.CharField(max_length=150, required=False, allow_blank=True)
    lastName = serializers.CharField(max_length=150, required=False, allow_blank=True)
    phone = serializers.CharField(
        max_length=32,
        required=False,
        allow_blank=True,
        help_text="International format (+4915112345678, spaces allowed); stored as E.164. "
        "Empty removes it.",
    )
    twoFactorMethod = serializers.ChoiceField(
        choices=FACTOR_METHODS,
        required=False,
        help_text="The second factor a sign-in asks for first: one you hold.",
    )


class TwoFactorOutput(serializers.Serializer[Any]):
    twoFactorEnabled = serializers.BooleanField()


class RecoveryCodesField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.CharField(),
            help_text="Ten single-use codes (xxxxx-xxxxx), shown only in this answer; each "
            "stands in for the second factor once.",
            **kwargs,
        )


class TwoFactorEnabledOutput(TwoFactorOutput):
    recoveryCodes = RecoveryCodesField()


class RecoveryCodesOutput(serializers.Serializer[Any]):
    recoveryCodes = RecoveryCodesField()


class TotpStartOutput(serializers.Serializer[Any]):
    requestId = serializers.UUIDField()
    secret = serializers.CharField(
        help_text="The app's secret in base32, to type in when the QR code cannot be scanned. "
        "Shown only in this answer."
    )
    otpauthUri = serializers.CharField(
        help_text="otpauth://totp/... (Key Uri Format): the QR code's content."
    )


class TotpConfirmInput(Input):
    requestId = serializers.UUIDField()
    token = serializers.CharField(
        max_length=CODE_MAX_LENGTH, help_text="The 6-digit code the app shows now."
    )


class SessionOutput(serializers.Serializer[Any]):
    sessionId = serializers.UUIDField()
    deviceId = serializers.CharField(help_text="X-Device-ID, or empty for a fingerprinted device.")
    userAgent = serializers.CharField()
    ip = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    lastUsedAt = serializers.DateTimeField()
    expiresAt = serializers.DateTimeField()
    current = serializers.BooleanField(help_text="The session of the token making this request.")


class SessionListOutput(serializers.Serializer[Any]):
    sessions = SessionOutput(many=True)
