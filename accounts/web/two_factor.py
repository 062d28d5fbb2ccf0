"""The cabinet's pages for second factors beyond the SMS code: adding an authenticator app (its
QR code drawn here as inline SVG, so no image leaves the server and the page's CSP holds), the
recovery codes shown once, and new ones. The pages call the services the JSON API calls."""

from __future__ import annotations

import uuid

import segno
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from accounts.errors import AttemptsExceeded, CodeInvalid, TwoFactorNotEnabled
from accounts.services.reauthentication import Reauthentication
from accounts.services.two_factor import (
    recovery_codes_regenerate,
    totp_enable_confirm,
    totp_enable_start,
    totp_enrolment,
)
from accounts.web.flows import cabinet_user, code_error
from accounts.web.forms import CodeForm
from accounts.web.reauth import with_proof
from accounts.web.security import security_refused


def qr_svg(uri: str) -> SafeString:
    """The QR code of ``uri`` as an <svg> element: segno draws only paths, with no script or
    style attribute, and the URI is encoded into the drawing, never copied into the markup."""
    svg = segno.make(uri, error="m").svg_inline(scale=4, border=2, svgclass=None, lineclass=None)
    return mark_safe(svg)  # noqa: S308 (segno's own output, see above)


def recovery_codes_page(request: HttpRequest, codes: list[str]) -> HttpResponse:
    """The codes, shown this once (the answer is not cached)."""
    response = render(request, "cabinet/recovery_codes.html", {"codes": codes})
    response["Cache-Control"] = "no-store"
    return response


@login_required(login_url="/login")
@require_POST
def app_start_page(request: HttpRequest) -> HttpResponse:
    def start(reauth: Reauthentication) -> HttpResponse:
        started = totp_enable_start(user=cabinet_user(request), reauth=reauth, request=request)
        return redirect(f"/settings/two-factor/app?requestId={started.challenge.pk}")

    return with_proof(request, start, security_refused(request, "app"))


@login_required(login_url="/login")
def app_confirm_page(request: HttpRequest) -> HttpResponse:
    user = cabinet_user(request)
    try:
        request_id = uuid.UUID(request.GET.get("requestId", ""))
    except ValueError:
        return redirect("/settings/security")
    started = totp_enrolment(user=user, request_id=request_id)
    if started is None:
        return redirect("/settings/security")
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            enabled = totp_enable_confirm(
                user=user,
                request_id=request_id,
                code=form.cleaned_data["code"].strip(),
                request=request,
            )
        except (CodeInvalid, AttemptsExceeded) as error:
            code_error(form, error)
            started.challenge.refresh_from_db()
        else:
            return recovery_codes_page(request, enabled.recovery_codes)
    response = render(
        request,
        "cabinet/two_factor_app.html",
        {
            "form": form,
            "started": started,
            "qr_svg": qr_svg(started.otpauth_uri),
            "attempts_left": started.challenge.attempts_left,
            "replaces": user.code_factor,
        },
    )
    response["Cache-Control"] = "no-store"  # the secret
    return response


@login_required(login_url="/login")
@require_POST
def recovery_codes_new_page(request: HttpRequest) -> HttpResponse:
    def regenerate(reauth: Reauthentication) -> HttpResponse:
        try:
            codes = recovery_codes_regenerate(
                user=cabinet_user(request), reauth=reauth, request=request
            )
        except TwoFactorNotEnabled:
            return redirect("/settings/security")
        return recovery_codes_page(request, codes)

    return with_proof(request, regenerate, security_refused(request, "recovery-codes"))
