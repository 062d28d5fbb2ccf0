"""The cabinet's pages. The signed-in person's own pages: the first-time profile (/welcome), SMS
codes on and off, sessions, the language switch (the Security page itself is
accounts.web.security's, the profile page accounts.web.account's)."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from accounts.errors import (
    AttemptsExceeded,
    CodeInvalid,
    PhoneRequired,
    TwoFactorAlreadyEnabled,
)
from accounts.models import Challenge, CodeFactor, TwoFactorMethod, User
from accounts.selectors import challenge_of, sessions_live
from accounts.services.profile import (
    profile_language_set,
    profile_update,
    session_revoke_own,
)
from accounts.services.reauthentication import Reauthentication
from accounts.services.two_factor import (
    two_factor_disable,
    two_factor_enable_confirm,
    two_factor_enable_start,
)
from accounts.web.flows import (
    cabinet_user,
    code_error,
    code_page,
    field_errors,
    resend_asked,
)
from accounts.web.forms import (
    CodeForm,
    ProfileForm,
)
from accounts.web.reauth import with_proof
from accounts.web.security import security_refused
from accounts.web.sessions import (
    current_session_id,
)
from accounts.web.two_factor import recovery_codes_page
from platform_site.errors import ApplicationError, ValidationFailed


@login_required(login_url="/login")
def welcome_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    form = ProfileForm(
        request.POST or None,
        initial={"first_name": user.first_name, "last_name": user.last_name, "phone": user.phone},
    )
    if request.method == "POST" and form.is_valid() and profile_saved(request, form, user):
        messages.success(request, _("Your profile is complete."))
        return redirect("/bus")
    return render(request, "cabinet/welcome.html", {"form": form})


def profile_saved(request: HttpRequest, form: forms.Form, user: User) -> bool:
    """The form's names and phone saved (profile_update, which e-mails a changed phone); or
    False with the service's refusals on the form's fields."""
    try:
        profile_update(
            user=user,
            first_name=form.cleaned_data["first_name"],
            last_name=form.cleaned_data["last_name"],
            phone=form.cleaned_data["phone"],
            request=request,
        )
    except ValidationFailed as error:
        field_errors(form, error)
        return False
    return True


@login_required(login_url="/login")
@require_POST
def two_factor_enable_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    try:
        started = two_factor_enable_start(user=user)
    except PhoneRequired:
        messages.error(request, _("Add your mobile phone first: the codes are sent there."))
        return redirect("/welcome")
    except TwoFactorAlreadyEnabled:
        return redirect("/settings/security")
    return redirect(f"/settings/two-factor?requestId={started.challenge.pk}")


@login_required(login_url="/login")
def two_factor_confirm_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    challenge = challenge_of(request.GET.get("requestId"), Challenge.Purpose.ENABLE_TWO_FACTOR)
    if challenge is None or challenge.user_id != user.pk:
        return redirect("/settings/security")
    form = CodeForm(request.POST or None)
    if resent := resend_asked(request, challenge, user):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            enabled = two_factor_enable_confirm(
                user=user,
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                request=request,
            )
        except (CodeInvalid, AttemptsExceeded) as error:
            code_error(form, error)
            challenge.refresh_from_db()
        except TwoFactorAlreadyEnabled:
            return redirect("/settings/security")
        else:
            messages.success(
                request,
                _("Two-factor sign-in is on: signing in now asks for an SMS code.")
                if enabled.user.two_factor_method == TwoFactorMethod.SMS
                else _("SMS codes are on, beside your passkeys."),
            )
            return recovery_codes_page(request, enabled.recovery_codes)
    return code_page(
        request, template="cabinet/two_factor_enable.html", challenge=challenge, form=form
    )


@login_required(login_url="/login")
@require_POST
def two_factor_disable_page(request: HttpRequest) -> HttpResponse:
    """The code factor off (SMS codes or the app); passkeys stay, and two-factor sign-in with
    them."""
    was = cabinet_user(request).code_factor

    def disable(reauth: Reauthentication) -> HttpResponse:
        user = two_factor_disable(user=cabinet_user(request), reauth=reauth, request=request)
        _disabled_told(request, user=user, was=was)
        return redirect("/settings/security")

    return with_proof(request, disable, security_refused(request, "disable"))


def _disabled_told(request: HttpRequest, *, user: User, was: str) -> None:
    if user.two_factor_enabled:
        messages.success(
            request,
            (
                _("SMS codes are off.")
                if was == CodeFactor.SMS
                else _("The authenticator app is removed.")
            )
            + " "
            + _("Two-factor sign-in stays on with your passkeys. We sent you an e-mail about it."),
        )
    else:
        messages.success(request, _("Two-factor sign-in is off. We sent you an e-mail about it."))


@login_required(login_url="/login")
@require_POST
def session_revoke_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    current = current_session_id(request)
    if request.POST.get("scope") == "others":
        for session in sessions_live(user=user).exclude(pk=current or uuid.UUID(int=0)):
            session_revoke_own(user=user, session_id=session.pk, request=request)
        messages.success(request, _("Every other session is signed out."))
    else:
        try:
            session_id = uuid.UUID(request.POST.get("session", ""))
            session_revoke_own(user=user, session_id=session_id, request=request)
        except (ValueError, ApplicationError):
            messages.error(request, _("That session has already ended."))
        else:
            messages.success(request, _("That session is signed out."))
    return redirect("/settings/security")


@require_POST
def language_switch_page(request: HttpRequest) -> HttpResponse:
    """The header's language switch (Django's set_language); a signed-in person's choice is kept
    on the account too, for the security notices e-mailed to them."""
    response = set_language(request)
    language = request.POST.get("language", "")
    user = request.user
    if response.status_code == 302 and isinstance(user, User) and user.kind == User.Kind.USER:
        profile_language_set(user=user, language=language)
    return response
