"""Deleting one's own account in the cabinet (/settings/profile/delete, docs/cabinet.md): a
page that says what goes and what stays, and asks for the password and, while two-factor sign-in
is on, a second factor's proof: the app's code or a recovery code, an SMS code the page sends
(accounts.services.reauthentication.reauthentication_start), or a passkey (static/passkeys.js).
Deleted, the person is signed out and lands on the sign-in page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from accounts.devices import device_of
from accounts.errors import (
    AccountLocked,
    BadCredentials,
    PasskeyInvalid,
    ReauthenticationRequired,
)
from accounts.models import Challenge, CodeFactor, TwoFactorMethod, User
from accounts.selectors import challenge_of
from accounts.services.deletion import account_delete
from accounts.services.factors import factors_held
from accounts.services.reauthentication import reauthentication_start
from accounts.web.flows import cabinet_user, too_many
from accounts.web.forms import AccountDeleteForm
from accounts.web.reauth import REFUSALS, page_reauth, refusal
from platform_site.errors import ApplicationError, RateLimited

DELETE = "/settings/profile/delete"


def _sms_sent(request: HttpRequest, user: User) -> Challenge | None:
    """The SMS code this page sent (``?requestId=``), if it is the person's."""
    challenge = challenge_of(request.GET.get("requestId"), Challenge.Purpose.REAUTHENTICATION)
    if challenge is None or challenge.user_id != user.pk:
        return None
    return challenge if challenge.method == Challenge.Method.SMS else None


def _token_help(user: User, sms: Challenge | None) -> str:
    if user.code_factor == CodeFactor.TOTP:
        return _("The code your authenticator app shows, or one of your recovery codes.")
    if sms is not None:
        return _("The code we sent to %(phone)s, or one of your recovery codes.") % {
            "phone": sms.address
        }
    if user.code_factor == CodeFactor.SMS:
        return _("Send yourself a code by SMS with the button below, or enter a recovery code.")
    return _("One of your recovery codes, or use your passkey below.")


def _refused(form: AccountDeleteForm, error: ApplicationError) -> None:
    """A refused proof, under the field it is about."""
    if isinstance(error, ReauthenticationRequired) and form.cleaned_data.get("password"):
        form.add_error("token", _("Enter a code of your second factor, or use your passkey."))
    elif isinstance(error, (ReauthenticationRequired, BadCredentials, AccountLocked)):
        form.add_error("password", refusal(error))
    elif isinstance(error, PasskeyInvalid) or "token" not in form.fields:
        form.add_error(None, refusal(error))
    else:
        form.add_error("token", refusal(error))


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def account_delete_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    if request.POST.get("action") == "sms":
        return _sms_send(request, user)
    sms = _sms_sent(request, user)
    form = AccountDeleteForm(
        request.POST or None, two_factor=user.two_factor_enabled, token_help=_token_help(user, sms)
    )
    if request.method == "POST" and form.is_valid():
        try:
            account_delete(user=user, reauth=page_reauth(request), request=request)
        except REFUSALS as error:
            _refused(form, error)
        else:
            logout(request)
            messages.success(
                request,
                _("Your account is deleted. We sent a last e-mail to confirm it. Goodbye."),
            )
            return redirect("/login")
    held = factors_held(user)
    return render(
        request,
        "cabinet/account_delete.html",
        {
            "form": form,
            "adapters": User.objects.filter(owner=user, kind=User.Kind.ADAPTER).count(),
            "sms": sms,
            "offers_sms": user.code_factor == CodeFactor.SMS,
            "offers_passkey": user.two_factor_enabled and TwoFactorMethod.PASSKEY in held,
        },
    )


def _sms_send(request: HttpRequest, user: User) -> HttpResponse:
    try:
        asked = reauthentication_start(
            user=user, method=TwoFactorMethod.SMS, device=device_of(request)
        )
    except RateLimited as error:
        messages.warning(request, too_many(error))
        return redirect(DELETE)
    messages.info(request, _("We sent a code to %(phone)s.") % {"phone": user.phone})
    return redirect(f"{DELETE}?requestId={asked.challenge.pk}")


@login_required(login_url="/login")
@require_POST
def account_delete_options_page(request: HttpRequest) -> JsonResponse:
    """A passkey's request options for the proof, for static/passkeys.js."""
    user = cabinet_user(request)
    asked = reauthentication_start(
        user=user, method=TwoFactorMethod.PASSKEY, device=device_of(request)
    )
    return JsonResponse({"requestId": str(asked.challenge.pk), "options": asked.options})
