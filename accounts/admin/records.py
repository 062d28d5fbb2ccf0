"""The admin of what the platform records about signing in: sessions, sign-in gates, the audit
log, the outbox and challenges."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from accounts.admin.users import actor_of, sessions_revoked
from accounts.models import AuditEvent, Challenge, OutboxMessage, Session, SignInGate
from accounts.selectors import gates_with_login
from accounts.services.accounts import account_session_revoke
from accounts.services.sessions import session_delete


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
        ended = sum(
            account_session_revoke(session=session, actor=actor_of(request))
            for session in queryset.select_related("user")
        )
        self.message_user(request, sessions_revoked(ended))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        session_delete(session=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        for session in queryset:
            session_delete(session=session)


@admin.register(SignInGate)
class SignInGateAdmin(admin.ModelAdmin[SignInGate]):
    list_display = ("counts_for", "failures", "locked_until", "updated_at")
    search_fields = ("key",)
    readonly_fields = ("key", "failures", "locked_until", "updated_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SignInGate]:
        return gates_with_login(super().get_queryset(request))

    @admin.display(description=_("Counts for"), ordering="key")
    def counts_for(self, gate: SignInGate) -> str:
        """The account's login where the gate is an account's; the key itself for the others
        (an unknown identifier's, a device token's)."""
        login: str | None = getattr(gate, "login", None)
        return login or gate.key

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Records written by the platform itself: administrators read them, never edit them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "user", "actor", "identifier", "ip")
    list_filter = ("kind", "created_at")
    search_fields = ("user__username", "user__email", "actor__username", "identifier", "ip")
    list_select_related = ("user", "actor")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "channel", "to", "template", "status", "attempts", "sent_at")
    list_filter = ("status", "channel", "template")
    search_fields = ("to", "user__username", "user__email")
    exclude = ("text", "html")  # codes: readable only in DEBUG, at /dev/outbox
    ordering = ("-created_at",)


@admin.register(Challenge)
class ChallengeAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "purpose",
        "method",
        "user",
        "attempts_left",
        "expires_at",
        "used_at",
    )
    list_filter = ("purpose", "method")
    search_fields = ("user__username", "user__email", "address")
    exclude = ("code_hash",)
    ordering = ("-created_at",)
