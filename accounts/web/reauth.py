"""The cabinet's side of reauthentication (docs/sessions.md, "Reauthentication"): the pages that
turn a factor off, replace the app, make new recovery codes, remove a passkey, change the e-mail
address or delete the account send what the person typed on them (``password``, ``token``) or a
passkey's answer (``credential`` with its ``requestId``), and a refused proof is the error of the
form's password field, on the same page."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from accounts.devices import device_of
from accounts.errors import (
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    CodeAlreadyUsed,
    CodeExpired,
    CodeInvalid,
    PasskeyInvalid,
    ReauthenticationRequired,
)
from accounts.models import Session
from accounts.services.reauthentication import (
    PROOF_REFUSALS,
    Proof,
    Reauthentication,
    session_fresh,
)
from accounts.web.sentences import CODE_ALREADY_USED
from accounts.web.sessions import current_session_id
from platform_site.errors import ApplicationError, RateLimited, ValidationFailed
from platform_site.timestamps import utc_display

# What a proof may be refused with, besides the guarded action's own errors.
REFUSALS = (*PROOF_REFUSALS, RateLimited, ValidationFailed)


def page_session(request: HttpRequest) -> Session | None:
    """The platform session of the cabinet's sign-in."""
    session_id = current_session_id(request)
    return Session.objects.filter(pk=session_id).first() if session_id else None


def proof_needed(request: HttpRequest) -> bool:
    """Whether the page's guarded forms ask for the password: the sign-in is older than
    ACCOUNTS_REAUTH_SECONDS."""
    return not session_fresh(page_session(request))


def _request_id(request: HttpRequest) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.POST.get("requestId", ""))
    except ValueError:
        return None


def _credential(request: HttpRequest) -> dict[str, Any] | None:
    try:
        credential = json.loads(request.POST.get("credential") or "null")
    except ValueError:
        return None
    return credential if isinstance(credential, dict) else None


def page_reauth(request: HttpRequest) -> Reauthentication:
    """The page's session (the cabinet's sign-in), and the password, code or passkey answer
    posted with it."""
    return Reauthentication(
        session=page_session(request),
        proof=Proof(
            password=request.POST.get("password") or None,
            token=(request.POST.get("token") or "").strip() or None,
            credential=_credential(request),
            request_id=_request_id(request),
        ),
        device=device_of(request),
    )


def refusal(error: ApplicationError) -> str:
    """What a refused proof tells the person, under the password field."""
    if isinstance(error, ReauthenticationRequired):
        return _("Enter your password to confirm it is you.")
    if isinstance(error, BadCredentials) and error.locked_until is not None:
        return _(
            "The password is wrong. That was too many wrong passwords: the account is now "
            "locked until %(time)s."
        ) % {"time": utc_display(error.locked_until)}
    if isinstance(error, BadCredentials):
        return _("The password is wrong. Nothing was changed.")
    if isinstance(error, AccountLocked):
        return _("Too many wrong passwords: the account is locked until %(time)s.") % {
            "time": utc_display(error.locked_until)
        }
    if isinstance(error, CodeExpired):
        return _("This code has expired. Ask for a new one.")
    if isinstance(error, CodeAlreadyUsed):
        nothing = _("Nothing was changed.")
        return f"{CODE_ALREADY_USED} {nothing}"
    if isinstance(error, (CodeInvalid, AttemptsExceeded)):
        return _("The code is wrong. Nothing was changed.")
    if isinstance(error, PasskeyInvalid):
        return _("The passkey did not confirm that it is you. Nothing was changed.")
    if isinstance(error, RateLimited):
        return _("Too many attempts. Try again in %(seconds)s seconds.") % {
            "seconds": error.extra.get("retryAfterSeconds", 60)
        }
    return _("This cannot be done right now (%(code)s).") % {"code": error.code}


def with_proof(
    request: HttpRequest,
    act: Callable[[Reauthentication], HttpResponse],
    refused: Callable[[str], HttpResponse],
) -> HttpResponse:
    """``act`` with the page's proof of the owner; a proof that is missing or refused is the
    page again (``refused``), with the sentence under its password field."""
    try:
        return act(page_reauth(request))
    except REFUSALS as error:
        return refused(refusal(error))
