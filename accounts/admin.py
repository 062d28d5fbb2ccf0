from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm, UsernameField
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import Session, SignInGate, User
from accounts.services.accounts import account_set_active
from accounts.services.adapters import adapter_password_rotate
from accounts.services.lockout import gate_unlock
from accounts.services.sessions import session_revoke, sessions_revoke_for_user


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


@admin.register(User)
class UserAdmin(DjangoUserAdmin[User]):
    form = PlatformUserChangeForm
    add_form = PlatformUserCreationForm
    list_display = (
        "username",
        "email",
        "kind",
        "owner",
        "is_active",
        "is_staff",
        "email_confirmed",
        "two_factor_enabled",
        "last_login",
    )
    list_filter = (
        "kind",
        "is_active",
        "is_staff",
        "email_confirmed",
        "two_factor_enabled",
        "reset_password_required",
    )
    search_fields = ("username", "email", "first_name", "last_name", "phone")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    ordering = ("username",)
    fieldsets = (
        (None, {"fields": ("username", "password", "kind", "owner")}),
        ("Profile", {"fields": ("email", "first_name", "last_name", "phone")}),
        (
            "Security",
            {
                "fields": (
                    "is_active",
                    "email_confirmed",
                    "two_factor_enabled",
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
    readonly_fields = ("password_changed_at", "last_login", "date_joined")
    actions = ["revoke_sessions", "unlock", "disable", "enable", "rotate_adapter_password"]

    @admin.action(description="Revoke all sessions (their tokens stop working at once)")
    def revoke_sessions(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        ended = sum(sessions_revoke_for_user(user=user, reason="admin") for user in queryset)
        self.message_user(request, f"{ended} sessions revoked.")

    @admin.action(description="Unlock (clear consecutive wrong passwords)")
    def unlock(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            gate_unlock(user=user)
        self.message_user(request, f"{queryset.count()} accounts unlocked.")

    @admin.action(description="Disable (and end their sessions)")
    def disable(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_set_active(user=user, active=False)
        self.message_user(request, f"{queryset.count()} accounts disabled.")

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            account_set_active(user=user, active=True)
        self.message_user(request, f"{queryset.count()} accounts enabled.")

    @admin.action(description="Rotate adapter password (shown once, here)")
    def rotate_adapter_password(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for adapter in queryset.filter(kind=User.Kind.ADAPTER):
            password = adapter_password_rotate(adapter=adapter)
            self.message_user(
                request, f"New password of {adapter.username}: {password}", messages.WARNING
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


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin[Session]):
    list_display = (
        "id",
        "user",
        "device_id",
        "ip",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ("revoked_reason", "user__kind")
    search_fields = ("user__username", "user__email", "device_id", "ip")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    readonly_fields = [field.name for field in Session._meta.fields]
    actions = ["revoke"]

    @admin.action(description="Revoke (their tokens stop working at once)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        ended = sum(session_revoke(session_id=session.pk, reason="admin") for session in queryset)
        self.message_user(request, f"{ended} sessions revoked.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(SignInGate)
class SignInGateAdmin(admin.ModelAdmin[SignInGate]):
    list_display = ("key", "failures", "locked_until", "updated_at")
    search_fields = ("key",)
    readonly_fields = ("key", "failures", "locked_until", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
