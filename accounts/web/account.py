"""The cabinet's profile page (/settings/profile, docs/cabinet.md): the names, the phone and the
language; the e-mail address and its change (a code to the new address); "Export my data"; and
the way to "Delete account…" (accounts.web.deletion). /welcome stays the first-time form. The
services are the JSON API's."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.translation import gettext as _

from accounts.errors import AttemptsExceeded, ChallengeNotFound, CodeInvalid, EmailTaken
from accounts.models import Challenge
from accounts.selectors import challenge_of
from accounts.services.email_change import email_change_confirm, email_change_start
from accounts.services.profile import profile_language_set
from accounts.web.flows import (
    cabinet_user,
    code_error,
    code_page,
    field_errors,
    resend_asked,
)
from accounts.web.forms import CodeForm, EmailChangeForm, ProfilePageForm
from accounts.web.profile import profile_saved
from accounts.web.reauth import REFUSALS, page_reauth, page_session, refusal
from platform_site.errors import ValidationFailed

PROFILE = "/settings/profile"


@login_required(login_url="/login")
def profile_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    form = ProfilePageForm(
        request.POST or None,
        initial={
            "first_name": user.first_name,
            "last_name": user.last_name,
            "phone": user.phone,
            "language": user.language or translation.get_language(),
        },
    )
    if request.method == "POST" and form.is_valid() and profile_saved(request, form, user):
        return _saved(request, language=form.cleaned_data["language"])
    return render(request, "cabinet/profile.html", {"form": form})


def _saved(request: HttpRequest, *, language: str) -> HttpResponse:
    """The profile saved; the language chosen is the cabinet's from now on, as the header's
    switch makes it (Django's language cookie), and the e-mails'."""
    profile_language_set(user=cabinet_user(request), language=language)
    translation.activate(language)
    messages.success(request, _("Your profile is saved."))
    response = redirect(PROFILE)
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )
    return response


@login_required(login_url="/login")
def email_change_page(request: HttpRequest) -> HttpResponse:
    """The new address and the password; a code goes to the address."""
    user = cabinet_user(request)
    form = EmailChangeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            started = email_change_start(
                user=user,
                new_email=form.cleaned_data["new_email"],
                reauth=page_reauth(request),
                request=request,
            )
        except EmailTaken:
            form.add_error("new_email", _("Another account has this address. Choose another one."))
        except ValidationFailed as error:
            field_errors(form, error)
        except REFUSALS as error:
            form.add_error("password", refusal(error))
        else:
            return redirect(f"/settings/email/confirm?requestId={started.challenge.pk}")
    return render(request, "cabinet/email_change.html", {"form": form})


@login_required(login_url="/login")
def email_change_confirm_page(request: HttpRequest) -> HttpResponse:
    """The code sent to the new address. The challenge is looked up by its requestId alone, as
    the API's confirmation does: one whose address another account has takes no code."""
    user = cabinet_user(request)
    challenge = challenge_of(request.GET.get("requestId"), Challenge.Purpose.EMAIL_CHANGE)
    if challenge is None:
        return redirect("/settings/email")
    form = CodeForm(request.POST or None)
    if resent := resend_asked(request, challenge):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            changed = email_change_confirm(
                user=user,
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                session=page_session(request),
                request=request,
            )
        except (CodeInvalid, AttemptsExceeded) as error:
            code_error(form, error)
            challenge.refresh_from_db()
        except EmailTaken:
            form.add_error(None, _("Another account took this address meanwhile. Start again."))
        except ChallengeNotFound:
            messages.error(request, _("This code can no longer be used. Start again."))
            return redirect("/settings/email")
        else:
            messages.success(
                request,
                _(
                    "Your e-mail address is now %(email)s. We told your old address, and "
                    "signed out your other sessions."
                )
                % {"email": changed.email},
            )
            return redirect(PROFILE)
    return code_page(
        request,
        template="cabinet/email_change_confirm.html",
        challenge=challenge,
        form=form,
        address=challenge.address,
    )
