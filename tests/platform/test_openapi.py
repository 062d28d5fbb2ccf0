"""The OpenAPI document adapter developers generate clients from, and its browsable page."""

from __future__ import annotations

from typing import Any

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
    ("get", "/api/users/adapters"): {200, 400, 401, 403, 429},
    ("post", "/api/users/adapters"): {201, 400, 401, 403, 409, 429},
    ("patch", "/api/users/adapters/{adapter_id}"): {200, 400, 401, 403, 404, 429},
    ("delete", "/api/users/adapters/{adapter_id}"): {200, 400, 401, 403, 404, 429},
    ("post", "/api/users/adapters/{adapter_id}/password"): {200, 400, 401, 403, 404, 429},
    ("post", "/api/users/adapters/{adapter_id}/purge"): {200, 400, 401, 403, 404, 429},
    ("post", "/api/users/adapters/{adapter_id}/routes"): {200, 201, 400, 401, 403, 404, 429},
    ("delete", "/api/users/adapters/{adapter_id}/routes/{sender_id}"): {
        200,
        400,
        401,
        403,
        404,
        429,
    },
    ("get", "/api/exchange/whoami"): {200, 400, 401, 403, 429},
    ("get", "/api/exchange/messages"): {200, 400, 401, 403, 429},
    ("post", "/api/exchange/messages"): {200, 201, 400, 401, 403, 409, 413, 429},
    ("post", "/api/exchange/messages/batch"): {200, 400, 401, 403, 413, 429},
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
    ("get", "/api/users/me"): {200, 400, 401, 403, 429},
    ("patch", "/api/users/me"): {200, 400, 401, 403, 429},
    ("get", "/api/users/sessions"): {200, 400, 401, 403, 429},
    ("delete", "/api/users/sessions/{session_id}"): {200, 400, 401, 403, 404, 429},
    ("patch", "/api/users/two-factor-authentication"): {200, 400, 401, 403, 409, 429},
    ("delete", "/api/users/two-factor-authentication"): {200, 400, 401, 403, 429},
    ("post", "/api/users/two-factor-authentication/confirm"): {200, 400, 401, 403, 409, 429},
    ("post", "/api/users/two-factor-authentication/resend"): {200, 400, 401, 403, 404, 429},
    ("post", "/api/users/two-factor-authentication/totp"): {200, 400, 401, 403, 429},
    ("post", "/api/users/two-factor-authentication/totp/confirm"): {200, 400, 401, 403, 429},
    ("post", "/api/users/two-factor-authentication/recovery-codes"): {
        200,
        400,
        401,
        403,
        409,
        429,
    },
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


