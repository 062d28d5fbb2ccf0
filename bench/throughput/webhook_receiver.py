"""(l)'s webhook endpoints: an HTTP/1.1 server on loopback that answers every POST with 200 and
notes when each came, in a process of its own (``python -m bench.throughput.webhook_receiver
PORT``).

A process of its own, so that its CPU is counted apart from the bench's (``Receiver.cpu_seconds``)
and the bench's sender does not share an interpreter lock with it. An asyncio protocol with a
parser of a few lines and keep-alive, rather than http.server's thread per connection: the
deliverers keep their connections open (httpcore's pool) and send one request at a time on each,
so the receiver's cost per request is a read, a few splits and a write. (l) prints its CPU per
request and its share of a core, which say how far it is from being the bottleneck.

Paths: ``POST /fast/<tag>`` answers at once; ``POST /slow/<tag>`` after SLOW_SECONDS, on a timer,
so that it holds no other request. Each request is noted under its path: when it arrived (the
monotonic clock, which Linux keeps for the whole machine: the bench subtracts its send times),
its ``webhook-id`` and its body. ``GET /_summary?path=...`` answers, over the paths given, the
requests, the distinct webhook-ids, the first and last arrival and the answers still pending;
``GET /_arrivals?path=...`` each request's arrival with its payload's ``sentAt`` and ``n``;
``GET /_forget?path=...`` forgets those paths (each turn of the bench posts to paths of its own,
and a turn's bodies take some 30 MB).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

SLOW_SECONDS = 5.0
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Noted:
    """What came to one path."""

    ids: set[str] = field(default_factory=set)
    arrivals: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival, body)
    first: float = 0.0
    last: float = 0.0
    pending: int = 0  # slow answers not yet sent


class Notes:
    def __init__(self) -> None:
        self.paths: dict[str, Noted] = {}

    def summary(self, paths: list[str]) -> dict[str, float]:
        """Cheap enough to be asked ten times a second while a turn runs: a message goes to one
        adapter's path only, so the distinct ids of the paths add up."""
        noted = [self.paths[path] for path in paths if path in self.paths and self.paths[path].ids]
        return {
            "requests": sum(len(one.arrivals) for one in noted),
            "distinct": sum(len(one.ids) for one in noted),
            "first": min((one.first for one in noted), default=0.0),
            "last": max((one.last for one in noted), default=0.0),
            "pending": sum(one.pending for one in noted),
        }

    def arrivals(self, paths: list[str]) -> list[list[float]]:
        """[arrival, sentAt, n] of every request to ``paths``: its payload's stamps."""
        found = []
        for path in paths:
            for at, body in self.paths.get(path, Noted()).arrivals:
                payload = json.loads(body)["payload"]
                found.append([at, float(payload["sentAt"]), float(payload["n"])])
        return found


class Endpoint(asyncio.Protocol):
    """One connection: requests parsed as they come, one after another (no pipelining needed:
    httpcore waits for each answer)."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        arrived = time.monotonic()
        self.buffer += data
        while (head_end := self.buffer.find(b"\r\n\r\n")) >= 0:
            lines = self.buffer[:head_end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            end = head_end + 4 + int(headers.get("content-length", "0"))
            if len(self.buffer) < end:
                return
            body, self.buffer = self.buffer[head_end + 4 : end], self.buffer[end:]
            method, target, _ = lines[0].split(" ", 2)
            if method == "POST":
                self.posted(target, headers.get("webhook-id", ""), body, arrived)
            else:
                self.control(target)

    def posted(self, path: str, webhook_id: str, body: bytes, arrived: float) -> None:
        noted = self.notes.paths.setdefault(path, Noted())
        noted.ids.add(webhook_id)
        noted.arrivals.append((arrived, body))
        noted.first = noted.first or arrived
        noted.last = arrived
        if not path.startswith("/slow/"):
            self.write(OK)
            return
        noted.pending += 1

        def answer() -> None:
            noted.pending -= 1
            self.write(OK)

        asyncio.get_running_loop().call_later(SLOW_SECONDS, answer)

    def control(self, target: str) -> None:
        parts = urlsplit(target)
        paths = parse_qs(parts.query).get("path", [])
        answer: object = {}
        if parts.path == "/_summary":
            answer = self.notes.summary(paths)
        elif parts.path == "/_arrivals":
            answer = self.notes.arrivals(paths)
        elif parts.path == "/_forget":
            for path in paths:
                self.notes.paths.pop(path, None)
        body = json.dumps(answer).encode()
        self.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def serve(port: int) -> None:
    notes = Notes()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Endpoint(notes), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
