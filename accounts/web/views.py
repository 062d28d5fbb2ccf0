"""The cabinet's pages. Each one calls the same services as the JSON API and turns their errors
into what a person reads; no rule lives here."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.devices import device_of
from accounts.errors import (
    AccountDisabled,
    AccountExpired,
    AccountLocked,
    AttemptsExceeded,
    BadCredentials,
    ChallengeNotFound,
    CodeExpired,
    CodeInvalid,
    CredentialsExpired,
    EmailNotConfirmed,
    EmailTaken,
    PhoneRequired,
    ResendTooEarly,
    StaffOnly,
    TwoFactorAlreadyEnabled,
    TwoFactorRequired,
)
from accounts.models import AuditEvent, Challenge, User
from accounts.services.challenges import challenge_resend, challenge_resend_wait
from accounts.services.passwords import (
    password_change,
    password_reset_confirm,
    password_reset_request,
)
from accounts.services.profile import (
    profile_update,
    session_revoke_own,
    sessions_live,
    two_factor_disable,
    two_factor_enable_confirm,
    two_factor_enable_start,
)
from accounts.services.registration import email_confirm, register
from accounts.services.sessions import sessions_revoke_for_user
from accounts.services.sign_in import (
    IdentifierKind,
    SignIn,
    sign_in,
    sign_in_two_factor_confirm,
)
from accounts.web.forms import (
    AdminLoginForm,
    ChangePasswordForm,
    CodeForm,
    LoginForm,
    ProfileForm,
    RegisterForm,
    ResetConfirmForm,
    ResetRequestForm,
)
from accounts.web.sessions import (
    after_sign_in_path,
    current_session_id,
    web_sign_in,
    web_sign_out,
)
from platform_site.errors import ApplicationError, RateLimited, ValidationFailed
from platform_site.ratelimits import auth_limits, rate_limit_hit

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
}


def _field_errors(form: forms.Form, error: ValidationFailed) -> None:
    for name, problems in error.extra.get("errors", {}).items():
        field = FORM_FIELDS.get(name)
        for problem in problems:
            form.add_error(field if field in form.fields else None, problem)


def _limited(request: HttpRequest, kind: str, identifier: str | None) -> None:
    """The API's per-IP and per-account counters, shared with the cabinet's forms."""
    rate_limit_hit(request, auth_limits(request, kind=kind, identifier=identifier or None))


def _too_many(error: RateLimited) -> str:
    seconds = error.extra.get("retryAfterSeconds", 60)
    return _("Too many attempts. Try again in %(seconds)s seconds.") % {"seconds": seconds}


def _local_time(moment: Any) -> str:
    """A moment with its time zone, for sentences ("locked until 2026-11-21 12:34 UTC")."""
    return date_format(timezone.localtime(moment), "Y-m-d H:i T")


def _challenge(request_id: str | None, purpose: Challenge.Purpose) -> Challenge | None:
    try:
        return Challenge.objects.filter(pk=uuid.UUID(str(request_id)), purpose=purpose).first()
    except ValueError:
        return None


def _code_page(
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


def _code_error(form: forms.Form, error: ApplicationError) -> None:
    """A wrong, expired or exhausted code, as the code field's error."""
    if isinstance(error, CodeExpired):
        form.add_error("code", _("This code has expired. Ask for a new one."))
    elif isinstance(error, CodeInvalid):
        form.add_error(
            "code",
            _("The code is wrong. Attempts left: %(count)s.")
            % {"count": error.extra["attemptsRemaining"]},
        )
    elif isinstance(error, AttemptsExceeded):
        form.add_error("code", _("Too many wrong codes: this code no longer works. Start again."))


def _resend_asked(
    request: HttpRequest, challenge: Challenge, user: User | None = None
) -> HttpResponse | None:
    """The code page's "Send a new code" button: resend, then show the page again."""
    if request.method != "POST" or request.POST.get("action") != "resend":
        return None
    _resend(request, challenge, user)
    return redirect(request.get_full_path())


def _resend(request: HttpRequest, challenge: Challenge, user: User | None = None) -> None:
    try:
        challenge_resend(
            request_id=challenge.pk, purpose=Challenge.Purpose(challenge.purpose), user=user
        )
    except ResendTooEarly as error:
        messages.warning(
            request,
            _("A code was sent moments ago. You can ask again in %(seconds)s seconds.")
            % {"seconds": error.extra["retryAfterSeconds"]},
        )
    except (AttemptsExceeded, ChallengeNotFound):
        messages.error(request, _("This code can no longer be sent. Start again."))
    else:
        messages.success(request, _("A new code is on its way. The old one no longer works."))


def _next(request: HttpRequest) -> str | None:
    """The page the sign-in was asked for (``?next=``), if it is one of this site's."""
    target = request.POST.get("next") or request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    return target if target and safe else None


