"""The ``exchange-client`` command against the live platform (gunicorn over a PostgreSQL of this
module's own), run as a real process with EXCHANGE_URL, EXCHANGE_LOGIN, EXCHANGE_PASSWORD and
EXCHANGE_DEVICE_ID: whoami, send, publish, stats, consume --exec (acknowledging, releasing a failed
message, stopping on SIGTERM mid-batch and giving back what it held), stream (JSON lines,
acknowledged once printed or not at all, the end event of a replaced stream), and the exit
statuses (2 a usage error, 3 sign-in refused with a one-line reason, also when the owner rotates
the password under a running consume, 1 any other refusal)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from exchange_client import ExchangeClient

from exchange.delivery_queries import DELIVERY_MEMBERS
from tests.clients.conftest import (
    EXCHANGE_CLIENT,
    cli_env,
    query,
    run_cli,
    stock,
    subscribe,
    topic_create,
)
from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase, wait_until

pytestmark = pytest.mark.stack

# The members of a received message, in the order the platform sends them: their one definition.
MESSAGE_MEMBERS = [name for name, _, _ in DELIVERY_MEMBERS]
# A handler that takes as long as the test wants: it notes the message when it starts, waits for
# the file "go" in its working directory, and notes the message again when it finishes.
GATED_COMMAND = (
    'cat >/dev/null; echo "$EXCHANGE_MESSAGE_ID" >>started.log; '
    "while [ ! -e go ]; do sleep 0.05; done; "
    'echo "$EXCHANGE_MESSAGE_ID" >>finished.log'
)
LONG_LEASE = "3600"  # no lease runs out during a test: whatever comes back was given back


def sessions_of(database: StackDatabase, adapter: Adapter) -> list[str]:
    """The device ids of the adapter's sessions, oldest first."""
    rows = query(
        database,
        "SELECT device_id FROM accounts_session WHERE user_id = %s ORDER BY created_at",
        adapter.adapter_id,
    )
    return [device for (device,) in rows]


