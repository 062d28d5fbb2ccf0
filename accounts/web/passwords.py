"""The cabinet's pages. Resetting a forgotten password by e-mailed code, and changing one's own."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from accounts.devices import device_of
from accounts.errors import (
    AccountLocked,
    AttemptsExceeded,
    CodeInvalid,
)
from accounts.models import Challenge
from accounts.selectors import challenge_of
from accounts.services.passwords import (
    password_change,
    password_reset_confirm,
    password_reset_request,
)
from accounts.web.flows import (
    cabinet_user,
    code_error,
    code_page,
    field_errors,
    resend_asked,
    too_many,
)
from accounts.web.forms import (
    ChangePasswordForm,
    ResetConfirmForm,
    ResetRequestForm,
)
from accounts.web.sessions import (
    web_sign_in,
)
from platform_site.errors import RateLimited, ValidationFailed
from platform_site.timestamps import utc_display


def reset_request_page(request: HttpRequest) -> HttpResponse:
    form = ResetRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        try:
            started = password_reset_request(email=email, request=request)
        except RateLimited as error:
            form.add_error(None, too_many(error))
        else:
            return redirect(f"/reset-password/confirm?requestId={started.challenge.pk}")
    return render(request, "cabinet/reset_request.html", {"form": form})


def reset_confirm_page(request: HttpRequest) -> HttpResponse:
    challenge = challenge_of(request.GET.get("requestId"), Challenge.Purpose.PASSWORD_RESET)
    if challenge is None:
        return redirect("/reset-password")
    form = ResetConfirmForm(request.POST or None)
    if resent := resend_asked(request, challenge):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            password_reset_confirm(
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                new_password=form.cleaned_data["new_password"],
                request=request,
            )
        except ValidationFailed as error:
            field_errors(form, error)
        except (CodeInvalid, AttemptsExceeded) as error:
            code_error(form, error)
            challenge.refresh_from_db()
        except RateLimited as error:
            form.add_error(None, too_many(error))
        else:
            messages.success(request, _("Your password is set. Sign in with it."))
            return redirect("/login")
    return code_page(
        request,
        template="cabinet/reset_confirm.html",
        challenge=challenge,
        form=form,
        address=challenge.address,
    )


@login_required(login_url="/login")
def password_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    form = ChangePasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = password_change(
                user=user,
                current_password=form.cleaned_data["current_password"],
                new_password=form.cleaned_data["new_password"],
                device=device_of(request),
                request=request,
            )
        except ValidationFailed as error:
            field_errors(form, error)
        except AccountLocked as error:
            form.add_error(
                None,
                _("Too many wrong passwords: the account is locked until %(time)s.")
                % {"time": utc_display(error.locked_until)},
            )
        else:
            web_sign_in(request, result)  # every other session ended; this browser goes on
            messages.success(request, _("Your password is changed. Other devices are signed out."))
            return redirect("/settings/security")
    return render(
        request,
        "cabinet/password.html",
        {"form": form, "required": user.reset_password_required},
    )
