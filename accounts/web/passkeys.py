"""The cabinet's pages for passkeys (docs/cabinet.md): adding, listing and removing them on the
Security page, and signing in with one. static/passkeys.js does the browser's part: it fetches a
ceremony's options here (JSON), asks the browser for the credential and posts its JSON with the
page's form, so what comes of it is a page, as after any form. The services are the JSON API's."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from accounts.devices import device_of
from accounts.errors import PasskeyInvalid
from accounts.models import Passkey, User
from accounts.services.passkeys import (
    Ceremony,
    passkey_register,
    passkey_registration_start,
    passkey_remove,
    passkey_sign_in,
    passkey_sign_in_start,
    passkeys_of,
)
from accounts.services.reauthentication import Reauthentication
from accounts.web.flows import cabinet_user, sign_in_outcome, too_many
from accounts.web.forms import LoginForm, PasskeyAddForm, PasskeyAnswerForm
from accounts.web.reauth import proof_needed, with_proof
from platform_site.errors import RateLimited

SECURITY = "/settings/security#passkeys"


def _options(start: Callable[[], Ceremony]) -> JsonResponse:
    """A ceremony's options for the script, or the sentence it shows instead."""
    try:
        ceremony = start()
    except RateLimited as error:
        return JsonResponse({"error": too_many(error)}, status=429)
    return JsonResponse({"requestId": ceremony.request_id, "options": ceremony.options})


def _own_passkey(user: User, passkey_id: uuid.UUID) -> Passkey:
    passkey = next((p for p in passkeys_of(user=user) if p.pk == passkey_id), None)
    if passkey is None:
        raise Http404
    return passkey


@login_required(login_url="/login")
@require_POST
def passkey_options_page(request: HttpRequest) -> JsonResponse:
    user = cabinet_user(request)
    return _options(lambda: passkey_registration_start(user=user))


@login_required(login_url="/login")
@require_POST
def passkey_add_page(request: HttpRequest) -> HttpResponse:
    form = PasskeyAddForm(request.POST)
    try:
        if not form.is_valid():
            raise PasskeyInvalid()
        passkey = passkey_register(
            user=cabinet_user(request),
            request_id=str(form.cleaned_data["requestId"]),
            credential=form.cleaned_data["credential"],
            name=form.cleaned_data["name"],
            request=request,
        )
    except PasskeyInvalid:
        messages.error(
            request,
            _(
                "The passkey was not added: the browser's answer did not verify, or it came "
                "too late. Try again."
            ),
        )
    else:
        messages.success(
            request,
            _("The passkey “%(name)s” is added: you can sign in with it.") % {"name": passkey.name},
        )
    return redirect(SECURITY)


@login_required(login_url="/login")
@require_http_methods(["GET", "POST"])
def passkey_remove_page(request: HttpRequest, passkey_id: uuid.UUID) -> HttpResponse:
    """Removing a passkey asks first (GET), the POST removes it; another person's is a 404."""
    user = cabinet_user(request)
    passkey = _own_passkey(user, passkey_id)

    def page(error: str = "") -> HttpResponse:
        return render(
            request,
            "cabinet/passkey_remove.html",
            {
                "passkey": passkey,
                "proof_needed": proof_needed(request),
                "refused": {"action": "remove", "error": error} if error else {},
            },
        )

    if request.method == "GET":
        return page()

    def remove(reauth: Reauthentication) -> HttpResponse:
        if not passkey_remove(user=user, passkey_id=passkey.pk, reauth=reauth, request=request):
            raise Http404  # removed meanwhile
        messages.success(
            request,
            _("The passkey “%(name)s” is removed: it no longer signs you in.")
            % {"name": passkey.name},
        )
        return redirect(SECURITY)

    return with_proof(request, remove, page)


@require_POST
def passkey_sign_in_options_page(request: HttpRequest) -> JsonResponse:
    return _options(lambda: passkey_sign_in_start(request=request))


@require_POST
def passkey_sign_in_page(request: HttpRequest) -> HttpResponse:
    """A passkey's answer ends as a password's does (flows.sign_in_outcome): the same session,
    device token and next page, and the same sentences for the steps after it."""
    form = PasskeyAnswerForm(request.POST)
    try:
        if not form.is_valid():
            raise PasskeyInvalid()
        response = sign_in_outcome(
            request,
            form,
            lambda: passkey_sign_in(
                request_id=str(form.cleaned_data["requestId"]),
                credential=form.cleaned_data["credential"],
                device=device_of(request),
                request=request,
            ),
        )
    except PasskeyInvalid:
        form.add_error(
            None,
            _(
                "This passkey did not sign you in: it is not known here (it may have been "
                "removed), your device did not confirm it was you, or the request took too long. "
                "Try again, or sign in with your password."
            ),
        )
    else:
        if response is not None:
            return response
    return render(request, "cabinet/login.html", {"form": LoginForm(), "passkey_form": form})
