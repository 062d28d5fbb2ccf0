"""The OpenAPI document adapter developers generate clients from, and its browsable page."""

from __future__ import annotations

from typing import Any

import yaml
from django.contrib.staticfiles import finders
from openapi_spec_validator import validate
from rest_framework.views import APIView

from accounts.api import urls as accounts_api_urls
from accounts.api.views import LoginApi
from accounts.errors import BadCredentials
from accounts.schema import BODY, EVERY_OPERATION, GUARDS, answer_of
from exchange.api import urls as exchange_api_urls
from platform_site.openapi import Declaration, answered
from platform_site.problem_titles import problem_title
from tests.problem_answers import (
    OBSERVED,
    PROBLEM_MEMBERS,
    Observed,
    described,
    generated_schema,
    undeclared,
)


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
    ("post", "/api/auth/login/email"): {200, 400, 401, 403, 406, 409, 413, 415, 423, 428, 429, 503},
    ("post", "/api/auth/login/username"): {
        200,
        400,
        401,
        403,
        406,
        409,
        413,
        415,
        423,
        428,
        429,
        503,
    },
    ("post", "/api/auth/refresh"): {200, 400, 401, 406, 413, 415, 429, 503},
    ("post", "/api/auth/logout"): {200, 400, 401, 406, 413, 415, 429, 503},
    ("get", "/api/users/adapters"): {200, 400, 401, 403, 406, 429, 503},
    ("post", "/api/users/adapters"): {201, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("patch", "/api/users/adapters/{adapter_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/adapters/{adapter_id}"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("post", "/api/users/adapters/{adapter_id}/password"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("post", "/api/users/adapters/{adapter_id}/purge"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("get", "/api/users/adapters/{adapter_id}/traffic"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("post", "/api/users/adapters/{adapter_id}/routes"): {
        200,
        201,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/adapters/{adapter_id}/routes/{sender_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("get", "/api/users/adapters/{adapter_id}/webhook"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("put", "/api/users/adapters/{adapter_id}/webhook"): {
        200,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/adapters/{adapter_id}/webhook"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("post", "/api/users/adapters/{adapter_id}/webhook/secret"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("post", "/api/users/adapters/{adapter_id}/webhook/test"): {
        202,
        400,
        401,
        403,
        404,
        406,
        409,
        429,
        503,
    },
    ("get", "/api/users/adapters/{adapter_id}/webhook/attempts"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("get", "/api/exchange/whoami"): {200, 400, 401, 403, 406, 429, 503},
    ("get", "/api/exchange/messages"): {200, 400, 401, 403, 406, 409, 429, 503},
    ("get", "/api/exchange/messages/stream"): {200, 400, 401, 403, 406, 429, 503},
    ("post", "/api/exchange/messages"): {200, 201, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("post", "/api/exchange/messages/batch"): {200, 400, 401, 403, 406, 413, 415, 429, 503},
    ("post", "/api/exchange/topics/{topic_id}/messages"): {
        200,
        201,
        400,
        401,
        403,
        404,
        406,
        409,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/exchange/topics/{topic_id}/messages/batch"): {
        200,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/auth/login/passkey"): {200, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("post", "/api/auth/login/passkey/options"): {200, 406, 429, 503},
    ("get", "/api/users/passkeys"): {200, 400, 401, 403, 406, 429, 503},
    ("post", "/api/users/passkeys"): {201, 400, 401, 403, 406, 413, 415, 429, 503},
    ("delete", "/api/users/passkeys/{passkey_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        423,
        429,
        503,
    },
    ("post", "/api/users/passkeys/registration/options"): {200, 400, 401, 403, 406, 429, 503},
    ("get", "/api/users/topics"): {200, 400, 401, 403, 406, 429, 503},
    ("post", "/api/users/topics"): {201, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("get", "/api/users/topics/{topic_id}"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("delete", "/api/users/topics/{topic_id}"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("post", "/api/users/topics/{topic_id}/publishers"): {
        200,
        201,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/topics/{topic_id}/publishers/{adapter_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("post", "/api/users/topics/{topic_id}/subscribers"): {
        200,
        201,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/topics/{topic_id}/subscribers/{adapter_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("post", "/api/users/topics/{topic_id}/subscriptions"): {
        200,
        201,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("delete", "/api/users/topics/{topic_id}/subscriptions/{adapter_id}"): {
        200,
        400,
        401,
        403,
        404,
        406,
        429,
        503,
    },
    ("post", "/api/exchange/messages/ack"): {200, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("post", "/api/exchange/messages/{message_id}/ack"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("post", "/api/exchange/messages/nack"): {200, 400, 401, 403, 406, 413, 415, 429, 503},
    ("post", "/api/exchange/messages/lease"): {200, 400, 401, 403, 406, 413, 415, 429, 503},
    ("get", "/api/exchange/stats"): {200, 400, 401, 403, 406, 429, 503},
    ("post", "/api/auth/login/two-factor/confirm"): {
        200,
        400,
        401,
        403,
        406,
        409,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/auth/login/two-factor/resend"): {200, 400, 404, 406, 413, 415, 429, 503},
    ("post", "/api/auth/register"): {200, 400, 406, 409, 413, 415, 429, 503},
    ("post", "/api/auth/register/verify-email/confirm"): {
        200,
        400,
        401,
        403,
        406,
        413,
        415,
        428,
        429,
        503,
    },
    ("post", "/api/auth/register/verify-email/resend"): {200, 400, 404, 406, 413, 415, 429, 503},
    ("post", "/api/auth/reset-password"): {200, 400, 406, 413, 415, 429, 503},
    ("post", "/api/auth/reset-password/confirm"): {200, 400, 406, 413, 415, 429, 503},
    ("post", "/api/auth/reset-password/resend"): {200, 400, 404, 406, 413, 415, 429, 503},
    ("patch", "/api/users/change-password"): {200, 400, 401, 403, 406, 413, 415, 423, 429, 503},
    ("get", "/api/users/me"): {200, 400, 401, 403, 406, 429, 503},
    ("patch", "/api/users/me"): {200, 400, 401, 403, 406, 413, 415, 429, 503},
    ("delete", "/api/users/me"): {200, 400, 401, 403, 406, 413, 415, 423, 429, 503},
    ("post", "/api/users/me/email"): {200, 400, 401, 403, 406, 409, 413, 415, 423, 429, 503},
    ("post", "/api/users/me/email/resend"): {200, 400, 401, 403, 404, 406, 413, 415, 429, 503},
    ("post", "/api/users/me/email/confirm"): {200, 400, 401, 403, 406, 409, 413, 415, 429, 503},
    ("post", "/api/users/me/reauthentication"): {200, 400, 401, 403, 406, 413, 415, 429, 503},
    ("get", "/api/users/me/export"): {200, 400, 401, 403, 406, 429, 503},
    ("get", "/api/users/sessions"): {200, 400, 401, 403, 406, 429, 503},
    ("delete", "/api/users/sessions/{session_id}"): {200, 400, 401, 403, 404, 406, 429, 503},
    ("patch", "/api/users/two-factor-authentication"): {200, 400, 401, 403, 406, 409, 429, 503},
    ("delete", "/api/users/two-factor-authentication"): {
        200,
        400,
        401,
        403,
        406,
        413,
        415,
        423,
        429,
        503,
    },
    ("post", "/api/users/two-factor-authentication/confirm"): {
        200,
        400,
        401,
        403,
        406,
        409,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/users/two-factor-authentication/resend"): {
        200,
        400,
        401,
        403,
        404,
        406,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/users/two-factor-authentication/totp"): {
        200,
        400,
        401,
        403,
        406,
        413,
        415,
        423,
        429,
        503,
    },
    ("post", "/api/users/two-factor-authentication/totp/confirm"): {
        200,
        400,
        401,
        403,
        406,
        413,
        415,
        429,
        503,
    },
    ("post", "/api/users/two-factor-authentication/recovery-codes"): {
        200,
        400,
        401,
        403,
        406,
        409,
        413,
        415,
        423,
        429,
        503,
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
        "application/problem+json": {
            "schema": {"$ref": "#/components/schemas/ProblemOutput"},
            "examples": {"ACCOUNT_LOCKED": {"$ref": "#/components/examples/AccountLocked"}},
        }
    }
    assert refused["description"] == (
        "- `ACCOUNT_LOCKED`, with `lockedUntil`: Too many wrong passwords: the account is locked."
    )
    assert document["components"]["examples"]["AccountLocked"]["value"] == {
        "type": "about:blank",
        "title": "Locked",
        "status": 423,
        "detail": "Too many wrong passwords: the account is locked until 2026-11-21T09:45:00Z.",
        "code": "ACCOUNT_LOCKED",
        "lockedUntil": "2026-11-21T09:45:00Z",
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
    "login_passkey",
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


def test_only_send_and_publish_declare_idempotency_key(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    declared = {
        operation_id: parameter
        for operation_id, (_, operation) in operations.items()
        if (parameter := header(operation, "Idempotency-Key")) is not None
    }

    assert sorted(declared) == ["exchange_publish", "exchange_send"]
    assert declared["exchange_publish"] == declared["exchange_send"]  # one namespace, one rule
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
    "adapters_traffic": "adapters",
    "adapters_routes_grant": "adapters",
    "adapters_routes_withdraw": "adapters",
    "adapters_webhook_attempts": "webhooks",
    "adapters_webhook_delete": "webhooks",
    "adapters_webhook_get": "webhooks",
    "adapters_webhook_put": "webhooks",
    "adapters_webhook_secret_rotate": "webhooks",
    "adapters_webhook_test": "webhooks",
    "adapters_update": "adapters",
    "exchange_ack": "exchange",
    "exchange_ack_one": "exchange",
    "exchange_lease": "exchange",
    "exchange_nack": "exchange",
    "exchange_publish": "exchange",
    "exchange_publish_batch": "exchange",
    "exchange_send_batch": "exchange",
    "exchange_receive": "exchange",
    "exchange_send": "exchange",
    "exchange_stats": "exchange",
    "exchange_stream": "exchange",
    "exchange_whoami": "exchange",
    "login_email": "auth",
    "login_passkey": "auth",
    "login_passkey_options": "auth",
    "login_two_factor_confirm": "auth",
    "login_two_factor_resend": "auth",
    "login_username": "auth",
    "logout": "auth",
    "passkeys_create": "passkeys",
    "passkeys_delete": "passkeys",
    "passkeys_list": "passkeys",
    "passkeys_registration_options": "passkeys",
    "register": "registration",
    "register_verify_email_confirm": "registration",
    "register_verify_email_resend": "registration",
    "reset_password": "password reset",
    "reset_password_confirm": "password reset",
    "reset_password_resend": "password reset",
    "token_refresh": "auth",
    "topics_create": "topics",
    "topics_delete": "topics",
    "topics_get": "topics",
    "topics_list": "topics",
    "topics_publishers_grant": "topics",
    "topics_publishers_revoke": "topics",
    "topics_subscribe": "topics",
    "topics_subscribers_allow": "topics",
    "topics_subscribers_disallow": "topics",
    "topics_unsubscribe": "topics",
    "users_change_password": "profile",
    "users_me": "profile",
    "users_me_update": "profile",
    "users_me_delete": "profile",
    "users_me_email": "profile",
    "users_me_email_resend": "profile",
    "users_me_email_confirm": "profile",
    "users_me_export": "profile",
    "users_reauthentication_start": "profile",
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
    "TrafficOutput",
    "TrafficPointOutput",
    "TrafficRangeEnum",
    "AccountDeleteInputRequest",
    "EmailChangeInputRequest",
    "ExportOutput",
    "ReauthInputRequest",
    "ReauthStartInputRequest",
    "TwoFactorConfirmInputRequest",
    "TwoFactorResendInputRequest",
    "TwoFactorResendOutput",
    "AckInputRequest",
    "AckOutput",
    "AdapterCreateInputRequest",
    "AdapterCredentialsOutput",
    "AdapterListOutput",
    "AdapterOutput",
    "AdapterPasswordOutput",
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
    "NullEnum",
    "ProblemOutput",
    "ProfileInputRequest",
    "PublishBatchInputRequest",
    "PublishBatchItemInputRequest",
    "PublishBatchOutput",
    "PublishBatchResultOutput",
    "PublishInputRequest",
    "PublishedOutput",
    "PurgedOutput",
    "QueueOutput",
    "ReceiveOptionsRequest",
    "ReceiveOutput",
    "RecoveryCodesOutput",
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
    "RouteSenderOutput",
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
    "SubscriptionInputRequest",
    "SubscriptionOutput",
    "TokenPairOutput",
    "TopicAdapterInput",
    "TopicAdapterInputRequest",
    "TopicAdapterOutput",
    "TopicCreateInputRequest",
    "TopicCreatedOutput",
    "TopicListOutput",
    "TopicOutput",
    "TotpConfirmInputRequest",
    "TotpStartOutput",
    "TwoFactorEnabledOutput",
    "TwoFactorMethodEnum",
    "TwoFactorOutput",
    "UserDtoOutput",
    "WebhookAttemptOutput",
    "WebhookAttemptsOutput",
    "WebhookDisabledReasonEnum",
    "WebhookInputRequest",
    "WebhookOutcomeEnum",
    "WebhookOutput",
    "WebhookSecretOutput",
    "WebhookSetOutput",
    "WebhookTestOutput",
    "WhoAmIOutput",
    "CeremonyOutput",
    "PasskeyCreateInputRequest",
    "PasskeyListOutput",
    "PasskeyOutput",
    "PasskeySignInInputRequest",
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


# Error responses: generated from what each view declares (platform_site/openapi.py) and what
# accounts/schema.py adds for the machinery around it.


def problem_codes(operation: dict[str, Any], status: int) -> dict[str, frozenset[str]]:
    """The codes the operation's ``status`` response names, each with its members."""
    return described(operation["responses"][str(status)])


def test_sign_in_names_its_own_401s_not_the_access_tokens(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    for operation_id in ("login_username", "login_email"):
        _, operation = operations[operation_id]
        assert problem_codes(operation, 401) == {
            "BAD_CREDENTIALS": frozenset(),
            "ACTION_RESET_PASSWORD": frozenset(),
        }
        assert problem_codes(operation, 409) == {
            "EMAIL_NOT_CONFIRMED": frozenset({"requestId", "retryAfterSeconds"})
        }
        assert problem_codes(operation, 428) == {
            "TWO_FACTOR_REQUIRED": frozenset(
                {"requestId", "confirmMethod", "retryAfterSeconds", "otherMethods", "options"}
            )
        }
        assert problem_codes(operation, 423) == {"ACCOUNT_LOCKED": frozenset({"lockedUntil"})}


def test_refresh_names_every_way_a_refresh_token_is_refused(client):
    _, refresh = operations_of(client.get("/api/schema/?format=json").json())["token_refresh"]

    assert set(problem_codes(refresh, 401)) == {
        "TOKEN_MALFORMED",
        "TOKEN_EXPIRED",
        "TOKEN_REVOKED",
        "DEVICE_MISMATCH",
        "REFRESH_TOKEN_REUSED",
    }
    assert "The refresh token cannot be read" in refresh["responses"]["401"]["description"]


# The operations that check an authenticator app's code: a sign-in's second step, turning the app
# on, and every proof of the owner (its ``token``).
TAKE_AN_APP_CODE = {
    "login_two_factor_confirm",
    "users_two_factor_totp_confirm",
    "users_two_factor_disable",
    "users_two_factor_totp",
    "users_two_factor_recovery_codes",
    "passkeys_delete",
    "users_me_email",
    "users_me_delete",
}


def test_an_app_code_used_before_is_declared_where_an_app_code_is_checked_and_only_there(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    declaring = {
        operation_id
        for operation_id, (_, operation) in operations.items()
        if "400" in operation["responses"] and "CODE_ALREADY_USED" in problem_codes(operation, 400)
    }

    assert declaring == TAKE_AN_APP_CODE
    _, sign_in = operations["login_two_factor_confirm"]
    assert problem_codes(sign_in, 400)["CODE_ALREADY_USED"] == frozenset({"attemptsRemaining"})


def resolved(document: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in item:
        return item
    found: dict[str, Any] = document
    for part in item["$ref"].removeprefix("#/").split("/"):
        found = found[part]
    return found


def test_every_error_response_names_its_codes_with_their_members_and_shows_each_body(client):
    document = client.get("/api/schema/?format=json").json()

    for operation_id, (_, operation) in operations_of(document).items():
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            codes = described(response)
            where = f"{operation_id} {status}"
            assert codes, where
            # One line per code, nothing else: no "Error." or "Conflict." that names none.
            assert len(response["description"].splitlines()) == len(codes), where
            content = response["content"]
            assert list(content) == ["application/problem+json"], where
            assert content["application/problem+json"]["schema"] == {
                "$ref": "#/components/schemas/ProblemOutput"
            }
            examples = content["application/problem+json"]["examples"]
            assert list(examples) == list(codes), where
            for code, example in examples.items():
                body = resolved(document, example)["value"]
                assert (body["status"], body["code"]) == (int(status), code), where
                assert body["title"] == problem_title(int(status)), where
                assert set(body) - PROBLEM_MEMBERS <= codes[code], where


# docs/sessions.md, "Reauthentication": the requests that need a fresh proof of the owner.
REAUTHENTICATED = {
    "users_two_factor_disable",
    "users_two_factor_totp",
    "users_two_factor_recovery_codes",
    "passkeys_delete",
    "users_me_email",
    "users_me_delete",
}


def test_what_the_machinery_answers_is_declared_on_every_operation_it_runs(client):
    """Once, where it applies: body parsing, X-Device-ID, the access token, rate limits, an
    unreachable database, content negotiation, a path parameter of the wrong form."""
    operations = operations_of(client.get("/api/schema/?format=json").json())

    for operation_id, (path, operation) in operations.items():
        codes = {
            int(status): set(described(response))
            for status, response in operation["responses"].items()
        }
        # A long poll may also find its server out of room for waiting (SERVER_BUSY).
        waiting = {"exchange_receive", "exchange_ack", "exchange_stream"}
        waits = {"SERVER_BUSY"} if operation_id in waiting else set()
        assert codes[503] == {"SERVICE_UNAVAILABLE", *waits}, operation_id
        assert codes[406] == {"NOT_ACCEPTABLE"}, operation_id
        assert "RATE_LIMITED" in codes[429], operation_id
        if "requestBody" in operation:
            assert {"VALIDATION_FAILED", "UNKNOWN_FIELD", "MALFORMED_JSON"} <= codes[400]
            assert codes[413] == {"PAYLOAD_TOO_LARGE"}, operation_id
            assert codes[415] == {"UNSUPPORTED_MEDIA_TYPE"}, operation_id
        if header(operation, "X-Device-ID") is not None:
            assert "VALIDATION_FAILED" in codes[400], operation_id
        if operation.get("security"):
            # A request that needs a fresh proof of the owner also checks the password it sent.
            proof = {"BAD_CREDENTIALS"} if operation_id in REAUTHENTICATED else set()
            assert codes[401] == {
                "TOKEN_MISSING",
                "TOKEN_MALFORMED",
                "TOKEN_EXPIRED",
                "TOKEN_REVOKED",
                "DEVICE_MISMATCH",
                *proof,
            }, operation_id
            if operation_id in REAUTHENTICATED:
                assert "REAUTHENTICATION_REQUIRED" in codes[403], operation_id
            assert "PERMISSION_DENIED" in codes[403], operation_id
        else:
            assert "TOKEN_MISSING" not in codes.get(401, set()), operation_id
        if "{" in path:
            assert "NOT_FOUND" in codes[404], operation_id


def test_only_the_allow_list_of_a_required_password_change_never_answers_it(client):
    operations = operations_of(client.get("/api/schema/?format=json").json())

    allowed = {
        operation_id
        for operation_id, (_, operation) in operations.items()
        if operation.get("security")
        and "PASSWORD_CHANGE_REQUIRED" not in problem_codes(operation, 403)
    }

    # docs/sessions.md: with USER_PASSWORD_RESET_REQUIRED, GET /api/users/me and
    # PATCH /api/users/change-password (refresh and logout take no access token).
    assert allowed == {"users_me", "users_change_password"}


def declarations_of(view_class: type[APIView]) -> list[Declaration]:
    handlers = [getattr(view_class, method, None) for method in view_class.http_method_names]
    return [declared for handler in handlers for declared in answered(view_class, handler)]


def test_every_declared_error_is_shown_as_the_platform_raises_it():
    views = {
        pattern.callback.cls
        for module in (accounts_api_urls, exchange_api_urls)
        for pattern in module.urlpatterns
    }
    declared = {
        *EVERY_OPERATION,
        *BODY,
        *(error for errors in GUARDS.values() for error in errors),
        *(declared for view in views for declared in declarations_of(view)),
    }

    # A class that needs arguments and has no instance in accounts.schema.EXAMPLES is left out
    # of the schema.
    assert [d for d in declared if answer_of(d) is None] == []


def test_an_integer_bounded_by_bigint_has_an_example_that_try_it_out_can_send(client):
    """Swagger UI fills "Try it out" with a field's example, else one of its own from the bounds:
    for the bigint maximum, 9223372036854776000 once JavaScript has rounded it, which the field
    refuses."""
    document = client.get("/api/schema/?format=json").json()
    schemas = document["components"]["schemas"]

    assert schemas["SendInputRequest"]["properties"]["to"]["example"] == 2
    assert schemas["SendBatchItemInputRequest"]["properties"]["to"]["example"] == 2
    assert schemas["RouteCreateInputRequest"]["properties"]["senderAdapterId"]["example"] == 2
    for name, component in schemas.items():
        for field, schema in component.get("properties", {}).items():
            if schema.get("type") == "integer" and schema.get("maximum", 0) > 2**53:
                example = schema.get("example")
                assert example is not None, (name, field)
                assert schema.get("minimum", example) <= example <= 2**53, (name, field)


def test_an_answer_the_schema_does_not_declare_fails_the_check(client, db, monkeypatch):
    response = client.post(
        "/api/auth/login/username",
        {"username": "nobody", "password": "wrong"},
        content_type="application/json",
    )
    observed = Observed("POST", "/api/auth/login/username", 401, "BAD_CREDENTIALS", frozenset())
    assert response.status_code == 401
    assert observed in OBSERVED  # recorded (tests/conftest.py), and declared:
    assert undeclared([observed], generated_schema()) == []

    # A view that no longer declares it:
    without = [error for error in vars(LoginApi)["openapi_answers"] if error is not BadCredentials]
    monkeypatch.setattr(LoginApi, "openapi_answers", tuple(without))

    assert undeclared([observed], generated_schema()) == [
        "POST /api/auth/login/username: 401 BAD_CREDENTIALS: the 401 response names "
        "ACTION_RESET_PASSWORD, not BAD_CREDENTIALS"
    ]


def test_a_status_or_member_the_schema_does_not_declare_fails_the_check():
    schema = generated_schema()
    login = "/api/auth/login/username"

    assert undeclared(
        [
            Observed("POST", login, 401, "TOKEN_MISSING", frozenset()),
            Observed("POST", login, 404, "NOT_FOUND", frozenset()),
            Observed("POST", login, 423, "ACCOUNT_LOCKED", frozenset({"lockedUntil", "x"})),
            Observed("PUT", login, 405, "METHOD_NOT_ALLOWED", frozenset()),  # no operation
        ],
        schema,
    ) == [
        "POST /api/auth/login/username: 401 TOKEN_MISSING: the 401 response names "
        "BAD_CREDENTIALS, ACTION_RESET_PASSWORD, not TOKEN_MISSING",
        "POST /api/auth/login/username: 404 NOT_FOUND: status 404 is not among the operation's "
        "responses",
        "POST /api/auth/login/username: 423 ACCOUNT_LOCKED with lockedUntil, x: the 423 response "
        "names no member x for ACCOUNT_LOCKED",
    ]


def test_a_delete_that_takes_a_proof_of_the_owner_shows_its_body(client):
    """accounts.schema.PlatformAutoSchema._get_request_body: drf-spectacular shows no DELETE
    body by itself; this fails if the library changes under that override."""
    document = client.get("/api/schema/?format=json").json()
    delete_me = document["paths"]["/api/users/me"]["delete"]
    turn_off = document["paths"]["/api/users/two-factor-authentication"]["delete"]
    plain = document["paths"]["/api/users/adapters/{adapter_id}"]["delete"]

    body = resolved(document, delete_me["requestBody"]["content"]["application/json"]["schema"])
    assert delete_me["requestBody"]["required"] is True
    assert body["required"] == ["password"]
    assert {"password", "token", "credential", "requestId"} <= set(body["properties"])
    assert "required" not in turn_off["requestBody"]  # every proof is optional there
    assert "requestBody" not in plain
