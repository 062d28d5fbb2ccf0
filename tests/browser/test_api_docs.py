"""The API reference at /api/docs/ in Chromium: Swagger UI's "Try it out" signs the demo adapter
in with a device id, authorizes with the returned access token, and calls whoami from the same
device. Every operation of a session declares X-Device-ID, so the page has a field for it on whoami
too; without one there, the call came from the browser's fingerprint and answered DEVICE_MISMATCH.
"""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import Locator, Page, expect

from accounts.management.commands.seed_demo import DEMO_ADAPTER_LOGIN

pytestmark = pytest.mark.browser

DEVICE_ID = "swagger-try-out-1"


def demo_adapter_password(settings: Any, kept: Path) -> str:
    """The demo adapter's password, as `make run` prints it (seed_demo, keeping it in ``kept``)."""
    settings.DEBUG = True  # seed_demo refuses to print passwords otherwise
    printed = StringIO()
    call_command("seed_demo", "--credentials", str(kept), stdout=printed)
    found = re.search(rf"login {DEMO_ADAPTER_LOGIN}\s+password (\S+)", printed.getvalue())
    assert found is not None, printed.getvalue()
    return found.group(1)


def try_out(page: Page, tag: str, operation_id: str) -> Locator:
    """The operation's block, opened, in "Try it out" mode (Swagger UI ids it by tag and id)."""
    operation = page.locator(f"#operations-{tag}-{operation_id}")
    operation.locator(".opblock-summary").click()
    operation.get_by_role("button", name="Try it out").click()
    return operation


def execute(operation: Locator) -> tuple[str, Any]:
    """Execute the tried-out operation: the status and the JSON body that the page shows."""
    operation.get_by_role("button", name="Execute").click()
    answer = operation.locator(".live-responses-table tbody tr.response")
    expect(answer).to_be_visible()
    status = answer.locator(".response-col_status").inner_text().strip()
    body = answer.locator(".response-col_description pre").first.inner_text()
    return status, json.loads(body)


def test_swagger_ui_signs_an_adapter_in_authorizes_and_calls_whoami_from_the_same_device(
    page: Page, settings: Any, tmp_path: Path
) -> None:
    password = demo_adapter_password(settings, tmp_path / "demo-accounts.json")
    page.goto("/api/docs/")

    login = try_out(page, "auth", "login_username")
    login.get_by_placeholder("X-Device-ID").fill(DEVICE_ID)
    login.locator("textarea.body-param__text").fill(
        json.dumps({"username": DEMO_ADAPTER_LOGIN, "password": password})
    )
    status, signed_in = execute(login)
    assert status == "200", signed_in

    page.get_by_role("button", name="Authorize", exact=True).click()
    authorizations = page.locator(".modal-ux")  # Swagger UI's dialog has no dialog role
    authorizations.get_by_label("auth-bearer-value").fill(signed_in["accessToken"])
    authorizations.get_by_role("button", name="Apply credentials").click()
    authorizations.get_by_role("button", name="Close").click()

    whoami = try_out(page, "exchange", "exchange_whoami")
    whoami.get_by_placeholder("X-Device-ID").fill(DEVICE_ID)
    status, me = execute(whoami)

    assert status == "200", me
    assert (me["login"], me["deviceId"]) == (DEMO_ADAPTER_LOGIN, DEVICE_ID)
