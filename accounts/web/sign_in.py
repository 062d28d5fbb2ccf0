"""The cabinet's pages. Signing in and out: the password and the admin's login page (the second
step is accounts.web.second_step's)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.devices import device_of
from accounts.services.sign_in import IdentifierKind, SignIn, sign_in
from accounts.web.flows import sign_in_outcome
from accounts.web.forms import (
    AdminLoginForm,
    LoginForm,
)
from accounts.web.sessions import (
    current_session_id,
    web_sign_out,
)


def _password_sign_in(
    request: HttpRequest, form: forms.Form, *, identifier: str, staff_only: bool = False
) -> HttpResponse | None:
    """The gate behind both sign-in forms, the cabinet's and the administration's: the API's
    sign-in, with its rate limits, the lock, the audit and the second factor. A redirect, or None
    with the form's error set."""
    kind: IdentifierKind = "email" if "@" in identifier else "username"

    def attempt() -> SignIn:
        return sign_in(
            kind=kind,
            identifier=identifier,
            password=form.cleaned_data["password"],
            device=device_of(request),
            request=request,
            staff_only=staff_only,
        )

    return sign_in_outcome(request, form, attempt)


def login_page(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated and current_session_id(request):
        return redirect("/bus")
    form = LoginForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        response = _password_sign_in(request, form, identifier=form.cleaned_data["login"])
        if response is not None:
            return response
    return render(request, "cabinet/login.html", {"form": form})


def admin_login_page(request: HttpRequest, *, context: dict[str, Any]) -> HttpResponse:
    """The Django admin's sign-in page (accounts.admin_site), on the cabinet's gate for staff
    accounts: five wrong passwords lock the same counter whichever door was used."""
    form = AdminLoginForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        identifier = form.cleaned_data["username"]
        response = _password_sign_in(request, form, identifier=identifier, staff_only=True)
        if response is not None:
            return response
    return render(request, "admin/login.html", {**context, "form": form})


@require_POST
def logout_page(request: HttpRequest) -> HttpResponse:
    web_sign_out(request)
    messages.info(request, _("You are signed out."))
    return redirect("/login")
