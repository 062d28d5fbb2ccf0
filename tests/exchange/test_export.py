"""A person's data, exported (GET /api/users/me/export, docs/users-api.md "Your data"): all of
it, and no secret or hash."""

from __future__ import annotations

from typing import Any

import pyotp
import pytest

from accounts.models import RecoveryCode, User
from exchange.services.routes import route_grant
from exchange.services.topics import subscription_put, topic_create
from exchange.services.webhooks import webhook_put
from tests.accounts.api import signed_in
from tests.factories import AdapterFactory, UserFactory

pytestmark = pytest.mark.django_db

EMAIL = "grace@example.com"


@pytest.fixture
def grace(db: Any) -> User:
    return UserFactory.create(username="grace", email=EMAIL)


def test_the_export_has_every_part_and_no_secret(grace):
    erp = AdapterFactory.create(owner=grace, username="erp")
    partner = AdapterFactory.create(owner=UserFactory.create(), username="partner")
    route_grant(recipient=erp, sender_id=partner.pk, granted_by=grace)
    hook = webhook_put(adapter=erp, url="https://hooks.example.org/erp")
    topic = topic_create(owner=grace, name="prices")
    subscription_put(user=grace, topic=topic, adapter_id=erp.pk, types=["price"])
    client = signed_in(EMAIL)
    started = client.call("post", "/api/users/two-factor-authentication/totp").json()
    client.call(
        "post",
        "/api/users/two-factor-authentication/totp/confirm",
        {"requestId": started["requestId"], "token": pyotp.TOTP(started["secret"]).now()},
    )

    response = client.call("get", "/api/users/me/export")

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="personal-data.json"'
    data = response.json()
    assert list(data) == [
        "profile",
        "account",
        "sessions",
        "passkeys",
        "auditEvents",
        "adapters",
        "routes",
        "topics",
        "subscriptions",
        "webhooks",
    ]
    assert data["profile"]["email"] == EMAIL
    assert [a["login"] for a in data["adapters"]] == ["erp"]
    assert [(r["senderLogin"], r["recipientLogin"]) for r in data["routes"]] == [("partner", "erp")]
    assert data["topics"][0]["name"] == "prices"
    assert data["subscriptions"] == [{"topicId": topic.pk, "adapterId": erp.pk, "types": ["price"]}]
    assert data["webhooks"] == [
        {"adapterId": erp.pk, "url": "https://hooks.example.org/erp", "enabled": True}
    ]
    assert len(data["sessions"]) == 1
    assert {"SIGN_IN", "TWO_FACTOR_ENABLED"} <= {e["kind"] for e in data["auditEvents"]}
    text = response.content.decode()
    secrets = [
        User.objects.get(pk=grace.pk).password,
        hook.secret,
        started["secret"],
        *RecoveryCode.objects.filter(user=grace).values_list("code_hash", flat=True),
        client.tokens["refreshToken"],
    ]
    assert [secret for secret in secrets if secret and secret in text] == []


def test_another_persons_data_is_not_in_it(grace):
    other = UserFactory.create(email="mallory@example.com")
    AdapterFactory.create(owner=other, username="mallory-erp")
    topic_create(owner=other, name="secret-prices")

    text = signed_in(EMAIL).call("get", "/api/users/me/export").content.decode()

    assert "mallory" not in text
    assert "secret-prices" not in text
