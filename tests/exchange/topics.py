"""What the topics' tests share: a topic made through the API, a signed-in adapter, a publish."""

from __future__ import annotations

from typing import Any

from accounts.models import User
from tests.conftest import ApiClient
from tests.factories import DEFAULT_PASSWORD

TOPICS = "/api/users/topics"


def cabinet_of(user: User) -> ApiClient:
    client = ApiClient(device_id=f"browser-{user.pk}")
    response = client.call(
        "post", "/api/auth/login/email", {"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200, response.content
    client.tokens = response.json()
    return client


def adapter_client(adapter: User) -> ApiClient:
    client = ApiClient(device_id=f"device-{adapter.pk}")
    assert client.sign_in(adapter.username).status_code == 200
    return client


def topic_create(cabinet: ApiClient, name: str = "prices") -> int:
    response = cabinet.call("post", TOPICS, {"name": name})
    assert response.status_code == 201, response.content
    topic_id: int = response.json()["topicId"]
    return topic_id


def subscribe(cabinet: ApiClient, topic_id: int, adapter: User, **body: Any) -> Any:
    return cabinet.call(
        "post", f"{TOPICS}/{topic_id}/subscriptions", {"adapterId": adapter.pk, **body}
    )


def publish(client: ApiClient, topic_id: int, payload: Any = None, **extra: Any) -> Any:
    body = {"type": extra.pop("type", "price.changed"), "payload": payload or {"n": 1}}
    return client.call("post", f"/api/exchange/topics/{topic_id}/messages", body, **extra)
