"""The exchange API's side of (g) and (h): producers and consumers over HTTP/1.1.

Each worker keeps one keep-alive connection with http.client, the leanest client at hand: on a
2-core machine the load generator's own CPU is taken from the servers it measures, and httpx
costs several times as much per call. The bodies are written as bytes around the payload, so
that RabbitMQ's side carries exactly the same payload bytes (``flow.payload``).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass

from bench.throughput.flow import EMPTY_PAUSE, Clock, Tally, payload
from bench.throughput.servers import Client, Server

SEND = "/api/exchange/messages"
SEND_BATCH = "/api/exchange/messages/batch"
RECEIVE = "/api/exchange/messages"
ACK = "/api/exchange/messages/ack"
# A consumer of batches waits in a long poll when its queue is empty, as RabbitMQ's consumer of
# pushed messages (basic_consume) waits on its socket; a consumer of one message at a time asks
# again after EMPTY_PAUSE, as basic_get's loop does.
LONG_POLL_SECONDS = 1


@dataclass(frozen=True)
class Caller:
    """Where and as whom a worker calls the API."""

    host: str
    port: int
    token: str
    device_id: str

    def connect(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        connection.connect()  # now, before the turn starts: not in the measured window
        return connection

    def headers(self, *, body: bool = False) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}", "X-Device-ID": self.device_id}
        if body:
            headers["Content-Type"] = "application/json"
        return headers


def caller_of(server: Server, client: Client) -> Caller:
    host, port = server.address
    return Caller(host=host, port=port, token=client.token, device_id=client.device_id)


def call(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> tuple[int, bytes]:
    connection.request(method, path, body, headers)
    response = connection.getresponse()
    return response.status, response.read()


def send_body(recipient: int, payloads: list[bytes]) -> bytes:
    """The body of a send, or of a batch send when there are several payloads, written around
    the payloads' bytes as they are."""
    items = [b'{"to":%d,"type":"bench","payload":%s}' % (recipient, item) for item in payloads]
    if len(items) == 1:
        return items[0]
    return b'{"messages":[' + b",".join(items) + b"]}"


def producer(caller: Caller, recipient: int, batch: int, clock: Clock) -> Tally:
    """Sends to ``recipient`` as fast as the server answers: one message per
    POST /api/exchange/messages, or ``batch`` per POST /api/exchange/messages/batch, each
    message's payload stamped with the time its call began."""
    tally = Tally()
    connection = caller.connect()
    headers = caller.headers(body=True)
    number = 0
    clock.wait_start()
    while (now := clock.hold()) is not None:
        body = send_body(recipient, [payload(now, number + n) for n in range(batch)])
        if batch == 1:
            status, answer = call(connection, "POST", SEND, headers, body)
            sent = int(status == 201)
        else:
            status, answer = call(connection, "POST", SEND_BATCH, headers, body)
            sent = answer.count(b'"status":"sent"') if status == 200 else 0
        number += batch
        clock.sent(sent)
        if clock.window.counts(time.monotonic()):
            tally.sent += sent
            tally.failed += batch - sent
            tally.sends += 1
            tally.held += clock.held
    connection.close()
    return tally


def consumer(caller: Caller, batch: int, clock: Clock) -> Tally:
    """Receives up to ``batch`` messages and acknowledges them in one call, again and again; the
    latency of each is from its payload's send time to the moment its receive answered."""
    tally = Tally()
    connection = caller.connect()
    headers, ack_headers = caller.headers(), caller.headers(body=True)
    path = f"{RECEIVE}?max={batch}"
    if batch > 1:
        path += f"&waitSeconds={LONG_POLL_SECONDS}"
    clock.wait_start()
    while clock.now() is not None:
        status, answer = call(connection, "GET", path, headers)
        arrived = time.monotonic()
        messages = json.loads(answer)["messages"] if status == 200 else []
        if not messages:
            if clock.window.counts(arrived):
                tally.empty += status == 200
                tally.failed += status != 200
            if batch == 1:
                time.sleep(EMPTY_PAUSE)
            continue
        ids = json.dumps({"messageIds": [message["messageId"] for message in messages]})
        status, answer = call(connection, "POST", ACK, ack_headers, ids.encode())
        acked = answer.count(b'"status":"acked"') if status == 200 else 0
        clock.acked(acked)
        if clock.window.counts(arrived):
            tally.received += len(messages)
            tally.receives += 1
            tally.latencies_ms.extend(
                1000.0 * (arrived - message["payload"]["sentAt"]) for message in messages
            )
        if clock.window.counts(time.monotonic()):
            tally.acked += acked
            tally.acks += 1
    connection.close()
    return tally
