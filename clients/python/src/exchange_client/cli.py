"""The ``exchange-client`` command: whoami, stats, send, send-batch, publish, receive, ack, nack,
extend, consume --exec, stream, logout (exchange_client.cli_operations has the subcommands of one
API operation each).

Configured by EXCHANGE_URL, EXCHANGE_LOGIN, EXCHANGE_PASSWORD and EXCHANGE_DEVICE_ID. Exit
status: 0 success, 1 a failure, 2 a usage error, 3 sign-in refused (one line on standard error
says why). These, the commands and their output are an interface: changing them breaks scripts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from exchange_client.cli_operations import (
    EXIT_FAILURE,
    OPERATIONS,
    UsageError,
    add_operations,
    bounded,
    emit,
    read_input,
    run_operation,
)
from exchange_client.client import ExchangeClient, __version__
from exchange_client.consumer import Release, stop_on_signals
from exchange_client.errors import AuthenticationError, ExchangeError, StreamReplaced
from exchange_client.messages import Message
from exchange_client.stream import MessageStream
from exchange_client.stream_consumer import (
    ACK_BATCH,
    ACK_INTERVAL_MS,
    Acknowledger,
    ack_threshold,
)

EXIT_USAGE = 2
EXIT_SIGN_IN_REFUSED = 3
CONFIGURATION = ("EXCHANGE_URL", "EXCHANGE_LOGIN", "EXCHANGE_PASSWORD")
# Not handed down to the command consume runs: it has no use for the adapter's password.
SECRET = "EXCHANGE_PASSWORD"  # noqa: S105 (the variable's name)


class CommandFailed(Release):
    """The command consume --exec ran for a message did not exit 0."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="exchange-client",
        description="The exchange platform's adapter client. Configured by EXCHANGE_URL, "
        "EXCHANGE_LOGIN, EXCHANGE_PASSWORD and EXCHANGE_DEVICE_ID (one stable id per consumer "
        "instance).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the client does")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("whoami", help="print who the credentials sign in as (JSON)")
    commands.add_parser("stats", help="print this adapter's queue figures (JSON)")
    _send_options(
        commands.add_parser("send", help='send a message; prints {"messageId", "duplicate"}')
    )
    _publish_options(
        commands.add_parser(
            "publish",
            help="publish a message to a topic; prints "
            '{"publicationId", "recipients", "refused", "duplicate"}',
        )
    )
    _consume_options(
        commands.add_parser(
            "consume",
            help="run a command per message: exit 0 acknowledges it, any other status releases it",
        )
    )
    add_operations(commands)
    _stream_options(
        commands.add_parser(
            "stream",
            help="print the pushed messages as JSON lines, acknowledging each once printed",
            description="Print each event of the push stream as one JSON line: "
            '{"event": "message", "id": MESSAGE_ID, "data": MESSAGE} per message, and '
            '{"event": "end", "id": null, "data": {"code", "detail"}} when the platform ends the '
            "stream (it reconnects after TOKEN_EXPIRED, TOKEN_REVOKED and SHUTDOWN; after "
            "REPLACED, another stream with this device id, it exits 1). Keep-alives are not "
            "printed. A message is acknowledged once its line is written out (flushed), unless "
            "--no-ack. Runs until SIGTERM or SIGINT, or --count messages.",
        )
    )
    return parser


def _send_options(send: argparse.ArgumentParser) -> None:
    send.add_argument("--to", type=int, required=True, metavar="ADAPTER_ID")
    _message_options(send, key_help="the same key never sends twice")


def _publish_options(publish: argparse.ArgumentParser) -> None:
    publish.add_argument("--topic", type=int, required=True, metavar="TOPIC_ID")
    _message_options(
        publish, key_help="the same key never publishes twice (the namespace of your sends' keys)"
    )


def _message_options(parser: argparse.ArgumentParser, *, key_help: str) -> None:
    parser.add_argument("--type", required=True)
    parser.add_argument("--idempotency-key", metavar="KEY", help=key_help)
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="repeatable"
    )
    parser.add_argument("payload", metavar="PAYLOAD", help="JSON text, or - for standard input")


