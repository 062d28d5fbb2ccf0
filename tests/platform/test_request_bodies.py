"""Every JSON body the API can be sent, whatever its top-level value, is answered and counted.

The operations come from the OpenAPI schema itself, so an endpoint added later is covered too:
each one that takes a body answers a non-object JSON value with 400 VALIDATION_FAILED and counts
the request against its rate limits; each one that takes none is not troubled by one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from accounts.models import Session
from exchange.models import Message, Topic
from tests.conftest import ApiClient
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db

NOT_OBJECTS = ["[]", "[null]", '"x"', "1", "null", "true"]


def operations(schema: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(method, path template, takes a body) of every operation under /api/ but the schema's."""
    return [
        (method, path, "requestBody" in operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if path.startswith("/api/") and not path.startswith("/api/schema")
    ]


@pytest.fixture
def schema(client: Any) -> dict[str, Any]:
    document: dict[str, Any] = client.get("/api/schema/?format=json").json()
    return document


@pytest.fixture
def principals(owner: Any, adapter: Any, consumer: ApiClient, cabinet: ApiClient) -> Any:
    """A client for each kind of path, and real ids for the path parameters."""
    sender = AdapterFactory.create(owner=owner)
    topic = Topic.objects.create(owner=owner, name="prices")
    session = Session.objects.filter(user=owner).first()
    assert session is not None
    ids = {
        "adapter_id": adapter.pk,
        "sender_id": sender.pk,
        "session_id": session.pk,
        "message_id": "4b5ad8e4-9a5e-4bd7-9c0f-7c3b7f0c3d6e",
        "topic_id": topic.pk,
        "passkey_id": "0c2d0a4e-7b4f-4d9b-8d52-3d1c9f0e6a11",
    }

    def client_for(path: str) -> ApiClient:
        if path.startswith("/api/exchange/"):
            return consumer
        if path.startswith("/api/users/"):
            return cabinet
        return ApiClient(device_id="anonymous-1")

    return client_for, ids


def as_json(value: Any) -> str:
    """JSON text of ``value``, with an infinite float written as the number 1e400 (which
    Python's JSON reads as inf), as an attacker would send it."""
    return json.dumps(value).replace("Infinity", "1e400")


def post_raw(client: ApiClient, method: str, path: str, body: str) -> Any:
    return getattr(client, method)(
        path, data=body, content_type="application/json", **client._headers({})
    )


def test_the_schema_has_operations_with_and_without_bodies(schema):
    found = operations(schema)

    assert len([op for op in found if op[2]]) >= 20
    assert any(not takes_body for _, _, takes_body in found)


@pytest.mark.parametrize("body", NOT_OBJECTS)
def test_every_operation_with_a_body_answers_a_non_object_with_400_and_counts_it(
    schema, principals, body
):
    client_for, ids = principals
    for method, template, takes_body in operations(schema):
        if not takes_body:
            continue
        path = template.format(**ids)
        client = client_for(template)

        first = post_raw(client, method, path, body)
        second = post_raw(client, method, path, body)

        where = f"{method.upper()} {path} with {body}"
        assert first.status_code == 400, (where, first.content)
        assert first["Content-Type"] == "application/problem+json", where
        assert first.json()["code"] == "VALIDATION_FAILED", (where, first.json())
        remaining = [int(r["X-Rate-Limit-Remaining"]) for r in (first, second)]
        assert remaining[1] < remaining[0], (where, remaining)


@pytest.mark.parametrize("body", NOT_OBJECTS)
def test_an_operation_without_a_body_is_not_troubled_by_one(schema, principals, body):
    client_for, ids = principals
    for method, template, takes_body in operations(schema):
        if takes_body or method in {"get", "delete"}:
            continue
        path = template.format(**ids)

        response = post_raw(client_for(template), method, path, body)

        assert response.status_code < 500, (method, path, body, response.content)
        assert response["Content-Type"] in {"application/json", "application/problem+json"}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/auth/login/email", "email"),
        ("/api/auth/login/username", "username"),
        ("/api/auth/register", "email"),
        ("/api/auth/reset-password", "email"),
        ("/api/auth/login/two-factor/confirm", "requestId"),
        ("/api/auth/reset-password/resend", "requestId"),
    ],
)
def test_a_malformed_body_still_counts_against_the_client_ip(settings, path, field):
    settings.ACCOUNTS_RATE_LIMIT_IP = "2/m"
    client = ApiClient(device_id="anonymous-1")

    answers = [post_raw(client, "post", path, '{"' + field + '": ') for _ in range(3)]

    assert [a.status_code for a in answers] == [400, 400, 429], [a.content for a in answers]
    assert answers[0].json()["code"] == "MALFORMED_JSON"
    assert json.loads(answers[2].content)["code"] == "RATE_LIMITED"


WRONG_TYPES = {
    "string": [0, 1e400, True, ["x"], {"x": "y"}],
    "integer": ["12", 12.0, 1.5, True, [1]],
    "boolean": [0, 1, "true", "yes", [True]],
}


