"""The cabinet's forms: fields and their labels only; every rule is the services' (the same
ones the JSON API calls), and their errors are put back on the fields here."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from accounts.models import User
from accounts.services.passwords import password_validate
from accounts.services.profile import phone_normalize
from platform_site.errors import ValidationFailed

PASSWORD_MAX_LENGTH = 4096


def password_field(label: Any, autocomplete: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        max_length=PASSWORD_MAX_LENGTH,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": autocomplete}),
    )


class LoginForm(forms.Form):
    login = forms.CharField(
        label=_("E-mail or login"),
        max_length=254,
        widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}),
    )
    password = password_field(_("Password"), "current-password")


class AdminLoginForm(forms.Form):
    """LoginForm under the field names that Django's admin/login.html shows."""

    username = LoginForm.base_fields["login"]
    password = LoginForm.base_fields["password"]


class NewPasswordForm(forms.Form):
    """A new password typed twice."""

    new_password = password_field(_("New password"), "new-password")
    confirm_password = password_field(_("Repeat the new password"), "new-password")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("new_password") != data.get("confirm_password"):
            self.add_error("confirm_password", _("The passwords differ."))
        return data


class RegisterForm(NewPasswordForm):
    email = forms.EmailField(
        label=_("E-mail"),
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )
    field_order = ["email", "new_password", "confirm_password"]

    def clean(self) -> dict[str, Any]:
        """The password's strength is judged on every submit, with the form's other errors: a
        person should not fix the address or the repetition only to learn then that the
        password is too weak. The service judges it again (the API's path)."""
        data = super().clean()
        password = data.get("new_password")
        if password:
            try:
                password_validate(
                    password, user=User(email=data.get("email", "")), field="new_password"
                )
            except ValidationFailed as error:
                for problem in error.extra["errors"]["new_password"]:
                    self.add_error("new_password", problem)
        return data


class CodeForm(forms.Form):
    code = forms.CharField(
        label=_("Code"),
        max_length=16,
        widget=forms.TextInput(
            attrs={
                "autocomplete": "one-time-code",
                "inputmode": "numeric",
                "pattern": "[0-9]{6}",
                "autofocus": True,
            }
        ),
    )


class SecondFactorForm(forms.Form):
    """The second step of a sign-in: a 6-digit code, or a recovery code (letters and digits)."""

    code = forms.CharField(
        label=_("Code"),
        max_length=16,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autocapitalize": "none", "autofocus": True}
        ),
    )


class RecoveryCodeForm(forms.Form):
    """The second step's code field while it asks for a passkey: a recovery code."""

    code = forms.CharField(
        label=_("Recovery code"),
        max_length=16,
        widget=forms.TextInput(attrs={"autocomplete": "off", "autocapitalize": "none"}),
    )


class FirstFactorForm(forms.Form):
    """Which of the person's second factors a sign-in asks for first (``factors``: the held
    ones, each with its name)."""

    method = forms.ChoiceField(label=_("Ask first for"))

    def __init__(self, *args: Any, factors: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["method"].choices = factors  # type: ignore[attr-defined]


class ResetConfirmForm(CodeForm, NewPasswordForm):
    field_order = ["code", "new_password", "confirm_password"]


class ResetRequestForm(forms.Form):
    email = forms.EmailField(
        label=_("E-mail"),
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )


class ChangePasswordForm(NewPasswordForm):
    current_password = password_field(_("Current password"), "current-password")
    field_order = ["current_password", "new_password", "confirm_password"]


class ProfileForm(forms.Form):
    first_name = forms.CharField(
        label=_("First name"),
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "given-name"}),
    )
    last_name = forms.CharField(
        label=_("Last name"),
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "family-name"}),
    )
    phone = forms.CharField(
        label=_("Mobile phone"),
        max_length=32,
        help_text=_("International format with the country code, such as +49 151 23456789."),
        widget=forms.TextInput(attrs={"autocomplete": "tel", "inputmode": "tel"}),
    )

    def clean_phone(self) -> str:
        """The phone checked with the names, so one submit shows every field's error (the
        service checks it again, for the API)."""
        phone: str = self.cleaned_data["phone"]
        try:
            phone_normalize(phone)
        except ValidationFailed as error:
            raise forms.ValidationError(error.extra["errors"]["phone"]) from None
        return phone


class AdapterCreateForm(forms.Form):
    login = forms.CharField(
        label=_("Login (optional)"),
        max_length=150,
        required=False,
        help_text=_("Leave empty for a generated one."),
    )


class PasskeyAnswerForm(forms.Form):
    """What static/passkeys.js posts after the browser's ceremony: the ``requestId`` of the
    options it was given and the credential's JSON (credential.toJSON()), both hidden."""

    requestId = forms.UUIDField()  # the API's name, as the script posts it
    credential = forms.JSONField()

    def clean_credential(self) -> dict[str, Any]:
        credential = self.cleaned_data["credential"]
        if not isinstance(credential, dict):
            raise forms.ValidationError("not a credential")
        return credential


class PasskeyAddForm(PasskeyAnswerForm):
    name = forms.CharField(max_length=100, required=False)


class ProfilePageForm(ProfileForm):
    """The profile page's form: the names, a phone that may be removed (unless SMS codes go to
    it: the service says so), and the language of the cabinet and of the e-mails."""

    language = forms.ChoiceField(label=_("Language"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["phone"].required = False
        self.fields["language"].choices = settings.LANGUAGES  # type: ignore[attr-defined]


class EmailChangeForm(forms.Form):
    new_email = forms.EmailField(
        label=_("New e-mail address"),
        max_length=254,
        help_text=_("We send a code there: the address changes once you enter it."),
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )
    password = password_field(_("Your password"), "current-password")


class AccountDeleteForm(forms.Form):
    """The password, always, and while two-factor sign-in is on a second factor's code (a
    passkey's answer comes in hidden fields instead, static/passkeys.js)."""

    password = password_field(_("Your password"), "current-password")
    token = forms.CharField(
        label=_("Code of your second factor"),
        max_length=16,
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "none"}),
    )

    def __init__(self, *args: Any, two_factor: bool, token_help: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not two_factor:
            del self.fields["token"]
        else:
            self.fields["token"].help_text = token_help
