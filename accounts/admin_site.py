"""The Django admin, signed into through the platform's gate.

Django's own admin login checks a password with no lock, no rate limit and no second factor. Here
staff sign in like everyone else (accounts.web.sign_in.admin_login_page): five wrong passwords lock
the account, whichever door they were typed at, and a staff account with two-factor sign-in on
is asked for its code.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters


class PlatformAdminSite(admin.AdminSite):
    """Named after the platform (PLATFORM_NAME) in the administrator's language: never Django's
    default "Django administration"."""

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


class PlatformAdminConfig(AdminConfig):
    default_site = "accounts.admin_site.PlatformAdminSite"
