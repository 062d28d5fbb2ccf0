"""docs/adapters.md's command lines of every operation (the block `client-cli-operations`) run as
printed, against the live server, with only BASE, LOGIN and PASSWORD set: send-batch, receive,
ack, extend, nack, stream, stats and logout, each printing what the guide shows."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from accounts.models import Session
from accounts.services.adapters import AdapterCredentials, adapter_create
from exchange.models import DeliveryLog, Message
from tests.exchange.test_adapters_guide import environment, runnable, with_the_client_installed
from tests.factories import UserFactory

# As the guide's other examples: the live server's long polls and streams run in this process.
pytestmark = [pytest.mark.usefixtures("long_polls"), pytest.mark.slow]


@pytest.mark.django_db(transaction=True)
def test_the_guides_command_lines_of_every_operation_run_as_printed(
    live_server: LiveServer, tmp_path: Path
):
    credentials: AdapterCredentials = adapter_create(owner=UserFactory.create(), login="erp-bridge")

    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", runnable("client-cli-operations", "sh")],
        cwd=tmp_path,
        env=with_the_client_installed(environment(live_server, credentials)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    sent, acked, extended, released = lines[:3], lines[3], lines[4], lines[5]
    assert [line["duplicate"] for line in sent] == [False, False, False]
    ids = [line["messageId"] for line in sent]
    leased = [json.loads(line) for line in (tmp_path / "leased.jsonl").read_text().splitlines()]
    assert [message["messageId"] for message in leased] == ids
    assert (acked, extended["status"], released["status"]) == (
        {"messageId": ids[0], "status": "acked"},
        "extended",
        "released",
    )
    assert (extended["messageId"], released["messageId"]) == (ids[1], ids[2])
    assert sorted(lines[6:8], key=lambda line: line["n"]) == [
        {"event": "message", "type": "demo.batch", "n": 2},
        {"event": "message", "type": "demo.batch", "n": 3},
    ]
    assert lines[8:] == [
        {"available": 0, "inFlight": 0, "delayed": 0, "deadLettered": 0, "oldestAgeSeconds": None},
        {},
    ]
    assert Message.objects.count() == 0
    assert set(
        DeliveryLog.objects.filter(recipient_id=credentials.adapter_id).values_list(
            "message_id", flat=True
        )
    ) == {uuid.UUID(message_id) for message_id in ids}
    # Every command ended its session; logout ended the other program's.
    sessions = Session.objects.filter(user_id=credentials.adapter_id)
    assert set(sessions.values_list("revoked_reason", flat=True)) == {"logout"}
    assert sessions.filter(device_id="another-program").count() == 1
