"""ExchangeClient: one adapter instance's connection to the exchange API.

It keeps what the platform asks of every adapter (docs/adapters.md of the platform):

- the token pair: signs in lazily; on 401 ``TOKEN_EXPIRED`` refreshes and tries again; when the
  refresh is refused (expired, revoked, reused) or the session ended (``TOKEN_REVOKED``), signs in
  again; one renewal at a time, whatever the number of threads;
- the device binding: ``X-Device-ID`` on every request;
- the device token: kept from each sign-in and sent back in ``X-Device-Token`` when it signs in
  again, so that wrong passwords typed by others, which lock the account, do not lock this
  client out (a restart starts without one);
- retries of what passes by itself (no connection, 429, 503), with back-off, jitter and the
  platform's ``Retry-After``; every operation is safe to repeat: a send carries an
  ``Idempotency-Key`` (the same one on every retry), an ACK or a release repeated is harmless,
  and a receive whose answer was lost hands the same messages again to the same device id.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from exchange_client.errors import (
    AuthenticationError,
    ExchangeError,
    Unavailable,
    error_from_problem,
)
from exchange_client.messages import Message, Outgoing, Sent
from exchange_client.retries import NO_RETRIES, Deadline, RetryPolicy

if TYPE_CHECKING:
    from exchange_client.consumer import Handler, Summary

__version__ = "0.1.0"

logger = logging.getLogger("exchange_client")
_Client = TypeVar("_Client", bound="ExchangeClient")

DEVICE_ID_ENV = "EXCHANGE_DEVICE_ID"
_DEVICE_ID = re.compile(r"[\x20-\x7e]{1,128}")
MAX_BATCH = 100  # messages per batch send, ids or receipt handles per ACK, release or extend
# 401 codes after which new tokens may help: an expired access token (refresh), a session that
# ended (sign in again: a rotated password then fails as AuthenticationError).
_RENEWABLE = {"TOKEN_EXPIRED": True, "TOKEN_REVOKED": False}
# Sign-in answers that no retry changes.
_SIGN_IN_REFUSED = {401, 403, 409, 423, 428}


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


@dataclass(frozen=True)
class _Tokens:
    access: str
    refresh: str

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> _Tokens:
        return cls(access=body["accessToken"], refresh=body["refreshToken"])


def _problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"detail": response.text[:200]}


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), MAX_BATCH):
        yield items[start : start + MAX_BATCH]


class ExchangeClient:
    """An adapter signed in to the platform at ``base_url``, as one consumer instance.

    Thread-safe: threads may share a client for sends; one receive loop per client (per device
    id), since a device id's unacknowledged messages come back on its next receive.
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
        self.retry = retry or RetryPolicy()
        self._password = password
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": f"exchange-client/{__version__}", "X-Device-ID": self.device_id},
            # No cookies kept, none sent: the API authenticates by token. The platform's sign-in
            # answer sets a session cookie, and sent back it cost every request a Cookie header
            # built here and parsed there (docs/performance.md, bench/client.py).
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        )
        self._tokens: _Tokens | None = None
        self._device_token: str | None = None  # renewed by every sign-in
        self._renewing = threading.Lock()
        self.stopping = threading.Event()

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
        self._http.close()

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
        bodies = [message.to_json(uuid.uuid4().hex) for message in messages]
        outcomes: dict[int, Sent | ExchangeError] = {}
        for start in range(0, len(bodies), MAX_BATCH):
            positions = list(range(start, min(start + MAX_BATCH, len(bodies))))
            deadline = Deadline(self.retry.give_up_after)
            attempt = 0
            while positions:
                attempt += 1
                answer = self._call(
                    "POST",
                    "/api/exchange/messages/batch",
                    json={"messages": [bodies[position] for position in positions]},
                ).json()
                again: list[int] = []
                retry_after = 0.0
                for position, result in zip(positions, answer["results"], strict=True):
                    error = result.get("error")
                    if error is not None and error["status"] == 429:
                        again.append(position)
                        retry_after = max(retry_after, error.get("retryAfterSeconds", 0))
                    if error is not None:
                        outcomes[position] = error_from_problem(error["status"], error)
                    else:
                        duplicate = result["status"] == "duplicate"
                        outcomes[position] = Sent(result["messageId"], duplicate=duplicate)
                wait = self.retry.wait(attempt, retry_after)
                if not again or not deadline.allows(wait):
                    break
                logger.warning(
                    "Batch send: %d of %d refused for now; retrying them in %.1f s",
                    len(again),
                    len(positions),
                    wait,
                )
                time.sleep(wait)
                positions = again
        return [outcomes[position] for position in range(len(bodies))]

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
            "GET", f"/api/exchange/messages?{query}", timeout=self._timeout + wait_seconds
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
            timeout=self._timeout + wait_seconds,
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
    ) -> Summary:
        """Receive and handle messages until stopped: see exchange_client.consumer.consume."""
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
        )

    def stop(self) -> None:
        """Ask a running consume() to finish the message in hand, give back the rest it holds,
        and return (what SIGTERM and SIGINT do)."""
        self.stopping.set()

    def logout(self) -> None:
        """End this client's session on the platform (both tokens stop working); the next call
        signs in again. One attempt, no retries: a session a logout could not end still ends when
        its refresh token does."""
        with self._renewing:
            tokens, self._tokens = self._tokens, None
        if tokens is not None:
            refresh = {"refreshToken": tokens.refresh}
            answer = self._exchange("POST", "/api/auth/logout", json=refresh, retry=NO_RETRIES)
            if answer.status_code != 200:
                raise error_from_problem(answer.status_code, _problem(answer))

    # --- Requests, tokens and retries ---------------------------------------------------------

    def _by_receipt(
        self, path: str, messages: Iterable[Message | str], options: dict[str, int]
    ) -> dict[str, str]:
        handles = [m.receipt_handle if isinstance(m, Message) else m for m in messages]
        results: dict[str, str] = {}
        for chunk in _chunks(handles):
            answer = self._call("POST", path, json={"receiptHandles": chunk, **options})
            results.update((r["messageId"], r["status"]) for r in answer.json()["results"])
        return results

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, int] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """An exchange request with the session's access token, renewed when it must be."""
        for renewals in range(3):
            tokens = self._session()
            answer = self._exchange(
                method,
                path,
                json=json,
                params=params,
                headers={"Authorization": f"Bearer {tokens.access}", **(headers or {})},
                timeout=timeout,
            )
            if answer.status_code < 400:
                return answer
            problem = _problem(answer)
            refresh = _RENEWABLE.get(str(problem.get("code")))
            if answer.status_code != 401 or refresh is None or renewals == 2:
                raise error_from_problem(answer.status_code, problem)
            self._renew(tokens, refresh=refresh)
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, int] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> httpx.Response:
        """One request, retried while it fails by itself (no connection, 429, 503) and the
        policy's time allows; the last answer, or Unavailable when none came."""
        policy = retry or self.retry
        deadline = Deadline(policy.give_up_after)
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self._http.request(
                    method,
                    path,
                    json=json,
                    params=params,
                    headers=headers,
                    timeout=timeout if timeout is not None else self._timeout,
                )
            except httpx.TransportError as error:
                wait = policy.wait(attempt, None)
                if not deadline.allows(wait):
                    reason = str(error) or repr(error)
                    raise Unavailable(None, "CONNECTION_FAILED", reason) from error
                logger.warning("%s %s: %r; retrying in %.1f s", method, path, error, wait)
            else:
                if answer.status_code not in (429, 503):
                    return answer
                wait = policy.wait(attempt, _retry_after(answer))
                if not deadline.allows(wait):
                    return answer
                logger.warning(
                    "%s %s: %s; retrying in %.1f s", method, path, answer.status_code, wait
                )
            time.sleep(wait)

    def _session(self) -> _Tokens:
        tokens = self._tokens
        if tokens is None:
            with self._renewing:
                if self._tokens is None:
                    self._tokens = self._sign_in()
                tokens = self._tokens
        return tokens

    def _renew(self, stale: _Tokens, *, refresh: bool) -> None:
        """New tokens in place of ``stale``: refreshed, or by signing in again when the refresh
        is refused. Threads whose call failed with the same tokens wait here for one renewal."""
        with self._renewing:
            if self._tokens is not stale:
                return  # another thread renewed them meanwhile
            if refresh:
                answer = self._exchange(
                    "POST", "/api/auth/refresh", json={"refreshToken": stale.refresh}
                )
                if answer.status_code == 200:
                    self._tokens = _Tokens.from_json(answer.json())
                    return
                if answer.status_code != 401:
                    raise error_from_problem(answer.status_code, _problem(answer))
                logger.info("Refresh refused (%s): signing in again", _problem(answer).get("code"))
            self._tokens = self._sign_in()

    def _sign_in(self) -> _Tokens:
        answer = self._exchange(
            "POST",
            "/api/auth/login/username",
            json={"username": self.login, "password": self._password},
            headers={"X-Device-Token": self._device_token} if self._device_token else None,
        )
        if answer.status_code == 200:
            body = answer.json()
            self._device_token = body.get("deviceToken") or self._device_token
            return _Tokens.from_json(body)
        problem = _problem(answer)
        if answer.status_code in _SIGN_IN_REFUSED:
            raise AuthenticationError(
                answer.status_code,
                str(problem.get("code") or f"HTTP_{answer.status_code}"),
                str(problem.get("detail") or ""),
                problem,
            )
        raise error_from_problem(answer.status_code, problem)