def operations_of(document: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each operation of ``document`` by its operationId: its path and the operation itself."""
    return {
        operation["operationId"]: (path, operation)
        for path, operations in document["paths"].items()
        for operation in operations.values()
    }


def header(operation: dict[str, Any], name: str) -> dict[str, Any] | None:
    parameters = operation.get("parameters", [])
    return next((p for p in parameters if p["in"] == "header" and p["name"] == name), None)


# The operations outside /api/exchange/ and /api/users/ whose answer depends on X-Device-ID:
# they sign in (the session starts bound to the device), refresh or end a session.
DEVICE_BOUND_AUTH_OPERATIONS = {
    "login_email",
    "login_username",
    "login_two_factor_confirm",
    "register_verify_email_confirm",
    "token_refresh",
    "logout",
}


def test_every_operation_whose_answer_depends_on_the_device_declares_x_device_id(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())
    taking_a_token = {
        operation_id
        for operation_id, (path, _) in operations.items()
        if path.startswith(("/api/exchange/", "/api/users/"))
    }

    declared = {
        operation_id: parameter
        for operation_id, (_, operation) in operations.items()
        if (parameter := header(operation, "X-Device-ID")) is not None
    }

    assert set(declared) == taking_a_token | DEVICE_BOUND_AUTH_OPERATIONS
    for operation_id, parameter in declared.items():
        # Optional: without it the session is bound to a fingerprint of User-Agent and client IP.
        assert parameter.get("required", False) is False
        assert parameter["schema"] == {
            "type": "string",
            "minLength": 1,
            "maxLength": 128,
            "pattern": r"^[\x20-\x7e]+$",
        }
        # A malformed one is 400 VALIDATION_FAILED, also where nothing else could be.
        _, operation = operations[operation_id]
        assert "application/problem+json" in operation["responses"]["400"]["content"]


def test_only_send_declares_idempotency_key(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    declared = {
        operation_id: parameter
        for operation_id, (_, operation) in operations.items()
        if (parameter := header(operation, "Idempotency-Key")) is not None
    }

    assert list(declared) == ["exchange_send"]
    assert declared["exchange_send"]["schema"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": r"^[\x21-\x7e]+$",
    }


def test_the_bearer_scheme_is_required_by_every_operation_that_takes_a_token_and_no_other(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    security = {
        operation_id: operation.get("security")
        for operation_id, (_, operation) in operations.items()
    }

    # /api/auth/* signs in with a password, a code or a refresh token in the body: no security
    # requirement at all, so that generated clients call them without a token.
    assert security == {
        operation_id: None if path.startswith("/api/auth/") else [{"accessToken": []}]
        for operation_id, (path, _) in operations.items()
    }


# Generated clients are named after these: openapi-python-client writes api/<tag>/<operationId>.py
# for each operation and models/<component>.py for each component. A renamed or removed one breaks
# every generated client (docs/adapters.md, "Generating a client"); a new one is added here.
OPERATION_TAGS = {
    "adapters_create": "adapters",
    "adapters_delete": "adapters",
    "adapters_list": "adapters",
    "adapters_password_rotate": "adapters",
    "adapters_purge": "adapters",
    "adapters_routes_grant": "adapters",
    "adapters_routes_withdraw": "adapters",
    "adapters_update": "adapters",
    "exchange_ack": "exchange",
    "exchange_ack_one": "exchange",
    "exchange_lease": "exchange",
    "exchange_nack": "exchange",
    "exchange_send_batch": "exchange",
    "exchange_receive": "exchange",
    "exchange_send": "exchange",
    "exchange_stats": "exchange",
    "exchange_whoami": "exchange",
    "login_email": "auth",
    "login_two_factor_confirm": "auth",
    "login_two_factor_resend": "auth",
    "login_username": "auth",
    "logout": "auth",
    "register": "registration",
    "register_verify_email_confirm": "registration",
    "register_verify_email_resend": "registration",
    "reset_password": "password reset",
    "reset_password_confirm": "password reset",
    "reset_password_resend": "password reset",
    "token_refresh": "auth",
    "users_change_password": "profile",
    "users_me": "profile",
    "users_me_update": "profile",
    "users_sessions": "sessions",
    "users_sessions_revoke": "sessions",
    "users_two_factor_confirm": "two-factor",
    "users_two_factor_disable": "two-factor",
    "users_two_factor_enable": "two-factor",
    "users_two_factor_resend": "two-factor",
    "users_two_factor_recovery_codes": "two-factor",
    "users_two_factor_totp": "two-factor",
    "users_two_factor_totp_confirm": "two-factor",
}
COMPONENTS = {
    "AckInputRequest",
    "AckOutput",
    "AdapterCreateInputRequest",
    "AdapterCredentialsOutput",
    "AdapterListOutput",
    "AdapterOutput",
    "AdapterPasswordOutput",
    "PurgedOutput",
    "AdapterUpdateInputRequest",
    "ChallengeOutput",
    "ChangePasswordInputRequest",
    "ConfirmInputRequest",
    "ConfirmMethodEnum",
    "ConfirmedOutput",
    "DeliveryOutput",
    "KindEnum",
    "LeaseInputRequest",
    "LoginEmailInputRequest",
    "LoginSuccessOutput",
    "LoginUsernameInputRequest",
    "ProblemOutput",
    "ProfileInputRequest",
    "QueueOutput",
    "ReceiveOptionsRequest",
    "ReceiveOutput",
    "RefreshTokenInputRequest",
    "RegisterInputRequest",
    "ReleaseInputRequest",
    "ResendInputRequest",
    "ResendOutput",
    "ResetPasswordConfirmInputRequest",
    "ResetPasswordInputRequest",
    "ResultOutput",
    "ResultsOutput",
    "RouteCreateInput",
    "RouteCreateInputRequest",
    "SendBatchInputRequest",
    "SendBatchItemInputRequest",
    "SendBatchOutput",
    "SendBatchResultOutput",
    "SendBatchStatusEnum",
    "SendInputRequest",
    "SentOutput",
    "SessionListOutput",
    "SessionOutput",
    "StatsOutput",
    "TokenPairOutput",
    "TwoFactorOutput",
    "UserDtoOutput",
    # Second factors (issue 21).
    "NullEnum",
    "RecoveryCodesOutput",
    "TotpConfirmInputRequest",
    "TotpStartOutput",
    "TwoFactorEnabledOutput",
    "TwoFactorMethodEnum",
    "WhoAmIOutput",
}
BREAKING = (
    "{gone} no longer in the schema: generated clients are named after operation ids, their tags "
    "and component names, so a rename or removal breaks every client generated from the schema "
    "(docs/adapters.md). Keep the old name (drf-spectacular's operation_id, the serializer's class "
    "name), or release it as a breaking change and update this list."
)


def test_no_operation_id_tag_or_component_name_that_generated_clients_use_is_renamed(client):
    document = client.get("/api/schema/?format=json").json()
    tags = {
        operation_id: operation["tags"]
        for operation_id, (_, operation) in operations_of(document).items()
    }
    components = set(document["components"]["schemas"])

    gone = {
        *(f"{i} ({tag})" for i, tag in OPERATION_TAGS.items() if tags.get(i) != [tag]),
        *(COMPONENTS - components),
    }
    assert not gone, BREAKING.format(gone=", ".join(sorted(gone)))
    new = {*(set(tags) - set(OPERATION_TAGS)), *(components - COMPONENTS)}
    assert not new, f"New in the schema: {', '.join(sorted(new))}. Add them to this test's lists."
