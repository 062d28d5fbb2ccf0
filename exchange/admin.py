from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import ngettext_lazy

from accounts.models import User
from exchange.models import DeadLetter, Message, Route, Subscription, Topic
from exchange.services.dead_letters import dead_letters_redrive

REDRIVEN = ngettext_lazy(
    "%(count)s message back in its queue.", "%(count)s messages back in their queues.", "count"
)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The queue is the exchange API's: the admin looks, and acts only through services."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "message_id",
        "recipient",
        "sender_id",
        "type",
        "enqueued_at",
        "receive_count",
        "visible_at",
    )
    list_select_related = ("recipient",)
    search_fields = ("=message_id", "recipient__username", "type")
    list_filter = ("type",)
    show_full_result_count = False  # counting a million waiting rows on every page is wasted


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    list_display = ("message_id", "recipient", "type", "receive_count", "dead_at", "reason")
    list_select_related = ("recipient",)
    search_fields = ("=message_id", "recipient__username", "type")
    actions = ["redrive"]

    @admin.action(description="Send back to the queue with a fresh delivery budget")
    def redrive(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        revived = 0
        owners = User.objects.filter(adapters__in=queryset.values("recipient")).distinct()
        for owner in owners:
            ids = list(queryset.filter(recipient__owner=owner).values_list("message_id", flat=True))
            revived += len(dead_letters_redrive(owner=owner, message_ids=ids))
        self.message_user(request, REDRIVEN % {"count": revived})


@admin.register(Route)
class RouteAdmin(admin.ModelAdmin[Route]):
    list_display = ("sender", "recipient", "granted_by", "created_at")
    list_select_related = ("sender", "recipient", "granted_by")
    search_fields = ("sender__username", "recipient__username")
    raw_id_fields = ("sender", "recipient", "granted_by")


class SubscriptionInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Subscription
    fields = ("adapter", "types", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Topic)
class TopicAdmin(ReadOnlyAdmin):
    """Topics are their owners' (the cabinet and /api/users/topics): the admin looks, and may
    delete one (its grants and subscriptions with it; copies already queued stay)."""

    list_display = ("name", "owner", "created_at")
    list_select_related = ("owner",)
    search_fields = ("name", "owner__email")
    inlines = [SubscriptionInline]
