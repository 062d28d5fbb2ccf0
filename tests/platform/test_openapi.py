"""The OpenAPI document adapter developers generate clients from, and its browsable page."""

from __future__ import annotations

import yaml
from django.contrib.staticfiles import finders
from openapi_spec_validator import validate


def test_schema_is_valid_openapi_3(client):
    response = client.get("/api/schema/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    document = yaml.safe_load(response.content)
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Exchange platform API"
    validate(document)


def test_schema_is_served_as_json_on_request(client):
    response = client.get("/api/schema/?format=json")

    assert response.status_code == 200
    validate(response.json())


def test_docs_page_renders_swagger_ui_from_the_platforms_own_static_files(client):
    response = client.get("/api/docs/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn.jsdelivr.net" not in html
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


CONTRACT = {
    ("post", "/api/auth/login/email"): {200, 400, 401, 403, 409, 423, 428, 429},
    ("post", "/api/auth/login/username"): {200, 400, 401, 403, 409, 423, 428, 429},
    ("post", "/api/auth/refresh"): {200, 400, 401, 429},
    ("post", "/api/auth/logout"): {200, 400, 401, 429},
    ("get", "/api/users/adapters"): {200, 401, 403, 429},
    ("post", "/api/users/adapters"): {201, 400, 401, 403, 409, 429},
    ("patch", "/api/users/adapters/{adapter_id}"): {200, 400, 401, 403, 404, 429},
    ("delete", "/api/users/adapters/{adapter_id}"): {200, 401, 403, 404, 429},
    ("post", "/api/users/adapters/{adapter_id}/password"): {200, 401, 403, 404, 429},
    ("post", "/api/users/adapters/{adapter_id}/routes"): {200, 201, 400, 401, 403, 404, 429},
    ("delete", "/api/users/adapters/{adapter_id}/routes/{sender_id}"): {200, 401, 403, 404, 429},
    ("get", "/api/exchange/whoami"): {200, 400, 401, 403, 429},
    ("get", "/api/exchange/messages"): {200, 400, 401, 403, 429},
    ("post", "/api/exchange/messages"): {200, 201, 400, 401, 403, 409, 413, 429},
    ("post", "/api/exchange/messages/ack"): {200, 400, 401, 403, 429},
    ("post", "/api/exchange/messages/{message_id}/ack"): {200, 400, 401, 403, 404, 429},
    ("post", "/api/exchange/messages/nack"): {200, 400, 401, 403, 429},
    ("post", "/api/exchange/messages/lease"): {200, 400, 401, 403, 429},
    ("get", "/api/exchange/stats"): {200, 400, 401, 403, 429},
    ("post", "/api/auth/login/two-factor/confirm"): {200, 400, 401, 403, 429},
    ("post", "/api/auth/login/two-factor/resend"): {200, 400, 404, 429},
    ("post", "/api/auth/register"): {200, 400, 409, 429},
    ("post", "/api/auth/register/verify-email/confirm"): {200, 400, 401, 403, 428, 429},
    ("post", "/api/auth/register/verify-email/resend"): {200, 400, 404, 429},
    ("post", "/api/auth/reset-password"): {200, 400, 429},
    ("post", "/api/auth/reset-password/confirm"): {200, 400, 429},
    ("post", "/api/auth/reset-password/resend"): {200, 400, 404, 429},
    ("patch", "/api/users/change-password"): {200, 400, 401, 403, 423, 429},
    ("get", "/api/users/me"): {200, 401, 403, 429},
    ("patch", "/api/users/me"): {200, 400, 401, 403, 429},
    ("get", "/api/users/sessions"): {200, 401, 403, 429},
    ("delete", "/api/users/sessions/{session_id}"): {200, 401, 403, 404, 429},
    ("patch", "/api/users/two-factor-authentication"): {200, 400, 401, 403, 409, 429},
    ("delete", "/api/users/two-factor-authentication"): {200, 401, 403, 429},
    ("post", "/api/users/two-factor-authentication/confirm"): {200, 400, 401, 403, 429},
    ("post", "/api/users/two-factor-authentication/resend"): {200, 400, 401, 403, 404, 429},
}


def test_the_schema_lists_every_endpoint_with_its_error_responses(client):
    paths = client.get("/api/schema/?format=json").json()["paths"]

    documented = {
        (method, path): {int(status) for status in operation["responses"]}
        for path, operations in paths.items()
        for method, operation in operations.items()
    }

    assert documented == CONTRACT


def test_errors_are_documented_as_problem_json(client):
    document = client.get("/api/schema/?format=json").json()
    refused = document["paths"]["/api/auth/login/username"]["post"]["responses"]["423"]

    assert refused["content"] == {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemOutput"}}
    }
    assert document["components"]["securitySchemes"]["accessToken"]["scheme"] == "bearer"