def request_properties(schema: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    content = operation["requestBody"]["content"]["application/json"]["schema"]
    name = content["$ref"].rsplit("/", 1)[1]
    properties: dict[str, Any] = schema["components"]["schemas"][name]["properties"]
    return properties


def test_every_request_body_is_closed_in_the_schema_as_the_server_closes_it(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            content = operation["requestBody"]["content"]["application/json"]["schema"]
            name = content["$ref"].rsplit("/", 1)[1]
            component = schema["components"]["schemas"][name]
            assert component["additionalProperties"] is False, (method, path)
            assert "Base of every request serializer" not in component.get("description", "")


def test_every_string_integer_and_boolean_field_refuses_another_json_type(
    schema, principals, settings
):
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_USER = "10000/m"
    settings.EXCHANGE_RATE_LIMIT = "10000/m"
    client_for, ids = principals
    checked = 0
    for template, item in schema["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            for field, spec in request_properties(schema, operation).items():
                for value in WRONG_TYPES.get(spec.get("type"), []):
                    path = template.format(**ids)
                    response = post_raw(client_for(template), method, path, as_json({field: value}))

                    where = (method, path, field, value)
                    assert response.status_code == 400, (where, response.content)
                    assert field in response.json().get("errors", {}), (where, response.json())
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize("number", ["1e400", "-1e400", "[1e999]", "[[2E+308]]"])
def test_every_field_refuses_a_number_beyond_a_double_with_400_on_that_field(
    schema, principals, settings, number
):
    """Python reads 1e400 as infinity, which PostgreSQL's json cannot store: whatever the field's
    type, the answer is a 400 that names it, never a 500."""
    settings.ACCOUNTS_RATE_LIMIT_IP = settings.ACCOUNTS_RATE_LIMIT_USER = "10000/m"
    settings.EXCHANGE_RATE_LIMIT = "10000/m"
    client_for, ids = principals
    checked = 0
    for template, item in schema["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            for field in request_properties(schema, operation):
                path = template.format(**ids)
                response = post_raw(client_for(template), method, path, f'{{"{field}": {number}}}')

                where = (method, path, field)
                assert response.status_code == 400, (where, response.content)
                assert response.json()["code"] == "VALIDATION_FAILED", (where, response.json())
                errors = response.json()["errors"]
                named = [key for key in errors if re.split(r"[\[.]", key)[0] == field]
                assert named, (where, response.json())
                checked += 1
    assert checked > 40


def test_a_single_send_with_a_payload_beyond_a_double_is_400_on_payload(consumer, adapter):
    for payload in ("1e400", "[1, -1e400]", '{"price": 1.5e999}'):
        body = f'{{"to": {adapter.pk}, "type": "t", "payload": {payload}}}'

        response = post_raw(consumer, "post", "/api/exchange/messages", body)

        assert response.status_code == 400, response.content
        assert response.json()["code"] == "VALIDATION_FAILED"
        assert list(response.json()["errors"]) == ["payload"]
    assert not Message.objects.exists()


MESSAGES = {
    "active": "Must be a valid boolean.",
    "lastName": "Not a valid string.",
    "firstName": "Not a valid string.",
}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/users/adapters/{adapter_id}", {"active": 0}, "active"),
        ("/api/users/me", {"lastName": 0}, "lastName"),
        ("/api/users/me", {"firstName": 1e400}, "firstName"),
    ],
)
def test_coercions_the_fuzzer_found_are_refused_and_store_nothing(
    principals, owner, adapter, path, body, field
):
    client_for, ids = principals

    response = post_raw(client_for(path), "patch", path.format(**ids), as_json(body))

    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_FAILED"
    assert response.json()["errors"][field] == [MESSAGES[field]]
    owner.refresh_from_db()
    adapter.refresh_from_db()
    assert (owner.first_name, owner.last_name, adapter.is_active) == ("Ada", "Lovelace", True)


def test_a_string_header_value_stays_strict_inside_a_dict(consumer, adapter):
    body = {"to": adapter.pk, "type": "t", "payload": {}, "headers": {"trace": 1}}

    response = consumer.call("post", "/api/exchange/messages", body)

    assert response.status_code == 400
    assert response.json()["errors"] == {"headers.trace": ["Not a valid string."]}


def test_a_patch_body_keeps_its_required_fields_in_the_schema(schema):
    operation = schema["paths"]["/api/users/change-password"]["patch"]
    content = operation["requestBody"]["content"]["application/json"]["schema"]
    component = schema["components"]["schemas"][content["$ref"].rsplit("/", 1)[1]]

    assert sorted(component["required"]) == ["confirmPassword", "currentPassword", "newPassword"]


def test_the_headers_rules_are_in_the_schema(schema):
    login = schema["paths"]["/api/auth/login/username"]["post"]["parameters"]
    send = schema["paths"]["/api/exchange/messages"]["post"]["parameters"]
    device = next(p for p in login if p["name"] == "X-Device-ID")["schema"]
    key = next(p for p in send if p["name"] == "Idempotency-Key")["schema"]

    assert (device["minLength"], device["maxLength"]) == (1, 128)
    assert (key["minLength"], key["maxLength"]) == (1, 255)


def test_a_string_is_taken_as_sent_and_not_trimmed_into_a_blank(consumer, adapter):
    body = {"to": adapter.pk, "type": " ", "payload": {}}

    sent = consumer.call("post", "/api/exchange/messages", body)
    received = consumer.call("get", "/api/exchange/messages")

    assert sent.status_code == 201, sent.content
    assert received.json()["messages"][0]["type"] == " "


def test_names_are_still_stored_trimmed_by_the_profile_service(cabinet, owner):
    response = cabinet.call("patch", "/api/users/me", {"firstName": "  Grace  "})

    assert response.json()["firstName"] == "Grace"
