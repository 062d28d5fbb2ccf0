"""A reader of Server-Sent Events for the tests: a stream opened over HTTP, read in a thread, its
events (and comments) handed out one by one as they come."""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Event:
    event: str  # "message", "end", or "comment" for a comment line (": keep-alive")
    id: str | None = None
    data: Any = None
    comment: str | None = None


class EventReader:
    """``GET url`` with ``headers`` as a stream. ``status`` and ``headers`` are the answer's;
    ``next()`` gives its events in order; ``ended`` is set when the server closed the stream."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.http = httpx.Client(timeout=httpx.Timeout(30, read=120))
        self.response = self.http.send(
            self.http.build_request("GET", url, headers=headers), stream=True
        )
        self.status = self.response.status_code
        self.headers = self.response.headers
        self.events: queue.Queue[Event] = queue.Queue()
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        if self.status == 200:
            self._thread.start()
        else:
            self.body = json.loads(self.response.read())

    def next(self, *, skip_comments: bool = True, timeout: float = 30) -> Event:
        """The next event (comments skipped unless asked for); AssertionError when none came
        within ``timeout`` seconds."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no event within {timeout} s") from None
            if event.event != "comment" or not skip_comments:
                return event

    def messages(self, count: int) -> list[dict[str, Any]]:
        """The data of the next ``count`` events, each of which must be a message."""
        found = []
        for _ in range(count):
            event = self.next()
            assert event.event == "message", event
            found.append(event.data)
        return found

    def close(self) -> None:
        self.response.close()
        self.http.close()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        data: list[str] = []
        try:
            for line in self.response.iter_lines():
                if line == "":
                    if data or fields:
                        self.events.put(
                            Event(
                                event=fields.get("event", "message"),
                                id=fields.get("id"),
                                data=json.loads("\n".join(data)) if data else None,
                            )
                        )
                    fields, data = {}, []
                elif line.startswith(":"):
                    self.events.put(Event(event="comment", comment=line[1:].strip()))
                else:
                    name, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if name == "data":
                        data.append(value)
                    else:
                        fields[name] = value
        except (httpx.HTTPError, RuntimeError):
            pass  # closed by the test
        finally:
            self.ended.set()