def acknowledged(database: StackDatabase, adapter: Adapter) -> dict[str, int]:
    """The delivery log of the adapter's queue: message id -> deliveries before its ACK."""
    rows = query(
        database,
        "SELECT message_id::text, receive_count FROM exchange_delivery_log WHERE recipient_id = %s",
        adapter.adapter_id,
    )
    assert len(rows) == len(dict(rows)), rows  # logged once each
    return dict(rows)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_whoami_prints_the_adapters_identity_as_one_json_object(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-whoami")

    done = run_cli("whoami", env=cli_env(gunicorn.base_url, adapter, "cli-whoami-1"))

    assert (done.returncode, done.stderr) == (0, "")
    [line] = done.stdout.splitlines()
    body = json.loads(line)
    assert set(body) == {
        "adapterId",
        "login",
        "ownerId",
        "sessionId",
        "deviceId",
        "accessTokenExpiresAt",
    }
    assert body["adapterId"] == adapter.adapter_id
    assert body["login"] == "cli-whoami"
    assert body["ownerId"] == owner.user_id
    assert body["deviceId"] == "cli-whoami-1"
    # One sign-in, from the configured device id, signed out when the command ended.
    assert sessions_of(stack_database, adapter) == ["cli-whoami-1"]
    assert query(
        stack_database,
        "SELECT revoked_reason FROM accounts_session WHERE user_id = %s",
        adapter.adapter_id,
    ) == [("logout",)]


def test_send_prints_the_message_id_and_duplicate_and_queues_the_payload_headers_and_type(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    sender = owner.create_adapter("cli-sender")
    recipient = owner.create_adapter("cli-recipient")
    env = cli_env(gunicorn.base_url, sender, "cli-sender-1")
    order = (
        "send",
        "--to",
        str(recipient.adapter_id),
        "--type",
        "order.created",
        "--idempotency-key",
        "order-1001-created",
        "--header",
        "trace-id=abc",
        "--header",
        "query=a=b",
        '{"orderId": 1001}',
    )

    first = run_cli(*order, env=env)
    again = run_cli(*order, env=env)
    piped = run_cli(
        "send",
        "--to",
        str(recipient.adapter_id),
        "--type",
        "order.note",
        "-",
        env=env,
        stdin='{"note": "from standard input", "lines": ["ä", 2, null]}\n',
    )

    for done in (first, again, piped):
        assert (done.returncode, done.stderr) == (0, ""), done
        assert len(done.stdout.splitlines()) == 1
    sent = json.loads(first.stdout)
    assert sent == {"messageId": sent["messageId"], "duplicate": False}
    uuid.UUID(sent["messageId"])
    assert json.loads(again.stdout) == {"messageId": sent["messageId"], "duplicate": True}
    from_stdin = json.loads(piped.stdout)
    assert from_stdin == {"messageId": from_stdin["messageId"], "duplicate": False}

    with ExchangeClient(
        gunicorn.base_url, recipient.login, recipient.password, device_id="cli-recipient-1"
    ) as client:
        received = client.receive(max_messages=10)
        assert client.ack(received) == {m.message_id: "acked" for m in received}
    queued = [(m.message_id, m.sender, m.type, m.headers, m.payload) for m in received]
    assert queued == [
        (
            sent["messageId"],
            sender.adapter_id,
            "order.created",
            {"trace-id": "abc", "query": "a=b"},
            {"orderId": 1001},
        ),
        (
            from_stdin["messageId"],
            sender.adapter_id,
            "order.note",
            {},
            {"note": "from standard input", "lines": ["ä", 2, None]},
        ),
    ]


def test_publish_prints_the_publication_and_the_subscriber_receives_its_copy(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    publisher = owner.create_adapter("cli-publisher")
    subscriber = owner.create_adapter("cli-subscriber")
    topic_id = topic_create(owner, "cli-prices")
    subscribe(owner, topic_id, subscriber)
    env = cli_env(gunicorn.base_url, publisher, "cli-publisher-1")
    price = (
        "publish",
        "--topic",
        str(topic_id),
        "--type",
        "price.changed",
        "--idempotency-key",
        "price-a1-10",
        "--header",
        "trace-id=abc",
        '{"sku": "A-1", "price": 10}',
    )

    first = run_cli(*price, env=env)
    again = run_cli(*price, env=env)
    piped = run_cli(
        "publish",
        "--topic",
        str(topic_id),
        "--type",
        "price.note",
        "-",
        env=env,
        stdin='{"note": "from standard input ä"}\n',
    )
    refused = run_cli("publish", "--topic", "999999", "--type", "t", "{}", env=env)

    for done in (first, again, piped):
        assert (done.returncode, done.stderr) == (0, ""), done
        assert len(done.stdout.splitlines()) == 1
    published = json.loads(first.stdout)
    assert published == {
        "publicationId": published["publicationId"],
        "recipients": 1,
        "refused": 0,
        "duplicate": False,
    }
    uuid.UUID(published["publicationId"])
    assert json.loads(again.stdout) == {**published, "duplicate": True}
    from_stdin = json.loads(piped.stdout)
    assert (from_stdin["recipients"], from_stdin["duplicate"]) == (1, False)
    # No topic of that id, or one it may not publish to: the platform's refusal, exit 1.
    assert (refused.returncode, refused.stdout) == (1, "")
    [reason] = refused.stderr.splitlines()
    assert reason.startswith("exchange-client: 403 PUBLISH_NOT_ALLOWED: "), reason

    with ExchangeClient(
        gunicorn.base_url, subscriber.login, subscriber.password, device_id="cli-subscriber-1"
    ) as client:
        received = client.receive(max_messages=10)
        assert client.ack(received) == {m.message_id: "acked" for m in received}
    copies = [
        (m.sender, m.topic_id, m.publication_id, m.type, m.headers, m.payload) for m in received
    ]
    assert copies == [
        (
            publisher.adapter_id,
            topic_id,
            published["publicationId"],
            "price.changed",
            {"trace-id": "abc"},
            {"sku": "A-1", "price": 10},
        ),
        (
            publisher.adapter_id,
            topic_id,
            from_stdin["publicationId"],
            "price.note",
            {},
            {"note": "from standard input ä"},
        ),
    ]


def test_stats_prints_the_queue_figures(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-stats")
    stock(stack_database, adapter, 3)

    done = run_cli("stats", env=cli_env(gunicorn.base_url, adapter, "cli-stats-1"))

    assert (done.returncode, done.stderr) == (0, "")
    [line] = done.stdout.splitlines()
    figures = json.loads(line)
    assert figures == {
        "available": 3,
        "inFlight": 0,
        "delayed": 0,
        "deadLettered": 0,
        "oldestAgeSeconds": figures["oldestAgeSeconds"],
    }
    assert figures["oldestAgeSeconds"] >= 0


def test_consume_runs_the_command_once_per_message_with_its_json_and_acks_what_exits_0(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-consumer")
    ids = stock(stack_database, adapter, 5)
    command = (
        'cat >"$EXCHANGE_MESSAGE_ID.json"; '
        'echo "$EXCHANGE_MESSAGE_ID $EXCHANGE_DELIVERY_COUNT ${EXCHANGE_PASSWORD-unset}" >>handled.log'
    )

    done = run_cli(
        "consume",
        "--exec",
        command,
        "--batch",
        "2",
        "--lease",
        "600",
        "--until-empty",
        env=cli_env(gunicorn.base_url, adapter, "cli-consumer-1"),
        cwd=tmp_path,
    )

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # In queue order, each once; the adapter's password is not handed down to the command.
    assert lines(tmp_path / "handled.log") == [f"{message_id} 1 unset" for message_id in ids]
    for message_id in ids:
        message = json.loads((tmp_path / f"{message_id}.json").read_text())
        assert list(message) == MESSAGE_MEMBERS
        assert message["messageId"] == message_id
        assert (message["deliveryCount"], message["redelivered"]) == (1, False)
        assert (message["type"], message["headers"], message["sender"]) == ("stock", {}, None)
        leased = datetime.fromisoformat(message["leaseExpiresAt"]) - datetime.fromisoformat(
            message["enqueuedAt"]
        )
        assert leased >= timedelta(seconds=599)  # --lease 600 (leaseExpiresAt is cut to seconds)
    payloads = [json.loads((tmp_path / f"{m}.json").read_text())["payload"] for m in ids]
    assert sorted(p["n"] for p in payloads) == [1, 2, 3, 4, 5]
    assert acknowledged(stack_database, adapter) == dict.fromkeys(ids, 1)
    stats = json.loads(run_cli("stats", env=cli_env(gunicorn.base_url, adapter, "x")).stdout)
    assert stats == {
        "available": 0,
        "inFlight": 0,
        "delayed": 0,
        "deadLettered": 0,
        "oldestAgeSeconds": None,
    }


def test_a_command_that_fails_once_releases_its_message_which_comes_back_and_is_acked(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-flaky")
    first, second = stock(stack_database, adapter, 2)
    # Fails on the first delivery of the first message only.
    command = (
        'echo "$EXCHANGE_MESSAGE_ID $EXCHANGE_DELIVERY_COUNT" >>seen.log; '
        'test "$EXCHANGE_MESSAGE_ID/$EXCHANGE_DELIVERY_COUNT" != "$FAIL_ONCE/1"'
    )

    done = run_cli(
        "consume",
        "--exec",
        command,
        "--until-empty",
        env=cli_env(gunicorn.base_url, adapter, "cli-flaky-1", FAIL_ONCE=first),
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert lines(tmp_path / "seen.log") == [f"{first} 1", f"{second} 1", f"{first} 2"]
    # The failure was released (not left to its lease): its second delivery came at once.
    assert acknowledged(stack_database, adapter) == {first: 2, second: 1}
    assert query(
        stack_database,
        "SELECT count(*) FROM exchange_message WHERE recipient_id = %s",
        adapter.adapter_id,
    ) == [(0,)]
    assert first in done.stderr  # the release is reported, in one line: no traceback
    assert "Traceback" not in done.stderr


def test_sigterm_mid_batch_finishes_the_message_in_hand_and_gives_back_the_rest_at_once(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-sigterm")
    ids = stock(stack_database, adapter, 5)
    device = "cli-sigterm-1"
    with (tmp_path / "stderr.log").open("w") as stderr:
        consumer = subprocess.Popen(
            [
                EXCHANGE_CLIENT,
                "--verbose",  # it says when it has taken the signal
                "consume",
                "--exec",
                GATED_COMMAND,
                "--batch",
                "5",
                "--lease",
                LONG_LEASE,
            ],
            env=cli_env(gunicorn.base_url, adapter, device),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_until(
            lambda: lines(tmp_path / "started.log") == ids[:1],
            timeout=30,
            what="the first message of the batch to be in hand",
        )
        consumer.send_signal(signal.SIGTERM)
        # Only once the signal has been taken does the handler finish: the batch is stopped
        # between its first and second message whatever the timing.
        wait_until(
            lambda: "Signal 15" in (tmp_path / "stderr.log").read_text(),
            timeout=30,
            what="the consumer to take SIGTERM",
        )
        (tmp_path / "go").touch()
        assert consumer.wait(timeout=30) == 0, (tmp_path / "stderr.log").read_text()
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()

    assert lines(tmp_path / "started.log") == ids[:1]
    assert lines(tmp_path / "finished.log") == ids[:1]
    assert acknowledged(stack_database, adapter) == {ids[0]: 1}
    with ExchangeClient(
        gunicorn.base_url, adapter.login, adapter.password, device_id=device
    ) as client:
        # Released, not left to a lease of an hour: nothing in flight.
        assert client.stats()["available"] == 4
        assert client.stats()["inFlight"] == 0
        back = client.receive(max_messages=10)
        assert [(m.message_id, m.delivery_count, m.redelivered) for m in back] == [
            (message_id, 2, True) for message_id in ids[1:]
        ]
        client.ack(back)


def open_streams(database: StackDatabase, adapter: Adapter) -> int:
    [(count,)] = query(
        database,
        "SELECT count(*) FROM exchange_stream WHERE recipient_id = %s",
        adapter.adapter_id,
    )
    return int(count)


def test_stream_prints_each_message_as_a_json_line_and_acks_it_once_printed(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-stream")
    ids = stock(stack_database, adapter, 5)

    done = run_cli(
        "stream", "--count", "3", env=cli_env(gunicorn.base_url, adapter, "cli-stream-1")
    )

    assert (done.returncode, done.stderr) == (0, ""), done
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(e["event"], e["id"]) for e in events] == [("message", m) for m in ids[:3]]
    assert all(list(e) == ["event", "id", "data"] for e in events)
    for event in events:
        assert list(event["data"]) == MESSAGE_MEMBERS
        assert event["data"]["messageId"] == event["id"]
    assert [e["data"]["payload"] for e in events] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert acknowledged(stack_database, adapter) == dict.fromkeys(ids[:3], 1)


def test_stream_with_no_ack_prints_the_messages_and_leaves_them_to_come_back(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-stream-look")
    ids = stock(stack_database, adapter, 2)
    device = "cli-stream-look-1"

    done = run_cli(
        "stream",
        "--count",
        "2",
        "--no-ack",
        "--lease",
        LONG_LEASE,
        env=cli_env(gunicorn.base_url, adapter, device),
    )

    assert (done.returncode, done.stderr) == (0, ""), done
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ids
    assert acknowledged(stack_database, adapter) == {}
    # The platform takes the stream's end from the connection's: then the same device id gets
    # back at once what the stream left unsettled, not after the lease of an hour.
    wait_until(
        lambda: open_streams(stack_database, adapter) == 0, timeout=30, what="the stream to end"
    )
    with ExchangeClient(
        gunicorn.base_url, adapter.login, adapter.password, device_id=device
    ) as client:
        back = client.receive(max_messages=10)
        assert client.ack(back) == dict.fromkeys(ids, "acked")
    assert [(m.message_id, m.redelivered) for m in back] == [(m, True) for m in ids]


def test_stream_runs_until_sigterm_and_acks_what_it_printed_before_it_exits_0(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-stream-sigterm")
    ids = stock(stack_database, adapter, 2)
    output = tmp_path / "events.jsonl"
    with output.open("w") as stdout:
        streaming = subprocess.Popen(
            [EXCHANGE_CLIENT, "stream", "--lease", LONG_LEASE],
            env=cli_env(gunicorn.base_url, adapter, "cli-stream-sigterm-1"),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        wait_until(lambda: len(lines(output)) == 2, timeout=30, what="both messages printed")
        streaming.send_signal(signal.SIGTERM)
        _, stderr = streaming.communicate(timeout=30)
    finally:
        if streaming.poll() is None:
            streaming.kill()
            streaming.communicate()

    assert (streaming.returncode, stderr) == (0, "")
    assert [json.loads(line)["id"] for line in lines(output)] == ids
    assert acknowledged(stack_database, adapter) == dict.fromkeys(ids, 1)


def test_stream_prints_the_end_event_and_exits_1_once_a_stream_with_its_device_id_replaces_it(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-stream-replaced")
    device = "cli-stream-replaced-1"
    streaming = subprocess.Popen(
        [EXCHANGE_CLIENT, "stream"],
        env=cli_env(gunicorn.base_url, adapter, device),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: streaming.poll() is None and open_streams(stack_database, adapter) == 1,
            timeout=30,
            what="the command's stream to be open",
        )
        with (
            ExchangeClient(
                gunicorn.base_url, adapter.login, adapter.password, device_id=device
            ) as client,
            client.stream() as stream,
        ):
            # A stream connects when first iterated: this one until it is closed.
            threading.Thread(target=next, args=(stream, None), daemon=True).start()
            stdout, stderr = streaming.communicate(timeout=30)
    finally:
        if streaming.poll() is None:
            streaming.kill()
            streaming.communicate()

    assert streaming.returncode == 1
    [line] = stdout.splitlines()
    end = json.loads(line)
    assert (end["event"], end["id"], end["data"]["code"]) == ("end", None, "REPLACED")
    assert set(end["data"]) == {"code", "detail"}
    [reason] = stderr.splitlines()
    assert reason.startswith("exchange-client: REPLACED: "), stderr


def test_rotating_the_password_under_a_running_consume_exits_3_and_loses_no_message(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner, tmp_path: Path
) -> None:
    adapter = owner.create_adapter("cli-rotated")
    [message_id] = stock(stack_database, adapter, 1)
    device = "cli-rotated-1"
    consumer = subprocess.Popen(
        [EXCHANGE_CLIENT, "consume", "--exec", GATED_COMMAND, "--lease", LONG_LEASE],
        env=cli_env(gunicorn.base_url, adapter, device),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: lines(tmp_path / "started.log") == [message_id],
            timeout=30,
            what="the message to be in hand",
        )
        rotated = owner.rotate_password(adapter)
        (tmp_path / "go").touch()  # the handler succeeds; its ACK meets the ended session
        stdout, stderr = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()

    assert consumer.returncode == 3
    assert stdout == ""
    [reason] = stderr.splitlines()
    assert reason.startswith("exchange-client: sign-in refused: BAD_CREDENTIALS"), stderr
    # Handled but never acknowledged: it comes back to the same device id, now signed in with
    # the new password.
    assert acknowledged(stack_database, adapter) == {}
    with ExchangeClient(
        gunicorn.base_url, rotated.login, rotated.password, device_id=device
    ) as client:
        back = client.receive(max_messages=10)
        assert [(m.message_id, m.delivery_count) for m in back] == [(message_id, 2)]
        assert client.ack(back) == {message_id: "acked"}


@pytest.mark.parametrize(
    ("arguments", "environment", "says"),
    [
        ((), {}, "required: COMMAND"),
        (("whoami", "--extra"), {}, "unrecognized arguments"),
        (("send", "--to", "seven", "--type", "t", "{}"), {}, "invalid int value"),
        (("send", "--to", "1", "--type", "t", "{not json"), {}, "PAYLOAD is not JSON"),
        (("send", "--to", "1", "--type", "t", "--header", "trace", "{}"), {}, "NAME=VALUE"),
        (("publish", "--type", "t", "{}"), {}, "--topic"),
        (("publish", "--topic", "prices", "--type", "t", "{}"), {}, "invalid int value"),
        (("publish", "--topic", "1", "--type", "t", "{not json"), {}, "PAYLOAD is not JSON"),
        (("publish", "--topic", "1", "--type", "t", "--header", "=x", "{}"), {}, "NAME=VALUE"),
        (("consume",), {}, "--exec"),
        (("whoami",), {"EXCHANGE_URL": ""}, "set EXCHANGE_URL"),
        (("whoami",), {"EXCHANGE_DEVICE_ID": "café-1"}, "EXCHANGE_DEVICE_ID"),
        (("consume", "--exec", "true", "--batch", "101"), {}, "--batch"),
        (("consume", "--exec", "true", "--wait", "21"), {}, "--wait"),
        (("consume", "--exec", "true", "--lease", "0"), {}, "--lease"),
        (("consume", "--exec", "true", "--transport", "carrier"), {}, "--transport"),
        (("stream", "--max-outstanding", "1001"), {}, "--max-outstanding"),
        (("stream", "--lease", "43201"), {}, "--lease"),
        (("stream", "--count", "0"), {}, "--count"),
    ],
)
def test_a_usage_error_exits_2_with_the_reason_and_without_signing_in(
    gunicorn: Gunicorn,
    stack_database: StackDatabase,
    owner: Owner,
    arguments: tuple[str, ...],
    environment: dict[str, str],
    says: str,
) -> None:
    adapter = Adapter(owner.user_id, "cli-usage", "never-used")
    env = cli_env(gunicorn.base_url, adapter, "cli-usage-1")
    env.update(environment)

    done = run_cli(*arguments, env=env)

    assert done.returncode == 2, done
    assert done.stdout == ""
    assert says in done.stderr
    signed_in = query(
        stack_database,
        "SELECT count(*) FROM accounts_session WHERE device_id = 'cli-usage-1'",
    )
    assert signed_in == [(0,)]


def test_a_refused_sign_in_exits_3_with_a_one_line_reason(gunicorn: Gunicorn, owner: Owner) -> None:
    wrong = owner.create_adapter("cli-wrong-password")
    locked = owner.create_adapter("cli-locked")
    disabled = owner.create_adapter("cli-disabled")
    for _ in range(5):  # the lock's threshold of wrong passwords in a row
        answer = httpx.post(
            f"{gunicorn.base_url}/api/auth/login/username",
            json={"username": locked.login, "password": "not-the-password"},
            headers={"X-Device-ID": "cli-locker"},
        )
        assert answer.json()["code"] in ("BAD_CREDENTIALS", "ACCOUNT_LOCKED"), answer.text
    owner.disable(disabled)

    refusals = {
        "wrong password": run_cli(
            "whoami",
            env=cli_env(
                gunicorn.base_url, Adapter(wrong.adapter_id, wrong.login, "nope"), "cli-refused"
            ),
        ),
        "locked": run_cli("stats", env=cli_env(gunicorn.base_url, locked, "cli-refused")),
        "disabled": run_cli(
            "consume", "--exec", "true", env=cli_env(gunicorn.base_url, disabled, "cli-refused")
        ),
    }

    reasons = {}
    for case, done in refusals.items():
        assert (done.returncode, done.stdout) == (3, ""), (case, done)
        [reasons[case]] = done.stderr.splitlines()
    assert reasons["wrong password"].startswith(
        "exchange-client: sign-in refused: BAD_CREDENTIALS: "
    )
    assert reasons["locked"].startswith("exchange-client: sign-in refused: ACCOUNT_LOCKED until ")
    assert reasons["disabled"].startswith("exchange-client: sign-in refused: ACCOUNT_DISABLED: ")


def test_a_request_the_platform_refuses_exits_1_with_its_code(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    adapter = owner.create_adapter("cli-refused-send")

    done = run_cli(
        "send",
        "--to",
        "999999",  # nobody's: not a route this adapter has
        "--type",
        "t",
        "{}",
        env=cli_env(gunicorn.base_url, adapter, "cli-refused-send-1"),
    )

    assert (done.returncode, done.stdout) == (1, "")
    [reason] = done.stderr.splitlines()
    assert reason.startswith("exchange-client: 403 SEND_NOT_ALLOWED: "), reason
