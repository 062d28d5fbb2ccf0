"""Server-Sent Events as the platform's push stream sends them (GET /api/exchange/messages/stream),
read by the benchmark's own clients: the body of an answer sent in chunks (``Dechunker``), the
events in it (``EventParser``), and for (k)'s thousands of streams a minimal asyncio HTTP/1.1
connection (``Connection``) that reads an answer of either framing, or keeps a stream open.

The platform ends each line of an event with LF and each event with an empty line, and sends a
comment (``: keep-alive``) every EXCHANGE_STREAM_HEARTBEAT_SECONDS; the parser reads that form
(the client's exchange_client.stream reads the whole standard, at a cost the bench need not pay).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

STREAM = "/api/exchange/messages/stream"
SEND = "/api/exchange/messages"
ACK = "/api/exchange/messages/ack"
READ_SIZE = 65536

_LENGTH = re.compile(rb"(?i)\r\ncontent-length: *(\d+)")
_CHUNKED = re.compile(rb"(?i)\r\ntransfer-encoding: *chunked")


@dataclass(frozen=True)
class Event:
    event: str  # "message" or "end"
    id: str | None
    data: str  # the data lines, joined with LF


class EventParser:
    """The events in a stream's body, from its bytes as they come, cut anywhere; comments and
    events without data (a keep-alive) give nothing."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, body: bytes) -> list[Event]:
        *blocks, self.buffer = (self.buffer + body).split(b"\n\n")
        events = []
        for block in blocks:
            kind, event_id, data = "message", None, []
            for line in block.decode().split("\n"):
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    kind = value
                elif name == "id":
                    event_id = value
                elif name == "data":
                    data.append(value)
            if data:
                events.append(Event(kind, event_id, "\n".join(data)))
        return events


class Dechunker:
    """The body of an answer sent with ``Transfer-Encoding: chunked``, from its bytes as they
    come, cut anywhere; ``done`` once the last (empty) chunk came."""

    def __init__(self) -> None:
        self.buffer = b""
        self.left = 0  # bytes of the current chunk still to come
        self.skip = 0  # bytes of the CRLF after a chunk still to come
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self.buffer += data
        body = bytearray()
        while not self.done:
            if self.left:
                part = self.buffer[: self.left]
                body += part
                self.buffer = self.buffer[len(part) :]
                self.left -= len(part)
                if self.left:
                    break
                self.skip = 2
            if self.skip:
                dropped = min(self.skip, len(self.buffer))
                self.buffer = self.buffer[dropped:]
                self.skip -= dropped
                if self.skip:
                    break
            end = self.buffer.find(b"\r\n")
            if end < 0:
                break
            size = int(self.buffer[:end].split(b";", 1)[0], 16)
            self.buffer = self.buffer[end + 2 :]
            if size == 0:
                self.done = True
            self.left = size
        return bytes(body)


def status_of(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


class Connection:
    """One keep-alive HTTP/1.1 connection to the platform: a request at a time, each with headers
    of its own (so that a few connections serve many adapters' ACKs), or one stream held open."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def _send(
        self, method: str, path: str, headers: dict[str, str], body: object = None
    ) -> bytes:
        """Write the request and read the answer's head."""
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        content = b"" if body is None else json.dumps(body).encode()
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        kind = "Content-Type: application/json\r\n" if body is not None else ""
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{fields}{kind}"
            f"Content-Length: {len(content)}\r\n\r\n".encode()
            + content
        )
        try:
            return await reader.readuntil(b"\r\n\r\n")
        except (OSError, asyncio.IncompleteReadError):
            self.close()
            raise

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: object = None
    ) -> tuple[int, bytes]:
        """The answer's status and body. A kept connection that the server has closed meanwhile
        (uvicorn closes one idle for 5 s) is opened again and the request sent once more, as
        HTTP clients do."""
        reused = self.streams is not None
        try:
            head = await self._send(method, path, headers, body)
        except (OSError, asyncio.IncompleteReadError):
            if not reused:
                raise
            head = await self._send(method, path, headers, body)
        return status_of(head), await self._body(head)

    async def _body(self, head: bytes) -> bytes:
        assert self.streams is not None
        reader = self.streams[0]
        try:
            if _CHUNKED.search(head):
                dechunker, content = Dechunker(), b""
                while not dechunker.done:
                    data = await reader.read(READ_SIZE)
                    if not data:
                        raise asyncio.IncompleteReadError(content, None)
                    content += dechunker.feed(data)
                return content
            length = _LENGTH.search(head)
            return await reader.readexactly(int(length[1]) if length else 0)
        except (OSError, asyncio.IncompleteReadError):
            self.close()
            raise

    async def stream(
        self, path: str, headers: dict[str, str]
    ) -> tuple[int, bytes, AsyncIterator[tuple[float, list[Event]]]]:
        """Open a stream: its status, the body of a refusal (empty for a 200), and the events as
        they come, each read with the loop's time (``time.time()``) it was read at."""
        head = await self._send("GET", path, {**headers, "Accept": "text/event-stream"})
        status = status_of(head)
        if status != 200:
            body = await self._body(head)
            self.close()
            return status, body, _nothing()
        assert self.streams is not None
        return status, b"", _events(self.streams[0])

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def _nothing() -> AsyncIterator[tuple[float, list[Event]]]:
    return
    yield  # an async generator that yields nothing


async def _events(reader: asyncio.StreamReader) -> AsyncIterator[tuple[float, list[Event]]]:
    dechunker, parser = Dechunker(), EventParser()
    while not dechunker.done:
        data = await reader.read(READ_SIZE)
        if not data:
            return
        read_at = time.time()
        events = parser.feed(dechunker.feed(data))
        if events:
            yield read_at, events


def sent_at(event: Event) -> float:
    """The send time a message event's payload carries (the bench's payloads: flow.payload)."""
    return float(json.loads(event.data)["payload"]["sentAt"])