def _consume_options(consume: argparse.ArgumentParser) -> None:
    consume.add_argument(
        "--exec",
        dest="command_line",
        required=True,
        metavar="COMMAND",
        help="run through the shell with the message's JSON on standard input and "
        "EXCHANGE_MESSAGE_ID, EXCHANGE_DELIVERY_COUNT in its environment",
    )
    consume.add_argument(
        "--batch",
        type=bounded(1, 100),
        default=10,
        metavar="N",
        help="messages held at a time (the stream's max outstanding, or each receive's), "
        "1..100 (10)",
    )
    consume.add_argument(
        "--lease", type=bounded(1, 43200), default=60, metavar="SECONDS", help="1..43200 (60)"
    )
    consume.add_argument(
        "--wait",
        type=bounded(0, 20),
        metavar="SECONDS",
        help="each receive's long poll when long polling, 0..20 (20; 0 with --until-empty)",
    )
    consume.add_argument(
        "--until-empty",
        action="store_true",
        help="exit once a receive finds nothing (long polls: a stream never says it is empty)",
    )
    consume.add_argument(
        "--transport",
        choices=("stream", "poll"),
        default="stream",
        help="the push stream, or long polling where the platform has none (stream); "
        "or long polling only (poll)",
    )


def _stream_options(stream: argparse.ArgumentParser) -> None:
    stream.add_argument(
        "--max-outstanding",
        type=bounded(1, 1000),
        default=100,
        metavar="N",
        help="messages delivered and not yet acknowledged at a time, 1..1000 (100)",
    )
    stream.add_argument(
        "--lease", type=bounded(1, 43200), default=30, metavar="SECONDS", help="1..43200 (30)"
    )
    stream.add_argument(
        "--count",
        type=bounded(1, 1_000_000),
        metavar="N",
        help="exit once N messages are printed (the stream's max outstanding is N at most)",
    )
    stream.add_argument(
        "--no-ack",
        dest="ack",
        action="store_false",
        help="acknowledge nothing: the messages come back once their lease runs out (at once "
        "to this device id's next stream or receive), and at most --max-outstanding are printed "
        "until then",
    )


def _client(command: str) -> ExchangeClient:
    # logout ends a session of its refresh token: it signs in as nobody.
    needed = CONFIGURATION[:1] if command == "logout" else CONFIGURATION
    missing = [name for name in needed if not os.environ.get(name)]
    if missing:
        raise UsageError(f"set {', '.join(missing)}")
    try:
        return ExchangeClient(
            os.environ["EXCHANGE_URL"],
            os.environ.get("EXCHANGE_LOGIN", ""),
            os.environ.get("EXCHANGE_PASSWORD", ""),
        )
    except ValueError as error:  # a device id the platform would refuse
        raise UsageError(f"EXCHANGE_DEVICE_ID: {error}") from None


def _payload(text: str) -> Any:
    try:
        return json.loads(sys.stdin.read() if text == "-" else text)
    except ValueError as error:
        raise UsageError(f"PAYLOAD is not JSON: {error}") from None


