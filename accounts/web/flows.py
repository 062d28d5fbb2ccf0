"""What the cabinet's pages share: turning the services' errors into what a person reads, the
code pages and the redirect after signing in. No rule lives here: the pages call the same
services as the JSON API, which count the rate limits too."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from accounts.device_tokens import DEVICE_TOKEN_COOKIE, device_token_seconds
from accounts.devices import device_of
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    ChallengeNotFound,
    CodeAlreadyUsed,
    CodeExpired,
    CodeInvalid,
    CredentialsExpired,
    EmailNotConfirmed,
    ResendTooEarly,
    StaffOnly,
    TwoFactorRequired,
)
from accounts.models import Challenge, User
from accounts.selectors import challenge_of
from accounts.services.challenges import challenge_resend, challenge_resend_wait
from accounts.services.sessions import sessions_revoke_for_user
from accounts.services.sign_in import (
    SignIn,
)
from accounts.web.forms import (
    CodeForm,
)
from accounts.web.sentences import CODE_ALREADY_USED
from accounts.web.sessions import (
    after_sign_in_path,
    web_sign_in,
)
from platform_site.errors import ApplicationError, RateLimited, ValidationFailed
from platform_site.timestamps import utc_display

# The API's field names, as the cabinet's forms call them.
FORM_FIELDS = {
    "password": "new_password",
    "newPassword": "new_password",
    "confirmPassword": "confirm_password",
    "currentPassword": "current_password",
    "firstName": "first_name",
    "lastName": "last_name",
    "phone": "phone",
    "email": "email",
    "newEmail": "new_email",
    "login": "login",
}


def field_errors(form: forms.Form, error: ValidationFailed) -> None:
    for name, problems in error.extra.get("errors", {}).items():
        field = FORM_FIELDS.get(name)
        for problem in problems:
            form.add_error(field if field in form.fields else None, problem)


def too_many(error: RateLimited) -> str:
    seconds = error.extra.get("retryAfterSeconds", 60)
    return _("Too many attempts. Try again in %(seconds)s seconds.") % {"seconds": seconds}


# From this many wrong passwords left, the sign-in form counts them down.
FEW_ATTEMPTS = 2


def wrong_password(error: BadCredentials) -> str:
    """What a wrong password tells a person: the lock it set and until when, or how few wrong
    passwords are left before one. The sign-in gate counts a wrong password for an unknown
    identifier as it counts one for an account, so both read the same."""
    if error.locked_until is not None:
        return _(
            "The e-mail, login or password is wrong. That was too many wrong passwords: the "
            "account is now locked until %(time)s. You can reset your password to unlock it."
        ) % {"time": utc_display(error.locked_until)}
    left = error.attempts_remaining
    if left is not None and left <= FEW_ATTEMPTS:
        return ngettext(
            "The e-mail, login or password is wrong. %(count)s more wrong password locks the "
            "account for %(minutes)s min.",
            "The e-mail, login or password is wrong. %(count)s more wrong passwords lock the "
            "account for %(minutes)s min.",
            left,
        ) % {"count": left, "minutes": math.ceil(settings.ACCOUNTS_LOCKOUT_SECONDS / 60)}
    return _("The e-mail, login or password is wrong.")


def code_page(
    request: HttpRequest,
    *,
    template: str,
    challenge: Challenge,
    form: forms.Form,
    **context: Any,
) -> HttpResponse:
    return render(
        request,
        template,
        {
            "form": form,
            "challenge": challenge,
            "attempts_left": challenge.attempts_left,
            "retry_after": challenge_resend_wait(challenge),
            # The embedded mode sends nothing: say where the code is.
            "dev_outbox": settings.DEBUG,
            **context,
        },
    )


def code_error(form: forms.Form, error: ApplicationError) -> None:
    """A wrong, expired or exhausted code, as the code field's error."""
    if isinstance(error, CodeExpired):
        form.add_error("code", _("This code has expired. Ask for a new one."))
    elif isinstance(error, CodeAlreadyUsed):
        left = _("Attempts left: %(count)s.") % {"count": error.extra["attemptsRemaining"]}
        form.add_error("code", f"{CODE_ALREADY_USED} {left}")
    elif isinstance(error, CodeInvalid):
        form.add_error(
            "code",
            _("The code is wrong. Attempts left: %(count)s.")
            % {"count": error.extra["attemptsRemaining"]},
        )
    elif isinstance(error, AttemptsExceeded):
        form.add_error("code", _("Too many wrong codes: this code no longer works. Start again."))


def resend_asked(
    request: HttpRequest, challenge: Challenge, user: User | None = None
) -> HttpResponse | None:
    """The code page's "Send a new code" button: resend, then show the page again."""
    if request.method != "POST" or request.POST.get("action") != "resend":
        return None
    resend(request, challenge, user)
    return redirect(request.get_full_path())


