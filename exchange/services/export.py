"""A person's data, exported (docs/users-api.md, "Your data"): what the platform keeps about them
and their adapters, in one JSON document. No secret and no hash: no password, token, TOTP secret,
recovery code, webhook secret or passkey key; and no message contents, which belong to their
recipients as much as to their senders."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from accounts.models import AuditEvent, Passkey, Session, User
from exchange.models import Route, Subscription, Topic, TopicPublisher, TopicSubscriber, Webhook
from platform_site.timestamps import rfc3339


def _at(value: Any) -> str | None:
    return None if value is None else rfc3339(value)


def personal_data(*, user: User) -> dict[str, Any]:
    """``user``'s account (beside the userDto the API adds), sessions, passkeys' names, audit
    events, adapters, routes, topics, subscriptions and webhooks."""
    adapters = list(User.objects.filter(owner=user).order_by("pk"))
    principals = [user.pk, *(adapter.pk for adapter in adapters)]
    routes = Route.objects.filter(Q(recipient__owner=user) | Q(sender__owner=user)).select_related(
        "recipient", "sender"
    )
    return {
        "account": {
            "language": user.language,
            "dateJoined": _at(user.date_joined),
            "lastLogin": _at(user.last_login),
        },
        "sessions": [
            {
                "sessionId": str(s.pk),
                "deviceId": s.device_id,
                "userAgent": s.user_agent,
                "ip": s.ip,
                "createdAt": _at(s.created_at),
                "lastUsedAt": _at(s.last_used_at),
                "revokedAt": _at(s.revoked_at),
            }
            for s in Session.objects.filter(user=user).order_by("created_at")
        ],
        "passkeys": [
            {"passkeyId": str(p.pk), "name": p.name, "createdAt": _at(p.created_at)}
            for p in Passkey.objects.filter(user=user).order_by("created_at")
        ],
        "auditEvents": [
            {
                "kind": e.kind,
                "at": _at(e.created_at),
                "principal": e.user_id,
                "ip": e.ip,
                "userAgent": e.user_agent,
                "details": e.details,
            }
            for e in AuditEvent.objects.filter(user_id__in=principals).order_by("created_at")
        ],
        "adapters": [
            {
                "adapterId": a.pk,
                "login": a.username,
                "active": a.is_active,
                "createdAt": _at(a.date_joined),
                "lastLogin": _at(a.last_login),
            }
            for a in adapters
        ],
        "routes": [
            {
                "senderAdapterId": r.sender_id,
                "senderLogin": r.sender.username,
                "recipientAdapterId": r.recipient_id,
                "recipientLogin": r.recipient.username,
                "createdAt": _at(r.created_at),
            }
            for r in routes.order_by("created_at")
        ],
        "topics": [
            {
                "topicId": t.pk,
                "name": t.name,
                "createdAt": _at(t.created_at),
                "publishers": sorted(
                    TopicPublisher.objects.filter(topic=t).values_list("adapter_id", flat=True)
                ),
                "subscribers": sorted(
                    TopicSubscriber.objects.filter(topic=t).values_list("adapter_id", flat=True)
                ),
            }
            for t in Topic.objects.filter(owner=user).order_by("pk")
        ],
        "subscriptions": [
            {"topicId": s.topic_id, "adapterId": s.adapter_id, "types": s.types}
            for s in Subscription.objects.filter(adapter__owner=user).order_by("topic_id")
        ],
        "webhooks": [
            {"adapterId": w.adapter_id, "url": w.url, "enabled": w.enabled}
            for w in Webhook.objects.filter(adapter__owner=user).order_by("adapter_id")
        ],
    }
