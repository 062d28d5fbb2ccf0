"""exchange-client's subcommands that do one operation of the exchange API each: receive, ack,
nack, extend, send-batch and logout, and what every subcommand shares (usage errors, JSON lines
out, bounded integer options).

Their input (ids, receipt handles, messages, a refresh token) is read and checked before signing
in: a usage error costs nothing. Their output is one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from exchange_client.client import ExchangeClient
from exchange_client.errors import ExchangeError
from exchange_client.messages import Outgoing

EXIT_FAILURE = 1


class UsageError(Exception):
    pass


def emit(body: dict[str, Any], *, flush: bool = False) -> None:
    print(json.dumps(body, ensure_ascii=False, separators=(",", ":")), flush=flush)  # noqa: T201


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An integer option within the platform's bounds: outside them it is a usage error (exit
    2, before signing in), not the platform's 400 after it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not within {low}..{high}")
        return value

    return parse


def add_operations(commands: Any) -> None:
    """The subcommands of this module, on ``commands`` (argparse's subparsers)."""
    receive = commands.add_parser(
        "receive",
        help="lease messages and print each as a JSON line, acknowledging none",
        description="Lease up to --max messages, waiting up to --wait seconds for one, and print "
        "each as one JSON line, as the platform sent it (messageId, receiptHandle, "
        "deliveryCount...); nothing printed when none came. Settle them with ack, nack or "
        "extend (the same EXCHANGE_DEVICE_ID: what it leased and did not settle comes back to "
        "its next receive at once, to another device's once the lease runs out).",
    )
    receive.add_argument("--max", type=bounded(1, 100), default=10, metavar="N", help="1..100 (10)")
    receive.add_argument(
        "--wait", type=bounded(0, 20), default=0, metavar="SECONDS", help="0..20 (0)"
    )
    receive.add_argument(
        "--lease", type=bounded(1, 43200), default=30, metavar="SECONDS", help="1..43200 (30)"
    )
    _references(
        commands.add_parser(
            "ack",
            help='acknowledge messages; prints {"messageId", "status"} per message',
            description="Acknowledge messages by id: each status is acked, alreadyAcked, "
            "deadLettered or notFound.",
        ),
        "MESSAGE_ID",
        "messageId",
    )
    nack = commands.add_parser(
        "nack",
        help='give messages back; prints {"messageId", "status"} per message',
        description="Release leased messages by receipt handle, to be received again after "
        "--delay seconds: each status is released, leaseLost or notFound.",
    )
    _references(nack, "RECEIPT_HANDLE", "receiptHandle")
    nack.add_argument(
        "--delay", type=bounded(0, 43200), default=0, metavar="SECONDS", help="0..43200 (0)"
    )
    extend = commands.add_parser(
        "extend",
        help='hold messages longer; prints {"messageId", "status"} per message',
        description="Extend leased messages' leases by receipt handle to --lease seconds from "
        "now: each status is extended, leaseLost or notFound.",
    )
    _references(extend, "RECEIPT_HANDLE", "receiptHandle")
    extend.add_argument(
        "--lease", type=bounded(1, 43200), required=True, metavar="SECONDS", help="1..43200"
    )
    send_batch = commands.add_parser(
        "send-batch",
        help="send a message per JSON line of FILE (- for standard input); prints a result "
        "per line",
        description='Send each line of FILE, a JSON object {"to", "type", "payload", '
        '"headers", "idempotencyKey"} (the last two optional), in requests of up to 100. '
        'Prints one line per message, in order: {"messageId", "duplicate"}, or {"error": '
        '{"status", "code", "detail"}} for a message refused alone. Exits 1 when any was.',
    )
    send_batch.add_argument("file", metavar="FILE", help="a file of JSON lines, or -")
    logout = commands.add_parser(
        "logout",
        help="end the session of a refresh token; prints {}",
        description="End the session of REFRESH_TOKEN (- reads it from standard input): both "
        "of its tokens stop working. For a session another program started, or one it left "
        "behind; every other subcommand ends its own session when it finishes. Needs "
        "EXCHANGE_URL only.",
    )
    logout.add_argument("refresh_token", metavar="REFRESH_TOKEN")


def _references(parser: argparse.ArgumentParser, metavar: str, member: str) -> None:
    parser.add_argument(
        "references",
        nargs="+",
        metavar=metavar,
        help=f"one or more, or - to read them from standard input, one a line: a {metavar} "
        f"or a message's JSON line as receive prints it (its {member})",
    )


OPERATIONS = ("receive", "ack", "nack", "extend", "send-batch", "logout")
REFERENCE_MEMBERS = {"ack": "messageId", "nack": "receiptHandle", "extend": "receiptHandle"}


def read_input(arguments: argparse.Namespace) -> Any:
    """What the subcommand works on, read and checked (UsageError), or None for none."""
    if arguments.command in REFERENCE_MEMBERS:
        return _read_references(arguments.references, REFERENCE_MEMBERS[arguments.command])
    if arguments.command == "send-batch":
        if arguments.file == "-":
            return _read_messages(sys.stdin, "standard input")
        try:
            with open(arguments.file, encoding="utf-8") as lines:
                return _read_messages(lines, arguments.file)
        except OSError as error:
            raise UsageError(f"FILE: {error.strerror}: {arguments.file}") from None
    if arguments.command == "logout":
        given = arguments.refresh_token
        token = sys.stdin.read().strip() if given == "-" else given.strip()
        if not token:
            raise UsageError("REFRESH_TOKEN is empty")
        return token
    return None


def _read_references(given: Sequence[str], member: str) -> list[str]:
    if list(given) == ["-"]:
        given = sys.stdin.read().splitlines()
    elif "-" in given:
        raise UsageError("- reads standard input, alone")
    found = []
    for line in (text.strip() for text in given):
        if not line:
            continue
        if line.startswith("{"):
            try:
                value = json.loads(line).get(member)
            except (ValueError, AttributeError):
                value = None
            if not isinstance(value, str):
                raise UsageError(f"a JSON line without {member}: {line[:80]}")
            line = value
        found.append(line)
    if not found:
        raise UsageError("nothing to do: no id or receipt handle given")
    return found


def _read_messages(lines: IO[str], name: str) -> list[Outgoing]:
    messages = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise ValueError("not a JSON object")
            unknown = set(item) - {"to", "type", "payload", "headers", "idempotencyKey"}
            if unknown:
                raise ValueError(f"unknown member {sorted(unknown)[0]!r}")
            messages.append(
                Outgoing(
                    to=item["to"],
                    type=item["type"],
                    payload=item["payload"],
                    headers=item.get("headers"),
                    idempotency_key=item.get("idempotencyKey"),
                )
            )
        except KeyError as missing:
            raise UsageError(f"{name}, line {number}: no {missing}") from None
        except ValueError as error:
            raise UsageError(f"{name}, line {number}: {error}") from None
    if not messages:
        raise UsageError(f"{name} has no message")
    return messages


def run_operation(client: ExchangeClient, arguments: argparse.Namespace, given: Any) -> int:
    """Run the subcommand (signing in as it needs); its exit status."""
    command = arguments.command
    if command == "receive":
        for message in client.receive(arguments.max, arguments.wait, arguments.lease):
            emit(message.raw)
        return 0
    if command == "logout":
        client.end_session(given)
        emit({})
        return 0
    if command == "send-batch":
        failed = 0
        for outcome in client.send_batch(given):
            if isinstance(outcome, ExchangeError):
                failed += 1
                error = {"status": outcome.status, "code": outcome.code, "detail": outcome.detail}
                emit({"error": error})
            else:
                emit({"messageId": outcome.message_id, "duplicate": outcome.duplicate})
        return EXIT_FAILURE if failed else 0
    if command == "ack":
        results = client.ack(given)
    elif command == "nack":
        results = client.release(given, delay_seconds=arguments.delay)
    else:
        results = client.extend(given, arguments.lease)
    for message_id, status in results.items():
        emit({"messageId": message_id, "status": status})
    return 0