def resend(request: HttpRequest, challenge: Challenge, user: User | None = None) -> None:
    try:
        challenge_resend(
            request_id=challenge.pk,
            purpose=Challenge.Purpose(challenge.purpose),
            request=request,
            user=user,
        )
    except ResendTooEarly as error:
        messages.warning(
            request,
            _("A code was sent moments ago. You can ask again in %(seconds)s seconds.")
            % {"seconds": error.extra["retryAfterSeconds"]},
        )
    except RateLimited as error:
        messages.warning(request, too_many(error))
    except (AttemptsExceeded, ChallengeNotFound):
        messages.error(request, _("This code can no longer be sent. Start again."))
    else:
        messages.success(request, _("A new code is on its way. The old one no longer works."))


def next_path(request: HttpRequest) -> str | None:
    """The page the sign-in was asked for (``?next=``), if it is one of this site's."""
    target = request.POST.get("next") or request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    return target if target and safe else None


def signed_in(request: HttpRequest, result: SignIn) -> HttpResponse:
    if result.user.kind != User.Kind.USER:  # adapters sign in over the API, not here
        sessions_revoke_for_user(user=result.user, reason="logout")
        messages.error(request, _("Adapters sign in over the exchange API, not in the cabinet."))
        return redirect("/login")
    web_sign_in(request, result)
    response = redirect(after_sign_in_path(result.user, next_path(request)))
    device_token_keep(request, response, result.device_token)
    return response


def device_token_keep(request: HttpRequest, response: HttpResponse, token: str) -> None:
    """The browser keeps the sign-in's device token, out of scripts' reach, and sends it back
    with its next sign-in (accounts.device_tokens.device_token_sent)."""
    response.set_cookie(
        DEVICE_TOKEN_COOKIE,
        token,
        max_age=device_token_seconds(),
        httponly=True,
        samesite="Lax",
        secure=request.is_secure(),
    )


def sign_in_outcome(request: HttpRequest, form: forms.Form, attempt: Any) -> HttpResponse | None:
    """Run a sign-in step; a redirect for what comes next, or None with the form's error set."""
    try:
        result = attempt()
    except AccountLocked as error:
        form.add_error(
            None,
            _(
                "Too many wrong passwords: the account is locked until %(time)s. "
                "You can reset your password to unlock it."
            )
            % {"time": utc_display(error.locked_until)},
        )
    except BadCredentials as error:
        form.add_error(None, wrong_password(error))
    except AccountDisabled:
        form.add_error(None, _("This account is disabled. Contact your administrator."))
    except AccountExpired:
        form.add_error(None, _("This account has expired. Contact your administrator."))
    except EmailNotConfirmed as error:
        messages.info(request, _("Confirm your e-mail address first: we sent you a code."))
        return redirect(f"/register/confirm?requestId={error.extra['requestId']}")
    except CredentialsExpired:
        messages.warning(request, _("Your password has expired. Set a new one to sign in."))
        return redirect("/reset-password")
    except TwoFactorRequired as error:
        query = {"requestId": error.extra["requestId"]}
        if target := next_path(request):
            query["next"] = target
        return redirect(f"/login/two-factor?{urlencode(query)}")
    except StaffOnly:
        form.add_error(None, _("This account cannot sign in to the administration."))
    except RateLimited as error:
        form.add_error(None, too_many(error))
    else:
        return signed_in(request, result)
    return None


def cabinet_user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 (login_required ran first)
    return user


def sign_in_by_code(
    request: HttpRequest,
    *,
    purpose: Challenge.Purpose,
    confirm: Callable[..., SignIn],
    template: str,
    start_over: str,
) -> HttpResponse:
    """A code page that ends in a sign-in: the e-mail confirmation (the second step's own page,
    which takes a passkey too, is accounts.web.second_step's)."""
    challenge = challenge_of(request.GET.get("requestId"), purpose)
    if challenge is None:
        return redirect(start_over)
    form = CodeForm(request.POST or None)
    if resent := resend_asked(request, challenge):
        return resent
    posted = request.method == "POST" and form.is_valid()
    if posted and (response := code_sign_in(request, form, challenge, confirm)):
        return response
    return code_page(
        request, template=template, challenge=challenge, form=form, address=challenge.address
    )


def code_sign_in(
    request: HttpRequest, form: forms.Form, challenge: Challenge, confirm: Callable[..., SignIn]
) -> HttpResponse | None:
    """The code of a valid ``form`` confirmed, and the sign-in it ends continued; None with the
    form's error set (and ``challenge`` as it is now)."""
    try:
        response = sign_in_outcome(
            request,
            form,
            lambda: confirm(
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                device=device_of(request),
                request=request,
            ),
        )
    except (CodeInvalid, AttemptsExceeded) as error:
        code_error(form, error)
        challenge.refresh_from_db()
        return None
    return response
