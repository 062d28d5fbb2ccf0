"""The cabinet's Security page (/settings/security): sessions, two-factor sign-in, passkeys and
recent events. Its forms that hand the account over (a code factor off or replaced, new recovery
codes) carry a password field while the sign-in is older than ACCOUNTS_REAUTH_SECONDS
(accounts.web.reauth); a refused proof shows the page again with the error on that field. A
staff member sent here by the administration (``?next=``) gets a link back once a factor is on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.models import AuditEvent, TwoFactorMethod, User
from accounts.selectors import sessions_live
from accounts.services.factors import NOT_HELD, factors_held
from accounts.services.passkeys import passkeys_of
from accounts.services.profile import profile_update
from accounts.services.recovery_codes import recovery_codes_remaining
from accounts.user_agents import user_agent_describe
from accounts.web.flows import cabinet_user
from accounts.web.forms import FirstFactorForm
from accounts.web.reauth import proof_needed
from accounts.web.sessions import current_session_id
from platform_site.errors import ValidationFailed

# Where the administration sent a staff member without a second factor, kept for the link back.
RETURN_KEY = "security_next"


def factor_names(user: User) -> list[tuple[str, str]]:
    """The factors ``user`` holds, each as the first-factor choice names it."""
    names = {
        TwoFactorMethod.SMS: _("SMS codes to %(phone)s") % {"phone": user.phone},
        TwoFactorMethod.TOTP: _("The authenticator app"),
        TwoFactorMethod.PASSKEY: _("A passkey"),
    }
    return [(method.value, names[method]) for method in factors_held(user)]


def asked_first(user: User) -> str:
    """The factor a sign-in asks ``user`` for first, as "signing in asks for …" ends."""
    if user.two_factor_method == TwoFactorMethod.PASSKEY:
        return _("one of your passkeys")
    if user.two_factor_method == TwoFactorMethod.TOTP:
        return _("the code your authenticator app shows")
    return _("a code sent to %(phone)s") % {"phone": user.phone}


def _same_site_path(target: str) -> str | None:
    """``target`` if it is a path of this site: "/…", not "//host" nor "/\\host"."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return None


def _return_to(request: HttpRequest, user: User) -> str | None:
    """The page the administration sent the person here from (``?next=``, kept in the session
    until a factor is on and the link back shown)."""
    if target := _same_site_path(request.GET.get("next", "")):
        request.session[RETURN_KEY] = target
    if not user.two_factor_enabled:
        return None
    target = request.session.pop(RETURN_KEY, None)
    return str(target) if target else None


def security_render(request: HttpRequest, *, refused: dict[str, str] | None = None) -> HttpResponse:
    """The Security page; ``refused``: the form (``action``) whose proof was refused, and the
    ``error`` shown under its password field."""
    user = cabinet_user(request)
    current = current_session_id(request)
    factors = factor_names(user)
    context: dict[str, Any] = {
        "sessions": [
            {
                "session": session,
                "client": user_agent_describe(session.user_agent),
                "current": str(session.pk) == current,
            }
            for session in sessions_live(user=user)
        ],
        "events": AuditEvent.objects.filter(user=user).order_by("-created_at")[:20],
        "recovery_codes_left": recovery_codes_remaining(user=user),
        "passkeys": passkeys_of(user=user),
        "factors": factors,
        "asked_first": asked_first(user),
        "first_factor_form": FirstFactorForm(
            initial={"method": user.two_factor_method}, factors=factors
        ),
        "proof_needed": proof_needed(request),
        "refused": refused or {},
        "return_to": _return_to(request, user),
        "setting_up_for_return": RETURN_KEY in request.session,
    }
    return render(request, "cabinet/security.html", context)


@login_required(login_url="/login")
def security_page(request: HttpRequest) -> HttpResponse:
    return security_render(request)


def security_refused(request: HttpRequest, action: str) -> Callable[[str], HttpResponse]:
    """The Security page again, with the refused proof's sentence under ``action``'s password
    field (accounts.web.reauth.with_proof's ``refused``)."""
    return lambda error: security_render(request, refused={"action": action, "error": error})


@login_required(login_url="/login")
@require_POST
def first_factor_page(request: HttpRequest) -> HttpResponse:
    """The factor a sign-in asks for first, one of those the person holds."""
    user = cabinet_user(request)
    form = FirstFactorForm(request.POST, factors=factor_names(user))
    try:
        if not form.is_valid():
            raise ValidationFailed({"twoFactorMethod": [str(NOT_HELD)]})
        profile_update(user=user, two_factor_method=form.cleaned_data["method"], request=request)
    except ValidationFailed:
        messages.error(request, str(NOT_HELD))
    else:
        messages.success(
            request,
            _("Signing in now asks first for %(factor)s.") % {"factor": asked_first(user)},
        )
    return redirect("/settings/security#two-factor")
