"""The cabinet's side of reauthentication (docs/sessions.md, "Reauthentication"): the pages that
turn a factor off, replace the app, make new recovery codes or remove a passkey send the
password typed on them (a ``password`` field), and a refused proof is a message, not an error
page."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _

from accounts.devices import device_of
from accounts.errors import (
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    CodeInvalid,
    PasskeyInvalid,
    ReauthenticationRequired,
)
from accounts.models import Session
from accounts.services.reauthentication import Proof, Reauthentication
from accounts.web.sessions import current_session_id

SECURITY = "/settings/security"


def page_reauth(request: HttpRequest) -> Reauthentication:
    """The page's session (the cabinet's sign-in), and the password or code typed on it."""
    session_id = current_session_id(request)
    session = Session.objects.filter(pk=session_id).first() if session_id else None
    return Reauthentication(
        session=session,
        proof=Proof(
            password=request.POST.get("password") or None,
            token=(request.POST.get("token") or "").strip() or None,
        ),
        device=device_of(request),
    )


def with_proof(
    request: HttpRequest, act: Callable[[Reauthentication], HttpResponse], back: str = SECURITY
) -> HttpResponse:
    """``act`` with the page's proof of the owner; a proof that is missing or refused is a
    message on ``back``, asking for the password."""
    try:
        return act(page_reauth(request))
    except ReauthenticationRequired:
        messages.error(request, _("Confirm it is you: enter your password, then try again."))
    except BadCredentials:
        messages.error(request, _("The password is wrong. Nothing was changed."))
    except AccountLocked:
        messages.error(request, _("Too many wrong passwords: the account is locked for now."))
    except (CodeInvalid, AttemptsExceeded, PasskeyInvalid):
        messages.error(request, _("The code is wrong. Nothing was changed."))
    return redirect(f"{back}?confirm=1")
