"""The cabinet's pages. Registering, and confirming the e-mail address by code."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from accounts.errors import (
    EmailTaken,
)
from accounts.models import Challenge
from accounts.services.registration import email_confirm, register
from accounts.web.flows import field_errors, sign_in_by_code, too_many
from accounts.web.forms import (
    RegisterForm,
)
from platform_site.errors import RateLimited, ValidationFailed


def register_page(request: HttpRequest) -> HttpResponse:
    form = RegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        try:
            started = register(
                email=email, password=form.cleaned_data["new_password"], request=request
            )
        except EmailTaken:
            form.add_error(
                "email",
                _("An account with this e-mail already exists. Sign in or reset the password."),
            )
        except ValidationFailed as error:
            field_errors(form, error)
        except RateLimited as error:
            form.add_error(None, too_many(error))
        else:
            return redirect(f"/register/confirm?requestId={started.challenge.pk}")
    return render(request, "cabinet/register.html", {"form": form})


def register_confirm_page(request: HttpRequest) -> HttpResponse:
    return sign_in_by_code(
        request,
        purpose=Challenge.Purpose.REGISTRATION,
        confirm=email_confirm,
        template="cabinet/register_confirm.html",
        start_over="/register",
    )
