"""One JSON log line per request, with a request id the caller may choose and always gets back."""

from __future__ import annotations

import json
import logging
import re
import sys

import pytest

from platform_site.observability import (
    JsonLogFormatter,
    RequestIdLogFilter,
    _template,
    request_id_var,
)

pytestmark = pytest.mark.django_db


def request_lines(caplog):
    return [record for record in caplog.records if record.name == "platform.request"]


def test_a_well_formed_request_id_is_kept_and_echoed(client):
    response = client.get("/api/actuator/health", HTTP_X_REQUEST_ID="edge-7f3a:42")

    assert response["X-Request-ID"] == "edge-7f3a:42"


@pytest.mark.parametrize(
    "offered",
    ["", "x" * 129, "two words", 'evil"}\n{"level":"CRITICAL', "тест"],
    ids=["empty", "too-long", "space", "log-injection", "non-ascii"],
)
def test_an_unusable_request_id_is_replaced_by_a_fresh_one(client, offered):
    response = client.get("/api/actuator/health", HTTP_X_REQUEST_ID=offered)

    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_every_request_gets_its_own_id(client):
    first = client.get("/api/actuator/health/ping")["X-Request-ID"]
    second = client.get("/api/actuator/health/ping")["X-Request-ID"]

    assert first != second


def test_each_request_is_logged_once_with_method_route_status_duration_and_id(client, caplog):
    with caplog.at_level(logging.INFO, logger="platform.request"):
        response = client.get("/api/actuator/health/ping", HTTP_X_REQUEST_ID="req-1")

    [line] = request_lines(caplog)
    assert line.getMessage() == "GET /api/actuator/health/ping 200"
    assert line.method == "GET"
    assert line.path == "/api/actuator/health/ping"
    assert line.route == "/api/actuator/health/{path}"
    assert line.status == 200
    assert line.durationMs >= 0
    assert line.requestId == "req-1" == response["X-Request-ID"]


def test_errors_are_logged_with_their_status_and_route(client, caplog):
    with caplog.at_level(logging.INFO, logger="platform.request"):
        client.get("/api/no-such-endpoint")

    [line] = request_lines(caplog)
    assert (line.status, line.route) == (404, "NOT_FOUND")


def test_log_records_made_during_a_request_carry_its_id():
    log_filter = RequestIdLogFilter()
    token = request_id_var.set("abc123")
    try:
        inside = logging.LogRecord("any", logging.INFO, __file__, 1, "inside", None, None)
        log_filter.filter(inside)
    finally:
        request_id_var.reset(token)
    outside = logging.LogRecord("any", logging.INFO, __file__, 1, "outside", None, None)
    log_filter.filter(outside)

    assert inside.__dict__["requestId"] == "abc123"
    assert outside.__dict__["requestId"] is None


def test_the_formatter_writes_one_json_object_per_line():
    record = logging.LogRecord(
        "platform.request", logging.INFO, __file__, 1, "GET %s", ("/x",), None
    )
    record.created = 1_795_253_400.25  # 2026-11-21T09:30:00.250Z
    record.status = 200
    record.requestId = "r-1"

    line = JsonLogFormatter().format(record)

    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-11-21T09:30:00.250Z",
        "level": "INFO",
        "logger": "platform.request",
        "message": "GET /x",
        "status": 200,
        "requestId": "r-1",
    }


def test_exceptions_are_logged_as_one_line_with_the_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, None)

        record.exc_info = sys.exc_info()

    line = JsonLogFormatter().format(record)

    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exc_info"]


@pytest.mark.parametrize(
    ("route", "template"),
    [
        ("api/actuator/health", "/api/actuator/health"),
        (
            "api/users/adapters/<int:adapter_id>/routes/<sender>",
            "/api/users/adapters/{adapter_id}/routes/{sender}",
        ),
        ("api/exchange/messages/<uuid:message_id>/ack", "/api/exchange/messages/{message_id}/ack"),
        ("^static/(?P<path>.*)$", "/static/{path}"),
        ("", "root"),
    ],
)
def test_routes_become_spring_uri_templates(route, template):
    assert _template(route) == template