def _headers(pairs: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise UsageError(f"--header {pair!r}: write NAME=VALUE")
        headers[name] = value
    return headers


def _run_command(command_line: str) -> Any:
    environment = {name: value for name, value in os.environ.items() if name != SECRET}

    def run(message: Message) -> None:
        finished = subprocess.run(  # noqa: S602 (the user's own command line, as documented)
            command_line,
            shell=True,
            input=json.dumps(message.raw, ensure_ascii=False).encode(),
            env={
                **environment,
                "EXCHANGE_MESSAGE_ID": message.message_id,
                "EXCHANGE_DELIVERY_COUNT": str(message.delivery_count),
            },
            check=False,
        )
        if finished.returncode != 0:
            raise CommandFailed(f"the command exited with {finished.returncode}")

    return run


def _main(arguments: argparse.Namespace) -> int:
    payload: Any = None
    headers: dict[str, str] = {}
    # Read before signing in: a usage error costs nothing.
    if arguments.command in ("send", "publish"):
        payload = _payload(arguments.payload)
        headers = _headers(arguments.header)
    given = read_input(arguments)
    with _client(arguments.command) as client:
        try:
            if arguments.command in OPERATIONS:
                return run_operation(client, arguments, given)
            _run(client, arguments, payload, headers)
            return 0
        finally:
            try:  # one command, one session: none is left behind for 30 days
                client.logout()
            except ExchangeError as error:
                logging.getLogger("exchange_client").info("Signing out failed: %s", error)


def _run(
    client: ExchangeClient, arguments: argparse.Namespace, payload: Any, headers: dict[str, str]
) -> None:
    if arguments.command == "whoami":
        emit(client.whoami())
    elif arguments.command == "stats":
        emit(client.stats())
    elif arguments.command == "send":
        sent = client.send(
            arguments.to,
            arguments.type,
            payload,
            headers=headers,
            idempotency_key=arguments.idempotency_key,
        )
        emit({"messageId": sent.message_id, "duplicate": sent.duplicate})
    elif arguments.command == "publish":
        published = client.publish(
            arguments.topic,
            arguments.type,
            payload,
            headers=headers,
            idempotency_key=arguments.idempotency_key,
        )
        emit(
            {
                "publicationId": published.publication_id,
                "recipients": published.recipients,
                "refused": published.refused,
                "duplicate": published.duplicate,
            }
        )
    elif arguments.command == "stream":
        count = arguments.count
        _stream(
            client,
            client.stream(
                max_outstanding=min(arguments.max_outstanding, count or arguments.max_outstanding),
                lease=arguments.lease,
            ),
            acks=arguments.ack,
            count=count,
        )
    else:
        wait = arguments.wait
        if wait is None:
            wait = 0 if arguments.until_empty else 20
        client.consume(
            _run_command(arguments.command_line),
            batch=arguments.batch,
            wait=wait,
            lease=arguments.lease,
            until_empty=arguments.until_empty,
            transport=arguments.transport,
        )


def _stream(
    client: ExchangeClient, stream: MessageStream, *, acks: bool, count: int | None
) -> None:
    """Print the stream's events until SIGTERM or SIGINT (or ``count`` messages); acknowledge
    each message once its line is out. Stopped, it acknowledges what it printed and exits 0;
    replaced, it does so and raises StreamReplaced."""
    acknowledger = None
    if acks:
        batch = ack_threshold(ACK_BATCH, stream.max_outstanding)
        acknowledger = Acknowledger(client, batch=batch, interval=ACK_INTERVAL_MS / 1000)
    restore = stop_on_signals(client)
    printed = 0
    try:
        for event in stream.events():
            try:
                emit(event.to_json(), flush=True)
            except BrokenPipeError:  # the reader went away (| head): stop, as a signal does
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                break
            if event.message is not None:
                printed += 1
                if acknowledger is not None:
                    acknowledger.add(event.message)
                if printed == count:
                    break
    except StreamReplaced:
        if acknowledger is not None:
            acknowledger.close(flush=True)
        raise
    except BaseException:
        if acknowledger is not None:
            acknowledger.close(flush=False)
        raise
    finally:
        stream.close()
        restore()
    if acknowledger is not None:
        acknowledger.close(flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)  # a usage error exits 2 here
    logging.basicConfig(
        level=logging.INFO if arguments.verbose else logging.WARNING,
        format="exchange-client: %(message)s",
        stream=sys.stderr,
    )
    try:
        status = _main(arguments)
    except UsageError as error:
        print(f"exchange-client: {error}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    except AuthenticationError as error:
        locked = error.locked_until
        until = f" until {locked:%Y-%m-%dT%H:%M:%SZ}" if locked is not None else ""
        reason = f"sign-in refused: {error.code}{until}: {error.detail}"
        print(f"exchange-client: {reason}", file=sys.stderr)  # noqa: T201
        return EXIT_SIGN_IN_REFUSED
    except ExchangeError as error:
        # One line whatever the error holds (a page's text where no platform answers).
        print(f"exchange-client: {' '.join(str(error).split())}", file=sys.stderr)  # noqa: T201
        return EXIT_FAILURE
    return status


if __name__ == "__main__":
    sys.exit(main())
