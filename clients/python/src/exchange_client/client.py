"""ExchangeClient: one adapter instance's connection to the exchange API.

It keeps what the platform asks of every adapter (docs/adapters.md of the platform):

- the token pair, renewed when it must be, and the device token (exchange_client.session);
- the device binding: ``X-Device-ID`` on every request;
- retries of what passes by itself (no connection, 429, 503), with back-off, jitter and the
  platform's ``Retry-After``; every operation is safe to repeat: a send or a publish carries an
  ``Idempotency-Key`` (the same one on every retry), an ACK or a release repeated is harmless,
  and a receive whose answer was lost hands the same messages again to the same device id.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx

from exchange_client.batches import MAX_BATCH, batches_post
from exchange_client.errors import ExchangeError
from exchange_client.messages import Message, Outgoing, Publication, Published, Sent
from exchange_client.retries import RetryPolicy
from exchange_client.session import Session
from exchange_client.stream import IDLE_TIMEOUT, MessageStream

if TYPE_CHECKING:
    from exchange_client.consumer import Handler, Summary

__version__ = "0.1.0"

_Client = TypeVar("_Client", bound="ExchangeClient")

DEVICE_ID_ENV = "EXCHANGE_DEVICE_ID"
_DEVICE_ID = re.compile(r"[\x20-\x7e]{1,128}")
# Ids or receipt handles per ACK, release or extend: as many as a batch's messages (MAX_BATCH).


def default_device_id() -> str:
    """``EXCHANGE_DEVICE_ID``, else this host's name and process id.

    Set a stable id per consumer instance: unacknowledged messages come back at once only to the
    same id (another id gets them once their lease runs out), and two consumers that share an id
    hand each other their leases.
    """
    configured = os.environ.get(DEVICE_ID_ENV)
    if configured:
        return configured
    name = f"{socket.gethostname()}-{os.getpid()}"
    return "".join(c if " " <= c <= "~" else "-" for c in name)[:128]


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), MAX_BATCH):
        yield items[start : start + MAX_BATCH]


class ExchangeClient:
    """An adapter signed in to the platform at ``base_url``, as one consumer instance.

    Thread-safe: threads may share a client for sends; one receive loop or stream per client
    (per device id), since a device id's unacknowledged messages come back on its next receive,
    and its newest stream replaces the one open.
    """

    def __init__(
        self,
        base_url: str,
        login: str,
        password: str,
        *,
        device_id: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.login = login
        self.device_id = device_id or default_device_id()
        if not _DEVICE_ID.fullmatch(self.device_id):
            raise ValueError("device_id must be 1 to 128 printable ASCII characters")
        http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": f"exchange-client/{__version__}", "X-Device-ID": self.device_id},
            # No cookies kept, none sent: the API authenticates by token. The platform's sign-in
            # answer sets a session cookie, and sent back it cost every request a Cookie header
            # built here and parsed there (docs/performance.md, bench/client.py).
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        )
        self._session = Session(
            http, login, password, retry=retry or RetryPolicy(), timeout=timeout
        )
        self._call = self._session.call
        self.stopping = threading.Event()
        # Reentrant: stop() may run in a signal handler that interrupted this thread's stream().
        self._streams_lock = threading.RLock()
        self._streams: weakref.WeakSet[MessageStream] = weakref.WeakSet()

    @property
    def retry(self) -> RetryPolicy:
        """When and how long to wait before trying again what passes by itself."""
        return self._session.retry

    @retry.setter
    def retry(self, policy: RetryPolicy) -> None:
        self._session.retry = policy

    @classmethod
    def from_env(cls, **options: Any) -> ExchangeClient:
        """A client configured by ``EXCHANGE_URL``, ``EXCHANGE_LOGIN``, ``EXCHANGE_PASSWORD`` and
        ``EXCHANGE_DEVICE_ID`` (KeyError names a missing one)."""
        return cls(
            os.environ["EXCHANGE_URL"],
            os.environ["EXCHANGE_LOGIN"],
            os.environ["EXCHANGE_PASSWORD"],
            **options,
        )

    def __enter__(self: _Client) -> _Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._session.http.close()

    # --- The exchange API ---------------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """``{adapterId, login, ownerId, sessionId, deviceId, accessTokenExpiresAt}``."""
        body: dict[str, Any] = self._call("GET", "/api/exchange/whoami").json()
        return body

    def stats(self) -> dict[str, Any]:
        """``{available, inFlight, delayed, deadLettered, oldestAgeSeconds}`` of this queue."""
        body: dict[str, Any] = self._call("GET", "/api/exchange/stats").json()
        return body

    def send(
        self,
        to: int,
        type: str,
        payload: Any,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Sent:
        """Queue a message for adapter ``to``. It carries an ``Idempotency-Key`` (a new random one
        when none is given) on every retry, so a retried send never queues twice; pass a key of
        your own data to make sends across restarts safe too."""
        body: dict[str, Any] = {"to": to, "type": type, "payload": payload}
        if headers:
            body["headers"] = dict(headers)
        key = idempotency_key or uuid.uuid4().hex
        answer = self._call(
            "POST", "/api/exchange/messages", json=body, headers={"Idempotency-Key": key}
        ).json()
        return Sent(message_id=answer["messageId"], duplicate=bool(answer.get("duplicate")))

    def send_batch(self, messages: Iterable[Outgoing]) -> list[Sent | ExchangeError]:
        """Queue many messages, up to 100 per request: the outcome of each, in order, ``Sent``
        or the ``ExchangeError`` that refused it alone (``PermissionDenied``, ``Conflict``,
        ``PayloadTooLarge``, ``ValidationError``...): one message's failure does not fail the
        others.

        Each message carries an idempotency key (a new random one when it has none), the same
        on every retry, so a retried batch never queues twice. Messages refused for what passes
        by itself (429 ``QUEUE_FULL`` or ``RATE_LIMITED``) are sent again, with their keys,
        under the client's retry policy, as a single send would be; those still refused when
        it gives up are ``Unavailable``.
        """
        return batches_post(
            self._call,
            self.retry,
            "/api/exchange/messages/batch",
            [message.to_json(uuid.uuid4().hex) for message in messages],
            lambda result: Sent(result["messageId"], duplicate=result["status"] == "duplicate"),
            "Batch send",
        )

    def publish(
        self,
        topic_id: int,
        type: str,
        payload: Any,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Published:
        """Publish a message to topic ``topic_id``: each subscriber whose queue has room gets a
        copy of its own (``recipients``; a full queue's is ``refused``, the publish is not).
        PermissionDenied (``PUBLISH_NOT_ALLOWED``) when this adapter may not publish to it, or
        it does not exist. Like ``send``, it carries an ``Idempotency-Key`` (the same namespace
        as your sends' keys; a new random one when none is given) on every retry, so a retried
        publish never publishes twice."""
        body: dict[str, Any] = {"type": type, "payload": payload}
        if headers:
            body["headers"] = dict(headers)
        key = idempotency_key or uuid.uuid4().hex
        answer = self._call(
            "POST", _topic_path(topic_id), json=body, headers={"Idempotency-Key": key}
        ).json()
        return Published.from_json(answer, duplicate=bool(answer.get("duplicate")))

    def publish_batch(
        self, topic_id: int, items: Iterable[Publication]
    ) -> list[Published | ExchangeError]:
        """Publish many messages to topic ``topic_id``, up to 100 per request: the outcome of
        each, in order, ``Published`` or the ``ExchangeError`` that refused it alone, keyed,
        split and sent again after a 429 exactly as ``send_batch`` does. Every one is
        PermissionDenied (``PUBLISH_NOT_ALLOWED``) when this adapter may not publish there."""
        return batches_post(
            self._call,
            self.retry,
            f"{_topic_path(topic_id)}/batch",
            [item.to_json(uuid.uuid4().hex) for item in items],
            lambda result: Published.from_json(result, duplicate=result["status"] == "duplicate"),
            "Batch publish",
        )

    def receive(
        self, max_messages: int = 1, wait_seconds: int = 0, lease_seconds: int = 30
    ) -> list[Message]:
        """Lease up to ``max_messages`` (1..100), waiting up to ``wait_seconds`` (0..20) for one.

        What this device id received and did not acknowledge comes first, ``redelivered``.
        """
        # The query string written out: handed ``params``, httpx encodes them and parses and
        # rebuilds the URL on every call, a tenth of a batch-1 loop's CPU (docs/performance.md).
        query = f"max={max_messages}&waitSeconds={wait_seconds}&leaseSeconds={lease_seconds}"
        answer = self._call(
            "GET", f"/api/exchange/messages?{query}", timeout=self._session.timeout + wait_seconds
        ).json()
        return [Message.from_json(raw) for raw in answer["messages"]]

    def ack(self, messages: Iterable[Message | str]) -> dict[str, str]:
        """Acknowledge messages (or message ids): ``{messageId: status}``, each ``acked``,
        ``alreadyAcked``, ``deadLettered`` or ``notFound``."""
        ids = [m.message_id if isinstance(m, Message) else m for m in messages]
        results: dict[str, str] = {}
        for chunk in _chunks(ids):
            answer = self._call("POST", "/api/exchange/messages/ack", json={"messageIds": chunk})
            results.update((r["messageId"], r["status"]) for r in answer.json()["results"])
        return results

    def ack_and_receive(
        self,
        messages: Iterable[Message | str],
        max_messages: int = 1,
        wait_seconds: int = 0,
        lease_seconds: int = 30,
    ) -> tuple[dict[str, str], list[Message]]:
        """Acknowledge messages (or message ids), then receive as ``receive()`` would, in one
        request (one per 100 ids): ``({messageId: status}, messages)``. The platform acknowledges
        before it receives, so nothing acknowledged comes back."""
        ids = [m.message_id if isinstance(m, Message) else m for m in messages]
        if not ids:
            return {}, self.receive(max_messages, wait_seconds, lease_seconds)
        *before, last = _chunks(ids)
        results = self.ack(id_ for chunk in before for id_ in chunk)
        receive = {"max": max_messages, "waitSeconds": wait_seconds, "leaseSeconds": lease_seconds}
        answer = self._call(
            "POST",
            "/api/exchange/messages/ack",
            json={"messageIds": last, "receive": receive},
            timeout=self._session.timeout + wait_seconds,
        ).json()
        results.update((r["messageId"], r["status"]) for r in answer["results"])
        return results, [Message.from_json(raw) for raw in answer["messages"]]

    def release(self, messages: Iterable[Message | str], delay_seconds: int = 0) -> dict[str, str]:
        """Give messages (or receipt handles) back, to be received again after ``delay_seconds``:
        ``{messageId: status}``, each ``released``, ``leaseLost`` or ``notFound``."""
        return self._by_receipt(
            "/api/exchange/messages/nack", messages, {"delaySeconds": delay_seconds}
        )

    def extend(self, messages: Iterable[Message | str], lease_seconds: int) -> dict[str, str]:
        """Hold messages (or receipt handles) ``lease_seconds`` longer from now:
        ``{messageId: status}``, each ``extended``, ``leaseLost`` or ``notFound``."""
        return self._by_receipt(
            "/api/exchange/messages/lease", messages, {"leaseSeconds": lease_seconds}
        )

    def stream(
        self, *, max_outstanding: int = 100, lease: int = 30, idle_timeout: float = IDLE_TIMEOUT
    ) -> MessageStream:
        """The messages the platform pushes as they come, up to ``max_outstanding`` (1..1000)
        unsettled at a time, each leased ``lease`` seconds: see exchange_client.stream. It
        connects when first iterated and reconnects by itself, taking a connection silent for
        ``idle_timeout`` seconds for dead; it ends when closed or when ``stop()`` is called;
        StreamReplaced when another stream opened with this device id. Settle what it yields
        with ``ack``, ``release`` or ``extend``."""
        stream = MessageStream(
            self._session, max_outstanding=max_outstanding, lease=lease, idle_timeout=idle_timeout
        )
        with self._streams_lock:
            self._streams.add(stream)
        return stream

    def consume(
        self,
        handler: Handler,
        *,
        batch: int = 10,
        wait: int = 20,
        lease: int = 30,
        until_empty: bool = False,
        release_delay: int = 0,
        handle_signals: bool = True,
        transport: Literal["stream", "poll"] = "stream",
        ack_batch: int = 50,
        ack_interval_ms: int = 20,
    ) -> Summary:
        """Receive and handle messages until stopped, then sign out: see
        exchange_client.consumer.consume."""
        from exchange_client.consumer import consume

        return consume(
            self,
            handler,
            batch=batch,
            wait=wait,
            lease=lease,
            until_empty=until_empty,
            release_delay=release_delay,
            handle_signals=handle_signals,
            transport=transport,
            ack_batch=ack_batch,
            ack_interval_ms=ack_interval_ms,
        )

    def stop(self) -> None:
        """Ask a running consume() to finish the message in hand, give back the rest it holds,
        and return (what SIGTERM and SIGINT do); end every stream() of this client. Safe from
        any thread and from a signal handler."""
        self.stopping.set()
        with self._streams_lock:
            streams = list(self._streams)
        for stream in streams:
            stream.close()

    def logout(self) -> None:
        """End this client's session on the platform (both tokens stop working); the next call
        signs in again. One attempt, no retries: a session a logout could not end still ends when
        its refresh token does."""
        self._session.logout()

    def end_session(self, refresh_token: str) -> None:
        """End the session of ``refresh_token``, a session this client did not start (another
        program's, or one a stopped one left behind): both its tokens stop working. One attempt,
        no retries; no sign-in needed."""
        self._session.end(refresh_token)

    def _by_receipt(
        self, path: str, messages: Iterable[Message | str], options: dict[str, int]
    ) -> dict[str, str]:
        handles = [m.receipt_handle if isinstance(m, Message) else m for m in messages]
        results: dict[str, str] = {}
        for chunk in _chunks(handles):
            answer = self._call("POST", path, json={"receiptHandles": chunk, **options})
            results.update((r["messageId"], r["status"]) for r in answer.json()["results"])
        return results


def _topic_path(topic_id: int) -> str:
    # :d refuses anything but an integer: no other text reaches the path.
    return f"/api/exchange/topics/{topic_id:d}/messages"
