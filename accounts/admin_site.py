"""The Django admin, signed into through the platform's gate.

Django's own admin login checks a password with no lock, no rate limit and no second factor. Here
staff sign in like everyone else (accounts.web.sign_in.admin_login_page): five wrong passwords lock
the account, whichever door they were typed at, and a staff account with two-factor sign-in on
is asked for its code. With ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR, a staff account without a second
factor is sent to the Security page to set one up before any admin page opens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.apps import AdminConfig
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters

ViewType = TypeVar("ViewType", bound=Callable[..., Any])


class PlatformAdminSite(admin.AdminSite):
    """Named after the platform (PLATFORM_NAME) in the administrator's language: never Django's
    default "Django administration"."""

    def admin_view(self, view: ViewType, cacheable: bool = False) -> ViewType:
        inner = super().admin_view(view, cacheable)
        if getattr(view, "__func__", None) is PlatformAdminSite.logout:
            return inner  # signing out needs no second factor

        @functools.wraps(inner)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if staff_without_second_factor(request.user):
                messages.warning(
                    request, _("Set up a second factor before you use the administration.")
                )
                query = urlencode({"next": request.get_full_path()})
                return HttpResponseRedirect(f"/settings/security?{query}#two-factor")
            response: HttpResponse = inner(request, *args, **kwargs)
            return response

        return cast(ViewType, guarded)

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().each_context(request)
        context["site_header"] = _("%(platform)s administration") % {
            "platform": settings.PLATFORM_NAME
        }
        context["site_title"] = settings.PLATFORM_NAME
        return context

    @method_decorator(sensitive_post_parameters("password"))
    @method_decorator(never_cache)
    def login(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        from accounts.web.sign_in import admin_login_page  # it imports the models

        index = reverse("admin:index", current_app=self.name)
        if request.method == "GET" and self.has_permission(request):
            return HttpResponseRedirect(index)
        context = {
            **self.each_context(request),
            "title": _("Log in"),
            "subtitle": None,
            "app_path": request.get_full_path(),
            "username": request.user.get_username(),
            REDIRECT_FIELD_NAME: request.POST.get(REDIRECT_FIELD_NAME)
            or request.GET.get(REDIRECT_FIELD_NAME)
            or index,
            **(extra_context or {}),
        }
        request.current_app = self.name
        return admin_login_page(request, context=context)


def staff_without_second_factor(user: Any) -> bool:
    """A signed-in staff account that ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR keeps out of the admin
    until it holds a second factor."""
    return bool(
        settings.ACCOUNTS_STAFF_REQUIRE_TWO_FACTOR
        and user.is_authenticated
        and user.is_staff
        and not user.two_factor_enabled
    )


class PlatformAdminConfig(AdminConfig):
    default_site = "accounts.admin_site.PlatformAdminSite"
