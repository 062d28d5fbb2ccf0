"""``exchange-client``'s subcommands of one API operation each, run as real processes against the
live platform (gunicorn over a PostgreSQL of this module's own): receive prints messages as JSON
lines; ack, nack and extend settle them by id or receipt handle, from arguments or from receive's
lines on standard input; send-batch sends a JSON line each and prints a result each; logout ends
the session of a refresh token. Every subcommand signs out when it ends, and so does the library's
consume(). A wrong base URL fails with one line naming the address, without a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from exchange_client import ExchangeClient

from platform_site.embedded import free_port
from tests.clients.conftest import EXCHANGE_CLIENT, cli_env, query, run_cli, stock
from tests.clients.test_cli import MESSAGE_MEMBERS, acknowledged, sessions_of
from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase, wait_until

pytestmark = pytest.mark.stack


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def revoked(database: StackDatabase, adapter: Adapter) -> list[str | None]:
    rows = query(
        database,
        "SELECT revoked_reason FROM accounts_session WHERE user_id = %s ORDER BY created_at",
        adapter.adapter_id,
    )
    return [reason for (reason,) in rows]


def test_receive_prints_each_message_as_a_json_line_and_ack_reads_them_back(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-receiver")
    ids = stock(stack_database, adapter, 3)
    env = cli_env(gunicorn.base_url, adapter, "cli-receiver-1")

    received = run_cli("receive", "--max", "2", "--lease", "600", env=env)
    acked = run_cli("ack", "-", env=env, stdin=received.stdout)
    again = run_cli("ack", ids[0], env=env)
    rest = run_cli("receive", "--max", "10", "--wait", "1", env=env)
    held = run_cli("receive", env=env)

    for done in (received, acked, again, rest, held):
        assert (done.returncode, done.stderr) == (0, ""), done
    messages = json_lines(received.stdout)
    assert [message["messageId"] for message in messages] == ids[:2]
    assert [list(message) for message in messages] == [MESSAGE_MEMBERS] * 2
    assert [message["payload"] for message in messages] == [{"n": 1}, {"n": 2}]
    assert json_lines(acked.stdout) == [
        {"messageId": ids[0], "status": "acked"},
        {"messageId": ids[1], "status": "acked"},
    ]
    assert json_lines(again.stdout) == [{"messageId": ids[0], "status": "alreadyAcked"}]
    [third] = json_lines(rest.stdout)
    assert (third["messageId"], third["deliveryCount"]) == (ids[2], 1)
    # Received and not settled: the same device id's next receive gets it back at once.
    [third_again] = json_lines(held.stdout)
    assert (third_again["messageId"], third_again["deliveryCount"]) == (ids[2], 2)
    assert acknowledged(stack_database, adapter) == dict.fromkeys(ids[:2], 1)
    # Five commands, five sessions, each ended when its command did.
    assert revoked(stack_database, adapter) == ["logout"] * 5


def test_nack_gives_a_message_back_and_extend_holds_one_longer_by_receipt_handle(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-settler")
    first, second = stock(stack_database, adapter, 2)
    env = cli_env(gunicorn.base_url, adapter, "cli-settler-1")
    received = json_lines(run_cli("receive", "--max", "2", "--lease", "60", env=env).stdout)
    handles = {message["messageId"]: message["receiptHandle"] for message in received}

    released = run_cli("nack", handles[first], env=env)
    extended = run_cli("extend", "--lease", "3600", "-", env=env, stdin=json.dumps(received[1]))
    leased = query(
        stack_database,
        "SELECT visible_at > now() + interval '50 minutes' FROM exchange_message "
        "WHERE message_id = %s",
        second,
    )
    lost = run_cli("nack", handles[first], env=env)
    back = run_cli("receive", "--max", "10", env=env)

    for done in (released, extended, lost, back):
        assert (done.returncode, done.stderr) == (0, ""), done
    assert json_lines(released.stdout) == [{"messageId": first, "status": "released"}]
    assert json_lines(extended.stdout) == [{"messageId": second, "status": "extended"}]
    assert leased == [(True,)]
    # A receipt handle settles its delivery once.
    assert json_lines(lost.stdout) == [{"messageId": first, "status": "leaseLost"}]
    again = {message["messageId"]: message["deliveryCount"] for message in json_lines(back.stdout)}
    assert again[first] == 2


def test_nack_with_a_delay_keeps_the_message_back_until_it_passes(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-delayer")
    [message_id] = stock(stack_database, adapter, 1)
    env = cli_env(gunicorn.base_url, adapter, "cli-delayer-1")
    received = run_cli("receive", env=env).stdout

    released = run_cli("nack", "--delay", "3600", "-", env=env, stdin=received)
    stats = json.loads(run_cli("stats", env=env).stdout)

    assert json_lines(released.stdout) == [{"messageId": message_id, "status": "released"}]
    assert (stats["available"], stats["delayed"]) == (0, 1)
    assert run_cli("receive", env=env).stdout == ""


def test_send_batch_sends_a_message_per_line_and_prints_a_result_per_line(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    sender = owner.create_adapter("cli-batcher")
    recipient = owner.create_adapter("cli-batch-recipient")
    env = cli_env(gunicorn.base_url, sender, "cli-batcher-1")
    batch = tmp_path / "orders.jsonl"
    batch.write_text(
        "\n".join(
            json.dumps(item)
            for item in (
                {"to": recipient.adapter_id, "type": "order", "payload": {"n": 1}},
                {"to": 999999, "type": "order", "payload": {"n": 2}},
                {
                    "to": recipient.adapter_id,
                    "type": "order",
                    "payload": {"n": 3},
                    "headers": {"trace-id": "t3"},
                    "idempotencyKey": "order-3",
                },
            )
        )
        + "\n"
    )

    first = run_cli("send-batch", str(batch), env=env)
    again = run_cli("send-batch", "-", env=env, stdin=batch.read_text().splitlines()[2] + "\n")

    assert first.returncode == 1  # one message refused
    assert first.stderr == ""
    sent, refused, keyed = json_lines(first.stdout)
    assert sent == {"messageId": sent["messageId"], "duplicate": False}
    assert refused == {
        "error": {"status": 403, "code": "SEND_NOT_ALLOWED", "detail": refused["error"]["detail"]}
    }
    assert keyed == {"messageId": keyed["messageId"], "duplicate": False}
    assert (again.returncode, again.stderr) == (0, "")
    assert json_lines(again.stdout) == [{"messageId": keyed["messageId"], "duplicate": True}]
    queued = query(
        stack_database,
        "SELECT message_id::text, headers FROM exchange_message WHERE recipient_id = %s "
        "ORDER BY seq",
        recipient.adapter_id,
    )
    assert queued == [(sent["messageId"], {}), (keyed["messageId"], {"trace-id": "t3"})]


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ('{"to": 1, "type": "t"}\n', "exchange-client: standard input, line 1: no 'payload'"),
        ('{"to": 1, "type": "t", "payload": 1}\n[]\n', "line 2: not a JSON object"),
        ('{"to": 1, "type": "t", "payload": 1, "delay": 5}\n', "line 1: unknown member 'delay'"),
        ("\n", "exchange-client: standard input has no message"),
    ],
)
def test_send_batch_refuses_a_malformed_line_before_signing_in(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, lines: str, reason: str
) -> None:
    adapter = owner.create_adapter(f"cli-bad-batch-{abs(hash(lines)) % 10_000}")

    done = run_cli(
        "send-batch", "-", env=cli_env(gunicorn.base_url, adapter, "cli-bad"), stdin=lines
    )

    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()
    assert reason in line
    assert sessions_of(stack_database, adapter) == []


def test_logout_ends_the_session_of_a_refresh_token_without_signing_in(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-logout")
    signed_in = httpx.post(
        f"{gunicorn.base_url}/api/auth/login/username",
        json={"username": adapter.login, "password": adapter.password},
        headers={"X-Device-ID": "another-program"},
    ).json()
    env = {
        key: value
        for key, value in cli_env(gunicorn.base_url, adapter, "cli-logout-1").items()
        if key not in ("EXCHANGE_LOGIN", "EXCHANGE_PASSWORD")
    }

    done = run_cli("logout", "-", env=env, stdin=signed_in["refreshToken"] + "\n")
    refreshed = httpx.post(
        f"{gunicorn.base_url}/api/auth/refresh",
        json={"refreshToken": signed_in["refreshToken"]},
        headers={"X-Device-ID": "another-program"},
    )

    assert (done.returncode, done.stdout, done.stderr) == (0, "{}\n", "")
    assert refreshed.status_code == 401
    assert sessions_of(stack_database, adapter) == ["another-program"]
    assert revoked(stack_database, adapter) == ["logout"]


def test_the_librarys_consume_signs_out_when_it_stops(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("lib-consumer")
    stock(stack_database, adapter, 3)
    handled: list[str] = []

    with ExchangeClient(
        gunicorn.base_url, adapter.login, adapter.password, device_id="lib-consumer-1"
    ) as client:
        for _ in range(2):  # a consumer restarted on the same client
            client.consume(lambda message: handled.append(message.message_id), until_empty=True)

    assert len(handled) == 3
    assert revoked(stack_database, adapter) == ["logout", "logout"]


def unused_address() -> str:
    """A loopback port nothing listens on."""
    port = free_port()
    assert not listening(port)
    return f"http://127.0.0.1:{port}"


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wrong_env(address: str) -> dict[str, str]:
    return {
        **{key: value for key, value in os.environ.items() if not key.startswith("EXCHANGE_")},
        "EXCHANGE_URL": address,
        "EXCHANGE_LOGIN": "someone",
        "EXCHANGE_PASSWORD": "anything",
    }


@pytest.mark.parametrize("address", [unused_address(), "http://exchange.invalid"])
def test_a_wrong_base_url_fails_within_30_seconds_with_one_line_naming_it(address: str) -> None:
    env = wrong_env(address)

    # The timeout is the bound: retrying for a minute, as before, fails the test.
    done = subprocess.run(
        [str(EXCHANGE_CLIENT), "whoami"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )

    assert (done.returncode, done.stdout) == (1, "")
    [line] = done.stderr.splitlines()
    assert line.startswith(f"exchange-client: CONNECTION_FAILED: no answer from {address}: ")
    assert "Traceback" not in done.stderr


def test_an_address_where_something_else_answers_fails_with_one_line_saying_so(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: listening(port), timeout=30, what="a web server that is not the platform"
        )
        done = run_cli("whoami", env=wrong_env(f"http://127.0.0.1:{port}"))
    finally:
        server.terminate()
        server.wait(timeout=30)

    assert (done.returncode, done.stdout) == (1, "")
    [line] = done.stderr.splitlines()
    assert line.startswith("exchange-client: 501 HTTP_501: "), line
    assert line.endswith(
        f"http://127.0.0.1:{port}/api/auth/login/username answered 501 without problem details: "
        "is this the platform's address?"
    ), line
