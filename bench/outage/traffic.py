"""The exchange traffic of the outage bench: senders, receivers and a health poller, every
call recorded."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.outage import BATCH, HEALTH_EVERY, LEASE_SECONDS
from bench.throughput.servers import (
    Client,
)

# --- The traffic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    kind: str  # send, receive, ack, health
    started: float  # time.monotonic()
    ended: float
    status: int  # 0: no answer at all (a transport error)
    code: str  # the problem's code; health's status
    retry_after: str | None

    @property
    def ok(self) -> bool:
        return self.status in (200, 201)

    @property
    def ms(self) -> float:
        return 1000 * (self.ended - self.started)

    def answer(self) -> str:
        return f"{self.status} {self.code}".strip() if self.status else "no answer"


class Traffic:
    """Senders, receivers and a health poller, each a thread on a connection of its own, recording
    every call they make until stopped."""

    def __init__(
        self,
        base_url: str,
        senders: list[Client],
        receivers: list[Client],
        *,
        pause: float,
        wait: int,
    ) -> None:
        self.base_url = base_url
        self.pause = pause
        self.wait = wait
        self.calls: list[Call] = []
        self.sent: dict[str, int] = {}  # messageId -> the payload's n, for every 201
        self.received: set[str] = set()
        self.acked: set[str] = set()  # the messages an ACK answered "acked" for
        self.redeliveries: list[int] = []  # per receive: appended, so threads never race on a sum
        self.sending = threading.Event()
        self.receiving = threading.Event()
        self._numbers = itertools.count()
        recipients = [client.principal.adapter_id for client in receivers]
        self._senders = [
            threading.Thread(target=self._send, args=(client, recipients[n:] + recipients[:n]))
            for n, client in enumerate(senders)
        ]
        self._receivers = [
            threading.Thread(target=self._receive, args=(client,)) for client in receivers
        ]
        self._receivers.append(threading.Thread(target=self._poll_health))

    def start(self) -> None:
        self.sending.set()
        self.receiving.set()
        for thread in [*self._senders, *self._receivers]:
            thread.start()

    def stop_sending(self) -> None:
        self.sending.clear()
        for thread in self._senders:
            thread.join()

    def stop(self) -> None:
        self.stop_sending()
        self.receiving.clear()
        for thread in self._receivers:
            thread.join()

    def _call(self, http: httpx.Client, kind: str, method: str, url: str, **kw: Any) -> Any:
        """The JSON of a 200 or 201 answer, else None; the call recorded either way."""
        started = time.monotonic()
        try:
            response = http.request(method, url, **kw)
        except httpx.TransportError as error:
            self.calls.append(Call(kind, started, time.monotonic(), 0, type(error).__name__, None))
            return None
        ended = time.monotonic()
        body: Any = None
        if response.headers.get("Content-Type", "").endswith("json"):
            body = response.json()
        code = ""
        if isinstance(body, dict):
            code = str(body.get("status") if kind == "health" else body.get("code") or "")
        retry_after = response.headers.get("Retry-After")
        self.calls.append(Call(kind, started, ended, response.status_code, code, retry_after))
        return body if response.status_code in (200, 201) else None

    def _client(self, client: Client | None = None) -> httpx.Client:
        headers = client.headers() if client is not None else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=60)

    def _send(self, client: Client, recipients: list[int]) -> None:
        with self._client(client) as http:
            for recipient in itertools.cycle(recipients):
                if not self.sending.is_set():
                    return
                n = next(self._numbers)
                message = {"to": recipient, "type": "outage", "payload": {"n": n}}
                sent = self._call(http, "send", "POST", "/api/exchange/messages", json=message)
                if sent is not None:
                    self.sent[sent["messageId"]] = n
                time.sleep(self.pause)

    def _receive(self, client: Client) -> None:
        receive = (
            f"/api/exchange/messages?max={BATCH}&waitSeconds={self.wait}"
            f"&leaseSeconds={LEASE_SECONDS}"
        )
        with self._client(client) as http:
            while self.receiving.is_set():
                received = self._call(http, "receive", "GET", receive)
                messages = received["messages"] if received is not None else []
                if not messages:
                    time.sleep(self.pause)
                    continue
                ids = [message["messageId"] for message in messages]
                self.received.update(ids)
                self.redeliveries.append(sum(bool(message["redelivered"]) for message in messages))
                acked = self._call(
                    http, "ack", "POST", "/api/exchange/messages/ack", json={"messageIds": ids}
                )
                if acked is None:
                    # The next receive gets them again: this device holds their leases.
                    time.sleep(self.pause)
                    continue
                self.acked.update(
                    r["messageId"] for r in acked["results"] if r["status"] == "acked"
                )

    def _poll_health(self) -> None:
        with self._client() as http:
            while self.receiving.is_set():
                self._call(http, "health", "GET", "/api/actuator/health")
                time.sleep(HEALTH_EVERY)
