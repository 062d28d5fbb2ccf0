"""The cabinet's second step of a sign-in (/login/two-factor, docs/cabinet.md): the factor the
sign-in asks for (an SMS code, the authenticator app's code or a passkey), a recovery code in its
place, and a button for each of the person's other factors that switches the sign-in to it at
once. static/passkeys.js does a passkey's browser part, as on the sign-in page. The services are
the API's (accounts.services.sign_in_challenges, accounts.services.sign_in_second_factor)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.devices import device_of
from accounts.errors import AttemptsExceeded, ChallengeNotFound, PasskeyInvalid
from accounts.models import Challenge, TwoFactorMethod
from accounts.selectors import challenge_of
from accounts.services.factors import NOT_HELD, factors_held
from accounts.services.sign_in_challenges import sign_in_two_factor_resend
from accounts.services.sign_in_second_factor import (
    sign_in_passkey_confirm,
    sign_in_two_factor_confirm,
)
from accounts.web.flows import code_page, code_sign_in, resend_asked, sign_in_outcome, too_many
from accounts.web.forms import PasskeyAnswerForm, RecoveryCodeForm, SecondFactorForm
from platform_site.errors import RateLimited, ValidationFailed


def _gone() -> str:
    return _(
        "This sign-in can no longer be finished: too many attempts, or it took too long. "
        "Sign in again."
    )


def _sign_in_of(request: HttpRequest) -> Challenge | None:
    return challenge_of(request.GET.get("requestId"), Challenge.Purpose.SIGN_IN)


def two_factor_page(request: HttpRequest) -> HttpResponse:
    challenge = _sign_in_of(request)
    if challenge is None:
        return redirect("/login")
    action = request.POST.get("action") if request.method == "POST" else None
    if action == "switch":
        _switch(request, challenge, request.POST.get("method", ""))
        return redirect(request.get_full_path())
    if resent := resend_asked(request, challenge):
        return resent
    asks_passkey = challenge.method == Challenge.Method.PASSKEY
    form_class = RecoveryCodeForm if asks_passkey else SecondFactorForm
    passkey_form = None
    if action == "passkey":
        form: forms.Form = form_class()
        passkey_form = PasskeyAnswerForm(request.POST)
        if response := _passkey_sign_in(request, passkey_form, challenge):
            return response
    else:
        form = form_class(request.POST or None)
        posted = request.method == "POST" and form.is_valid()
        confirm = sign_in_two_factor_confirm
        if posted and (response := code_sign_in(request, form, challenge, confirm)):
            return response
    held = factors_held(challenge.user) if challenge.user is not None else []
    return code_page(
        request,
        template="cabinet/two_factor.html",
        challenge=challenge,
        form=form,
        passkey_form=passkey_form,
        others=[method.value for method in held if method != challenge.method],
    )


def _passkey_sign_in(
    request: HttpRequest, form: PasskeyAnswerForm, challenge: Challenge
) -> HttpResponse | None:
    """A passkey's answer ends the sign-in as a code does (flows.sign_in_outcome); None with the
    form's error set."""
    try:
        if not form.is_valid() or form.cleaned_data["requestId"] != challenge.pk:
            raise PasskeyInvalid()
        return sign_in_outcome(
            request,
            form,
            lambda: sign_in_passkey_confirm(
                request_id=challenge.pk,
                credential=form.cleaned_data["credential"],
                device=device_of(request),
                request=request,
            ),
        )
    except PasskeyInvalid:
        challenge.refresh_from_db()
        form.add_error(
            None,
            _(
                "This passkey did not confirm that it is you: it is not one of this account's "
                "passkeys (it may have been removed), or the request took too long. Try again, "
                "or use another way below."
            )
            if challenge.attempts_left
            else _gone(),
        )
    return None


def _switch(request: HttpRequest, challenge: Challenge, method: str) -> None:
    """The sign-in switched to another of the person's factors, at once. An SMS code sent within
    the cooldown stays good, and none is sent then (the service's rule)."""
    if method == challenge.method or method not in TwoFactorMethod.values:
        return
    try:
        sign_in_two_factor_resend(request_id=challenge.pk, method=method, request=request)
    except RateLimited as error:
        messages.warning(request, too_many(error))
    except (ChallengeNotFound, AttemptsExceeded):
        messages.error(request, _gone())
    except ValidationFailed:
        messages.error(request, str(NOT_HELD))


@require_POST
def two_factor_options_page(request: HttpRequest) -> JsonResponse:
    """A fresh passkey challenge of the sign-in, for static/passkeys.js: its request options,
    or the sentence it shows instead."""
    challenge = _sign_in_of(request)
    if challenge is None:
        return JsonResponse({"error": _gone()}, status=404)
    try:
        asked = sign_in_two_factor_resend(
            request_id=challenge.pk, method=TwoFactorMethod.PASSKEY, request=request
        )
    except RateLimited as error:
        return JsonResponse({"error": too_many(error)}, status=429)
    except (ChallengeNotFound, AttemptsExceeded) as error:
        return JsonResponse({"error": _gone()}, status=error.status)
    except ValidationFailed as error:
        return JsonResponse({"error": str(NOT_HELD)}, status=error.status)
    return JsonResponse({"requestId": str(asked.challenge.pk), "options": asked.options})
