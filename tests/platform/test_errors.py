"""Every API failure answers RFC 9457 problem+json with a stable code; nothing else leaks out."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.urls("tests.platform.urls")

PROBLEM = "application/problem+json"


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = json.loads(response.content)
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["code"] == code
    assert isinstance(body["title"], str)
    assert body["title"]
    assert isinstance(body["detail"], str)
    assert body["detail"]
    return body


@pytest.fixture
def api() -> Client:
    return Client(raise_request_exception=False)


def post_json(client: Client, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", **extra)


def test_valid_body_passes_through(api):
    response = post_json(api, "/api/shapes", {"name": "triangle", "sides": 3})

    assert response.status_code == 201
    assert response.json() == {"name": "triangle", "sides": 3}


def test_invalid_fields_answer_validation_failed_with_errors_by_field(api):
    response = post_json(api, "/api/shapes", {"name": "x" * 21, "sides": 2})

    body = problem(response, 400, "VALIDATION_FAILED")
    assert body == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "Some fields are invalid; see errors.",
        "code": "VALIDATION_FAILED",
        "errors": {
            "name": ["Ensure this field has no more than 20 characters."],
            "sides": ["Ensure this value is greater than or equal to 3."],
        },
    }


def test_nested_field_errors_are_named_by_their_path(api):
    response = post_json(api, "/api/shapes", {"name": "t", "sides": 3, "origin": {"x": "left"}})

    body = problem(response, 400, "VALIDATION_FAILED")
    assert body["errors"] == {
        "origin.x": ["A valid integer is required."],
        "origin.y": ["This field is required."],
    }


@pytest.mark.parametrize(
    ("payload", "errors"),
    [
        ([1, 2], {"nonFieldErrors": ["Invalid data. Expected a dictionary, but got list."]}),
        ("text", {"nonFieldErrors": ["Invalid data. Expected a dictionary, but got str."]}),
        (
            {"name": ["a"], "sides": "many"},
            {"name": ["Not a valid string."], "sides": ["A valid integer is required."]},
        ),
        (
            {"name": "t", "sides": 10**30},
            {"sides": ["Ensure this value is less than or equal to 9223372036854775807."]},
        ),
    ],
)
def test_wrong_types_are_validation_errors_not_server_errors(api, payload, errors):
    response = post_json(api, "/api/shapes", payload)

    assert problem(response, 400, "VALIDATION_FAILED")["errors"] == errors


def test_unknown_field_is_refused_instead_of_ignored(api):
    response = post_json(api, "/api/shapes", {"name": "t", "sides": 3, "isStaff": True})

    body = problem(response, 400, "UNKNOWN_FIELD")
    assert body["errors"] == {"isStaff": ["This field is not accepted."]}


def test_unknown_nested_field_is_named_by_its_path(api):
    response = post_json(
        api, "/api/shapes", {"name": "t", "sides": 3, "origin": {"x": 1, "y": 2, "z": 3}}
    )

    body = problem(response, 400, "UNKNOWN_FIELD")
    assert body["errors"] == {"origin.z": ["This field is not accepted."]}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": ',
        b'{"name": "t", "sides": 3,}',
        b"\xff\xfe{}",
        b'{"name": "t", "sides": NaN}',
        b'{"name": "t", "name": "u", "sides": 3}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"name": "t", "sides": 3, "payload": ' + b"[" * 65 + b"]" * 65 + b"}",
        b'{"name": "t", "sides": 1' + b"0" * 5000 + b"}",
    ],
    ids=[
        "truncated",
        "trailing-comma",
        "not-utf8",
        "nan",
        "duplicate-key",
        "deep-nesting",
        "nesting-over-limit",
        "huge-integer",
    ],
)
def test_malformed_json_is_a_400(api, raw):
    response = api.post("/api/shapes", raw, content_type="application/json")

    problem(response, 400, "MALFORMED_JSON")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "a\\u0000b", "sides": 3}',
        b'{"name": "t", "sides": 3, "payload": {"k": ["ok", "\\u0000"]}}',
        b'{"name": "t", "sides": 3, "payload": {"\\u0000": 1}}',
        b'{"name": "t", "sides": 3, "payload": "\\ud800"}',
        b'{"name": "t", "sides": 3, "payload": ["x\\uDFFFx"]}',
        b'{"name": "a\x00b", "sides": 3}',
        b'{"name": "t", "sides": 3, "payload": "\xed\xa0\x80"}',
    ],
    ids=[
        "nul-in-field",
        "nul-in-json-payload",
        "nul-in-key",
        "lone-surrogate",
        "lone-surrogate-upper-hex",
        "raw-nul-byte",
        "raw-surrogate-bytes",
    ],
)
def test_strings_postgresql_cannot_store_are_a_400(api, raw):
    response = api.post("/api/shapes", raw, content_type="application/json")

    problem(response, 400, "MALFORMED_JSON")


def test_escapes_and_nesting_within_the_limits_pass(api):
    payload = b'["\\ud83d\\ude00 \\u00e9 \\\\u0000", ' + b"[" * 62 + b"]" * 62 + b"]"
    raw = b'{"name": "t", "sides": 3, "payload": ' + payload + b"}"

    response = api.post("/api/shapes", raw, content_type="application/json")

    assert response.status_code == 201
    assert response.json()["payload"][0] == "\U0001f600 \u00e9 \\u0000"


def test_body_over_the_limit_is_refused_before_it_is_read(api, settings):
    settings.HTTP_MAX_BODY_BYTES = 2048
    body = {"name": "t", "sides": 3, "payload": "x" * 4096}

    response = post_json(api, "/api/shapes", body)

    problem(response, 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize(
    ("language", "title"),
    [("en", "Content Too Large"), ("ru", "Слишком большое тело запроса")],
)
def test_a_body_over_the_limit_is_titled_as_rfc_9110_names_413_in_the_clients_language(
    api, settings, language, title
):
    settings.HTTP_MAX_BODY_BYTES = 2048
    body = {"name": "t", "sides": 3, "payload": "x" * 4096}

    response = post_json(api, "/api/shapes", body, HTTP_ACCEPT_LANGUAGE=language)

    assert problem(response, 413, "PAYLOAD_TOO_LARGE")["title"] == title


@pytest.mark.parametrize(
    ("language", "body", "errors"),
    [
        ("en", {"tags": []}, {"tags": ["Ensure this field has at least 1 element."]}),
        (
            "en",
            {"tags": ["a", "b", "c"]},
            {"tags": ["Ensure this field has no more than 2 elements."]},
        ),
        ("en", {"tags": ["ab"]}, {"tags[0]": ["Ensure this field has no more than 1 character."]}),
        ("ru", {"tags": []}, {"tags": ["Поле должно содержать хотя бы 1 элемент."]}),
        (
            "ru",
            {"tags": ["a", "b", "c"]},
            {"tags": ["Поле может содержать не больше 2 элементов."]},
        ),
        ("ru", {"tags": ["ab"]}, {"tags[0]": ["Поле может содержать не больше 1 символа."]}),
        ("ru", {"name": "x" * 21}, {"name": ["Поле может содержать не больше 20 символов."]}),
    ],
)
def test_length_errors_count_their_elements_and_characters_in_the_clients_language(
    api, language, body, errors
):
    response = post_json(
        api, "/api/shapes", {"name": "t", "sides": 3, **body}, HTTP_ACCEPT_LANGUAGE=language
    )

    assert problem(response, 400, "VALIDATION_FAILED")["errors"] == errors


def test_huge_string_within_the_body_limit_is_a_validation_error(api):
    response = post_json(api, "/api/shapes", {"name": "x" * 100_000, "sides": 3})

    assert problem(response, 400, "VALIDATION_FAILED")["errors"] == {
        "name": ["Ensure this field has no more than 20 characters."]
    }


def test_body_that_is_not_json_is_unsupported_media_type(api):
    response = api.post("/api/shapes", "name=t&sides=3", content_type="text/plain")

    problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_accept_that_cannot_be_served_is_not_acceptable(api):
    response = api.get("/api/forbidden", HTTP_ACCEPT="text/html")

    problem(response, 406, "NOT_ACCEPTABLE")


def test_missing_credentials_are_a_401_with_a_challenge(api):
    response = api.get("/api/private")

    problem(response, 401, "TOKEN_MISSING")
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_forbidden_is_a_403(api):
    problem(api.get("/api/forbidden"), 403, "PERMISSION_DENIED")


@pytest.mark.parametrize("debug", [False, True])
def test_unknown_api_path_is_a_404_problem_even_in_debug(api, settings, debug):
    settings.DEBUG = debug

    problem(api.get("/api/no/such/thing"), 404, "NOT_FOUND")


def test_wrong_method_is_a_405_that_names_the_allowed_ones(api):
    response = api.put("/api/shapes", "{}", content_type="application/json")

    problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response["Allow"] == "POST, OPTIONS"


def test_application_error_members_are_top_level(api):
    body = problem(api.get("/api/locked"), 423, "ACCOUNT_LOCKED")

    assert body == {
        "type": "about:blank",
        "title": "Locked",
        "status": 423,
        "detail": "The account is locked.",
        "code": "ACCOUNT_LOCKED",
        "lockedUntil": "2026-11-21T09:30:00Z",
    }


def test_rate_limited_request_is_a_429_that_is_not_cached(api):
    assert api.get("/api/limited").status_code == 200

    response = api.get("/api/limited")

    problem(response, 429, "RATE_LIMITED")
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/api/broken", "/api/broken-plain"])
def test_unhandled_exception_is_a_500_without_internals_even_in_debug(
    api, settings, caplog, debug, path
):
    settings.DEBUG = debug

    with caplog.at_level(logging.ERROR, logger="platform_site.errors"):
        response = api.get(path)

    body = problem(response, 500, "INTERNAL_ERROR")
    assert "secret internals" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert body["detail"] == "The server failed to handle this request; it has been logged."
    logged = [record for record in caplog.records if record.name == "platform_site.errors"]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert "secret internals" in str(logged[0].exc_info[1])


def test_a_lost_database_connection_is_a_503_to_retry_not_a_500(api, caplog):
    with caplog.at_level(logging.WARNING, logger="platform_site.errors"):
        response = api.get("/api/database-down")

    body = problem(response, 503, "SERVICE_UNAVAILABLE")
    assert response["Retry-After"] == "1"
    assert "administrator command" not in body["detail"]
    [record] = [record for record in caplog.records if record.name == "platform_site.errors"]
    assert record.levelno == logging.WARNING


def test_pages_outside_the_api_keep_html(api):
    assert api.get("/page")["Content-Type"].startswith("text/html")
    missing = api.get("/no-such-page")
    assert missing.status_code == 404
    assert missing["Content-Type"].startswith("text/html")


def test_a_request_django_refuses_itself_is_a_400_problem(api):
    response = api.get("/api/shapes", HTTP_HOST="evil.example")

    body = problem(response, 400, "BAD_REQUEST")
    assert body["detail"] == "The request cannot be processed."
