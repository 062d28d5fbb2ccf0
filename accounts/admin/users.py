"""The users' admin (cabinet users and adapters): the forms, the sign-in lock, and the actions,
each through its service."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm, UsernameField
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, ngettext_lazy
from django.views.decorators.http import require_POST

from accounts import liveness
from accounts.models import User
from accounts.selectors import users_with_lock
from accounts.services.accounts import (
    account_credentials_expire,
    account_edit,
    account_expire,
    account_require_password_change,
    account_sessions_revoke,
    account_set_active,
    account_unlock,
)
from accounts.services.adapters import adapter_password_rotate
from accounts.services.deletion import account_delete_by_administrator
from accounts.services.lockout import gate_of
from accounts.services.passwords import password_set_by_administrator
from accounts.services.two_factor import two_factor_reset

# What an action did to how many accounts, in the administrator's language.
ACCOUNTS_UNLOCKED = ngettext_lazy(
    "%(count)s account unlocked.", "%(count)s accounts unlocked.", "count"
)
ACCOUNTS_DISABLED = ngettext_lazy(
    "%(count)s account disabled.", "%(count)s accounts disabled.", "count"
)
ACCOUNTS_ENABLED = ngettext_lazy(
    "%(count)s account enabled.", "%(count)s accounts enabled.", "count"
)
ACCOUNTS_EXPIRED = ngettext_lazy(
    "%(count)s account expired.", "%(count)s accounts expired.", "count"
)
CREDENTIALS_EXPIRED = ngettext_lazy(
    "Credentials of %(count)s account expired.",
    "Credentials of %(count)s accounts expired.",
    "count",
)


def accounts_done(message: Any, count: int) -> str:
    return str(message % {"count": count})


def sessions_revoked(count: int) -> str:
    return ngettext("%(count)s session revoked.", "%(count)s sessions revoked.", count) % {
        "count": count
    }


class PlatformUserCreationForm(AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("username", "email")
        field_classes = {"username": UsernameField}


class PlatformUserChangeForm(UserChangeForm[User]):
    class Meta:
        model = User
        fields = "__all__"
        field_classes = {"username": UsernameField}


class LockedFilter(admin.SimpleListFilter):
    """Accounts whose sign-in gate is locked now, as every sign-in door finds it."""

    title = gettext_lazy("locked")
    parameter_name = "locked"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", gettext_lazy("Yes")), ("no", gettext_lazy("No"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("yes", "no"):
            return queryset.filter(locked=self.value() == "yes")
        return queryset


@admin.register(User)
class UserAdmin(DjangoUserAdmin[User]):
    form = PlatformUserChangeForm
    add_form = PlatformUserCreationForm
    # Short headers and no column a filter answers as well: the list fits a 1280-pixel window
    # beside its filters (platform-admin.css wraps long logins and addresses).
    list_display = (
        "account",
        "kind",
        "owner",
        "active",
        "two_factor",
        "locked",
        "last_login",
    )
    list_filter = (
        "kind",
        LockedFilter,
        "is_active",
        "is_staff",
        "email_confirmed",
        "two_factor_enabled",
        "code_factor",
        "reset_password_required",
    )
    search_fields = ("username", "email", "first_name", "last_name", "phone")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    ordering = ("username",)
    fieldsets = (
        (None, {"fields": ("username", "password", "kind", "owner", "display_name")}),
        ("Profile", {"fields": ("email", "first_name", "last_name", "phone", "language")}),
        (
            "Security",
            {
                "fields": (
                    "sign_in_lock",
                    "is_active",
                    "disabled_with_owner",
                    "email_confirmed",
                    "two_factor_enabled",
                    "code_factor",
                    "two_factor_method",
                    "reset_password_required",
                    "account_expires_at",
                    "credentials_expire_at",
                    "password_changed_at",
                )
            },
        ),
        ("Administration", {"fields": ("is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    # The second factor changes through its services only (the person's, or the reset action).
    readonly_fields = (
        "sign_in_lock",
        "disabled_with_owner",
        "two_factor_enabled",
        "code_factor",
        "two_factor_method",
        "password_changed_at",
        "last_login",
        "date_joined",
    )
    actions = [
        "require_password_change",
        "revoke_sessions",
        "unlock",
        "disable",
        "enable",
        "expire_credentials",
        "expire_account",
        "rotate_adapter_password",
        "reset_two_factor",
    ]

    class Media:
        css = {"all": ["platform-admin.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        return users_with_lock(super().get_queryset(request))

    @admin.display(description=gettext_lazy("Login and e-mail"), ordering="username")
    def account(self, user: User) -> str:
        """The login, and under it the address when it is not the login (a cabinet user's login
        is usually the address)."""
        if not user.email or user.email.casefold() == user.username.casefold():
            return user.username
        return format_html("{}<br>{}", user.username, user.email)

    @admin.display(description=gettext_lazy("Active"), boolean=True, ordering="is_active")
    def active(self, user: User) -> bool:
        return user.is_active

    @admin.display(description=gettext_lazy("2FA"), boolean=True, ordering="two_factor_enabled")
    def two_factor(self, user: User) -> bool:
        return user.two_factor_enabled

    @admin.display(description=gettext_lazy("Locked"), boolean=True, ordering="locked")
    def locked(self, user: User) -> bool:
        return bool(getattr(user, "locked", False))

    @admin.display(description="Sign-in lock")
    def sign_in_lock(self, user: User) -> str:
        """The platform's lock (accounts.services.lockout), the one every sign-in door obeys:
        the API, the cabinet and this administration."""
        gate = gate_of(user=user) if user.pk else None
        if gate is not None and gate.locked_until and gate.locked_until > timezone.now():
            until = date_format(timezone.localtime(gate.locked_until), "DATETIME_FORMAT")
            # formaction: the button posts the change form's CSRF token to the unlock view.
            return format_html(
                'Locked until {} after {} wrong passwords in a row. <button type="submit" '
                'formaction="{}" formnovalidate class="button">Unlock</button>',
                until,
                gate.failures,
                reverse("admin:accounts_user_unlock", args=[user.pk]),
            )
        failures = gate.failures if gate is not None and gate.locked_until is None else 0
        return f"Not locked ({failures} wrong passwords in a row)."

    def get_urls(self) -> list[URLPattern]:
        unlock = path(
            "<int:user_id>/unlock/",
            self.admin_site.admin_view(require_POST(self.unlock_view)),
            name="accounts_user_unlock",
        )
        return [unlock, *super().get_urls()]

    def unlock_view(self, request: HttpRequest, user_id: int) -> HttpResponse:
        user = get_object_or_404(User, pk=user_id)
        if not self.has_change_permission(request, user):
            raise PermissionDenied
        account_unlock(user=user, actor=actor_of(request))
        self.message_user(request, _("%(login)s is unlocked.") % {"login": user.username})
        return HttpResponseRedirect(reverse("admin:accounts_user_change", args=[user.pk]))

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        """Django's "Change password" form (it saves the user), followed by what every password
        change does."""
        with liveness.changing([int(id)]):
            response = super().user_change_password(request, id, form_url)
            if request.method == "POST" and response.status_code == 302:  # the form saved it
                user = get_object_or_404(User, pk=id)
                password_set_by_administrator(user=user, actor=actor_of(request))
        return response

    @admin.action(description="Require a password change (role USER_PASSWORD_RESET_REQUIRED)")
    def require_password_change(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        users = queryset.filter(kind=User.Kind.USER)
        for user in users:
            account_require_password_change(user=user, actor=actor_of(request))
        count = users.count()
        self.message_user(
            request,
            ngettext(
                "%(count)s user must change their password.",
                "%(count)s users must change their password.",
                count,
            )
            % {"count": count},
        )

    @admin.action(description="Revoke all sessions (their tokens stop working at once)")
    def revoke_sessions(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        ended = sum(
            account_sessions_revoke(user=user, actor=actor_of(request)) for user in queryset
        )
        self.message_user(request, sessions_revoked(ended))

    @admin.action(description="Unlock (clear consecutive wrong passwords)")
    def unlock(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_unlock(user=user, actor=actor_of(request))
        self.message_user(request, accounts_done(ACCOUNTS_UNLOCKED, queryset.count()))

    @admin.action(description="Disable (and end their sessions)")
    def disable(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_set_active(user=user, active=False, actor=actor_of(request))
        self.message_user(request, accounts_done(ACCOUNTS_DISABLED, queryset.count()))

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_set_active(user=user, active=True, actor=actor_of(request))
        self.message_user(request, accounts_done(ACCOUNTS_ENABLED, queryset.count()))

    @admin.action(description="Expire credentials now (next sign-in: ACTION_RESET_PASSWORD)")
    def expire_credentials(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_credentials_expire(user=user, actor=actor_of(request))
        self.message_user(request, accounts_done(CREDENTIALS_EXPIRED, queryset.count()))

    @admin.action(description="Expire account now (sign-in: 403 ACCOUNT_EXPIRED; sessions end)")
    def expire_account(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_expire(user=user, actor=actor_of(request))
        self.message_user(request, accounts_done(ACCOUNTS_EXPIRED, queryset.count()))

    def save_model(
        self, request: HttpRequest, obj: User, form: ModelForm[User], change: bool
    ) -> None:
        """Edits on the change form go through the same rules as the actions, audited."""
        if not change:
            super().save_model(request, obj, form, change)
            return
        account_edit(user=obj, changed=set(form.changed_data), actor=actor_of(request))

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        account_delete_by_administrator(user=obj, actor=actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_delete_by_administrator(user=user, actor=actor_of(request))

    @admin.action(
        description="Reset two-factor (second factor and recovery codes off; the person is told)"
    )
    def reset_two_factor(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        users = queryset.filter(kind=User.Kind.USER)
        for user in users:
            two_factor_reset(user=user, actor=actor_of(request))
        count = users.count()
        self.message_user(
            request,
            ngettext(
                "Two-factor sign-in of %(count)s user is reset.",
                "Two-factor sign-in of %(count)s users is reset.",
                count,
            )
            % {"count": count},
        )

    @admin.action(description="Rotate adapter password (shown once, here)")
    def rotate_adapter_password(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for adapter in queryset.filter(kind=User.Kind.ADAPTER):
            password = adapter_password_rotate(adapter=adapter, actor=actor_of(request))
            self.message_user(
                request,
                _("New password of %(login)s: %(password)s")
                % {"login": adapter.username, "password": password},
                messages.WARNING,
            )

    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": ("username", "email", "usable_password", "password1", "password2"),
            },
        ),
    )


def actor_of(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None