def _signed_in(request: HttpRequest, result: SignIn) -> HttpResponse:
    if result.user.kind != User.Kind.USER:  # adapters sign in over the API, not here
        sessions_revoke_for_user(user=result.user, reason="logout")
        messages.error(request, _("Adapters sign in over the exchange API, not in the cabinet."))
        return redirect("/login")
    web_sign_in(request, result)
    return redirect(after_sign_in_path(result.user, _next(request)))


def _sign_in_outcome(request: HttpRequest, form: forms.Form, attempt: Any) -> HttpResponse | None:
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
            % {"time": _local_time(error.locked_until)},
        )
    except BadCredentials:
        form.add_error(None, _("The e-mail, login or password is wrong."))
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
        if target := _next(request):
            query["next"] = target
        return redirect(f"/login/two-factor?{urlencode(query)}")
    except StaffOnly:
        form.add_error(None, _("This account cannot sign in to the administration."))
    except RateLimited as error:
        form.add_error(None, _too_many(error))
    else:
        return _signed_in(request, result)
    return None


def _password_sign_in(
    request: HttpRequest, form: forms.Form, *, identifier: str, staff_only: bool = False
) -> HttpResponse | None:
    """The gate behind both sign-in forms, the cabinet's and the administration's: the API's
    rate limits, the lock, the audit and the second factor. A redirect, or None with the form's
    error set."""
    kind: IdentifierKind = "email" if "@" in identifier else "username"

    def attempt() -> SignIn:
        _limited(request, kind, identifier)
        return sign_in(
            kind=kind,
            identifier=identifier,
            password=form.cleaned_data["password"],
            device=device_of(request),
            request=request,
            staff_only=staff_only,
        )

    return _sign_in_outcome(request, form, attempt)


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


def _sign_in_by_code(
    request: HttpRequest,
    *,
    purpose: Challenge.Purpose,
    confirm: Callable[..., SignIn],
    template: str,
    start_over: str,
) -> HttpResponse:
    """A code page that ends in a sign-in: the e-mail confirmation and the 2FA code."""
    challenge = _challenge(request.GET.get("requestId"), purpose)
    if challenge is None:
        return redirect(start_over)
    form = CodeForm(request.POST or None)
    if resent := _resend_asked(request, challenge):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            response = _sign_in_outcome(
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
            _code_error(form, error)
            challenge.refresh_from_db()
        else:
            if response is not None:
                return response
    return _code_page(
        request, template=template, challenge=challenge, form=form, address=challenge.address
    )


def two_factor_page(request: HttpRequest) -> HttpResponse:
    return _sign_in_by_code(
        request,
        purpose=Challenge.Purpose.SIGN_IN,
        confirm=sign_in_two_factor_confirm,
        template="cabinet/two_factor.html",
        start_over="/login",
    )


def register_page(request: HttpRequest) -> HttpResponse:
    form = RegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        try:
            _limited(request, "email", email)
            started = register(
                email=email, password=form.cleaned_data["new_password"], request=request
            )
        except EmailTaken:
            form.add_error(
                "email",
                _("An account with this e-mail already exists. Sign in or reset the password."),
            )
        except ValidationFailed as error:
            _field_errors(form, error)
        except RateLimited as error:
            form.add_error(None, _too_many(error))
        else:
            return redirect(f"/register/confirm?requestId={started.challenge.pk}")
    return render(request, "cabinet/register.html", {"form": form})


def register_confirm_page(request: HttpRequest) -> HttpResponse:
    return _sign_in_by_code(
        request,
        purpose=Challenge.Purpose.REGISTRATION,
        confirm=email_confirm,
        template="cabinet/register_confirm.html",
        start_over="/register",
    )


def reset_request_page(request: HttpRequest) -> HttpResponse:
    form = ResetRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"]
        try:
            _limited(request, "email", email)
            started = password_reset_request(email=email, request=request)
        except RateLimited as error:
            form.add_error(None, _too_many(error))
        else:
            return redirect(f"/reset-password/confirm?requestId={started.challenge.pk}")
    return render(request, "cabinet/reset_request.html", {"form": form})


def reset_confirm_page(request: HttpRequest) -> HttpResponse:
    challenge = _challenge(request.GET.get("requestId"), Challenge.Purpose.PASSWORD_RESET)
    if challenge is None:
        return redirect("/reset-password")
    form = ResetConfirmForm(request.POST or None)
    if resent := _resend_asked(request, challenge):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            password_reset_confirm(
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                new_password=form.cleaned_data["new_password"],
                request=request,
            )
        except ValidationFailed as error:
            _field_errors(form, error)
        except (CodeInvalid, AttemptsExceeded) as error:
            _code_error(form, error)
            challenge.refresh_from_db()
        else:
            messages.success(request, _("Your password is set. Sign in with it."))
            return redirect("/login")
    return _code_page(
        request,
        template="cabinet/reset_confirm.html",
        challenge=challenge,
        form=form,
        address=challenge.address,
    )


@require_POST
def logout_page(request: HttpRequest) -> HttpResponse:
    web_sign_out(request)
    messages.info(request, _("You are signed out."))
    return redirect("/login")


def _cabinet_user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 (login_required ran first)
    return user


@login_required(login_url="/login")
def welcome_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    form = ProfileForm(
        request.POST or None,
        initial={"first_name": user.first_name, "last_name": user.last_name, "phone": user.phone},
    )
    if request.method == "POST" and form.is_valid():
        try:
            profile_update(
                user=user,
                first_name=form.cleaned_data["first_name"],
                last_name=form.cleaned_data["last_name"],
                phone=form.cleaned_data["phone"],
                request=request,
            )
        except ValidationFailed as error:
            _field_errors(form, error)
        else:
            messages.success(request, _("Your profile is complete."))
            return redirect("/bus")
    return render(request, "cabinet/welcome.html", {"form": form})


@login_required(login_url="/login")
def password_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    form = ChangePasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = password_change(
                user=user,
                current_password=form.cleaned_data["current_password"],
                new_password=form.cleaned_data["new_password"],
                device=device_of(request),
                request=request,
            )
        except ValidationFailed as error:
            _field_errors(form, error)
        except AccountLocked as error:
            form.add_error(
                None,
                _("Too many wrong passwords: the account is locked until %(time)s.")
                % {"time": _local_time(error.locked_until)},
            )
        else:
            web_sign_in(request, result)  # every other session ended; this browser goes on
            messages.success(request, _("Your password is changed. Other devices are signed out."))
            return redirect("/settings/security")
    return render(
        request,
        "cabinet/password.html",
        {"form": form, "required": user.reset_password_required},
    )


@login_required(login_url="/login")
def security_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    current = current_session_id(request)
    return render(
        request,
        "cabinet/security.html",
        {
            "sessions": [
                {"session": session, "current": str(session.pk) == current}
                for session in sessions_live(user=user)
            ],
            "events": AuditEvent.objects.filter(user=user).order_by("-created_at")[:20],
        },
    )


@login_required(login_url="/login")
@require_POST
def two_factor_enable_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    try:
        started = two_factor_enable_start(user=user)
    except PhoneRequired:
        messages.error(request, _("Add your mobile phone first: the codes are sent there."))
        return redirect("/welcome")
    except TwoFactorAlreadyEnabled:
        return redirect("/settings/security")
    return redirect(f"/settings/two-factor?requestId={started.challenge.pk}")


@login_required(login_url="/login")
def two_factor_confirm_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    challenge = _challenge(request.GET.get("requestId"), Challenge.Purpose.ENABLE_TWO_FACTOR)
    if challenge is None or challenge.user_id != user.pk:
        return redirect("/settings/security")
    form = CodeForm(request.POST or None)
    if resent := _resend_asked(request, challenge, user):
        return resent
    if request.method == "POST" and form.is_valid():
        try:
            two_factor_enable_confirm(
                user=user,
                request_id=challenge.pk,
                code=form.cleaned_data["code"].strip(),
                request=request,
            )
        except (CodeInvalid, AttemptsExceeded) as error:
            _code_error(form, error)
            challenge.refresh_from_db()
        else:
            messages.success(
                request, _("Two-factor sign-in is on: signing in now asks for an SMS code.")
            )
            return redirect("/settings/security")
    return _code_page(
        request, template="cabinet/two_factor_enable.html", challenge=challenge, form=form
    )


@login_required(login_url="/login")
@require_POST
def two_factor_disable_page(request: HttpRequest) -> HttpResponse:
    two_factor_disable(user=_cabinet_user(request), request=request)
    messages.success(request, _("Two-factor sign-in is off. We sent you an e-mail about it."))
    return redirect("/settings/security")


@login_required(login_url="/login")
@require_POST
def session_revoke_page(request: HttpRequest) -> HttpResponse:
    user = _cabinet_user(request)
    current = current_session_id(request)
    if request.POST.get("scope") == "others":
        for session in sessions_live(user=user).exclude(pk=current or uuid.UUID(int=0)):
            session_revoke_own(user=user, session_id=session.pk, request=request)
        messages.success(request, _("Every other session is signed out."))
    else:
        try:
            session_id = uuid.UUID(request.POST.get("session", ""))
            session_revoke_own(user=user, session_id=session_id, request=request)
        except (ValueError, ApplicationError):
            messages.error(request, _("That session has already ended."))
        else:
            messages.success(request, _("That session is signed out."))
    return redirect("/settings/security")
