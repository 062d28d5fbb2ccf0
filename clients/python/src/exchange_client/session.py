"""The signed-in session under every call: the token pair and its renewal, the device token, and
requests retried while they fail by themselves.

- The token pair: signed in lazily; on 401 ``TOKEN_EXPIRED`` refreshed and the request tried
  again; when the refresh is refused (expired, revoked, reused) or the session ended
  (``TOKEN_REVOKED``), signed in again; one renewal at a time, whatever the number of threads.
- The device token: kept from each sign-in and sent back in ``X-Device-Token`` when signing in
  again, so that wrong passwords typed by others, which lock the account, do not lock this
  client out (a restart starts without one).
- Retries of what passes by itself (no connection, 429, 503), with back-off, jitter and the
  platform's ``Retry-After``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import httpx

from exchange_client.errors import (
    AuthenticationError,
    Unavailable,
    error_from_problem,
)
from exchange_client.retries import NO_RETRIES, Deadline, RetryPolicy

logger = logging.getLogger("exchange_client")

# 401 codes after which new tokens may help: an expired access token (refresh), a session that
# ended (sign in again: a rotated password then fails as AuthenticationError).
RENEWABLE = {"TOKEN_EXPIRED": True, "TOKEN_REVOKED": False}
# Sign-in answers that no retry changes.
_SIGN_IN_REFUSED = {401, 403, 409, 423, 428}
# A connection not made within this long is not coming: the address is wrong or unreachable.
CONNECT_SECONDS = 10.0

Timeout: TypeAlias = "float | httpx.Timeout"


@dataclass(frozen=True)
class Tokens:
    access: str
    refresh: str

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Tokens:
        return cls(access=body["accessToken"], refresh=body["refreshToken"])


def problem_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"detail": response.text[:200]}


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


class Session:
    """One adapter's credentials and tokens on ``http`` (an httpx client bound to the platform and
    to the device id). Thread-safe."""

    def __init__(
        self,
        http: httpx.Client,
        login: str,
        password: str,
        *,
        retry: RetryPolicy,
        timeout: float,
    ) -> None:
        self.http = http
        self.login = login
        self.retry = retry
        self.timeout = timeout
        self._password = password
        self._tokens: Tokens | None = None
        self._device_token: str | None = None  # renewed by every sign-in
        self._renewing = threading.Lock()
        self._answered = False  # whether the platform has answered anything yet

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
    ) -> httpx.Response:
        """An exchange request with the session's access token, renewed when it must be; the
        answer (below 400), or the ExchangeError that refused it."""
        answer, _ = self.open(method, path, json=json, headers=headers, timeout=timeout)
        return answer

    def open(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        stream: bool = False,
        interrupt: threading.Event | None = None,
    ) -> tuple[httpx.Response, Tokens]:
        """As ``call``, with the tokens the answer was given under (to renew them when a stream
        that outlives them is ended). With ``stream``, the body is not read: close the answer."""
        for renewals in range(3):
            tokens = self.tokens()
            answer = self.exchange(
                method,
                path,
                json=json,
                headers={"Authorization": f"Bearer {tokens.access}", **(headers or {})},
                timeout=timeout,
                stream=stream,
                interrupt=interrupt,
            )
            if answer.status_code < 400:
                return answer, tokens
            problem = problem_of(answer)
            refresh = RENEWABLE.get(str(problem.get("code")))
            if answer.status_code != 401 or refresh is None or renewals == 2:
                raise error_from_problem(answer.status_code, problem)
            self.renew(tokens, refresh=refresh)
        raise AssertionError("unreachable")  # pragma: no cover

    def exchange(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        retry: RetryPolicy | None = None,
        stream: bool = False,
        interrupt: threading.Event | None = None,
    ) -> httpx.Response:
        """One request, retried while it fails by itself (no connection, 429, 503) and the
        policy's time allows; the last answer, or Unavailable when none came. With ``stream``,
        an answer of 200 to 299 comes with its body unread; ``interrupt`` set cuts the waits
        between tries short (Unavailable)."""
        policy = retry or self.retry
        deadline = Deadline(policy.give_up_after)
        first = Deadline(policy.first_answer_within)
        request = self.http.build_request(
            method,
            path,
            json=json,
            headers=headers,
            timeout=_bounded_connect(self.timeout if timeout is None else timeout),
        )
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self.http.send(request, stream=stream)
                self._answered = True
                if stream and not 200 <= answer.status_code < 300:
                    try:  # an error's problem+json: read whole, the connection given back
                        answer.read()
                    finally:
                        answer.close()
            except httpx.TransportError as error:
                wait = policy.wait(attempt, None)
                if not deadline.allows(wait) or not (self._answered or first.allows(wait)):
                    reason = " ".join((str(error) or repr(error)).split())
                    detail = f"no answer from {self.http.base_url}: {reason}"
                    raise Unavailable(None, "CONNECTION_FAILED", detail) from error
                # Before any answer a failure is most likely a wrong address: the error says so.
                level = logging.WARNING if self._answered else logging.INFO
                logger.log(level, "%s %s: %r; retrying in %.1f s", method, path, error, wait)
            else:
                if answer.status_code not in (429, 503):
                    return answer
                wait = policy.wait(attempt, _retry_after(answer))
                if not deadline.allows(wait):
                    return answer
                logger.warning(
                    "%s %s: %s; retrying in %.1f s", method, path, answer.status_code, wait
                )
            if interrupt is None:
                time.sleep(wait)
            elif interrupt.wait(wait):
                raise Unavailable(None, "CONNECTION_FAILED", "interrupted while retrying")

    def tokens(self) -> Tokens:
        tokens = self._tokens
        if tokens is None:
            with self._renewing:
                if self._tokens is None:
                    self._tokens = self._sign_in()
                tokens = self._tokens
        return tokens

    def renew(self, stale: Tokens, *, refresh: bool) -> None:
        """New tokens in place of ``stale``: refreshed, or by signing in again when the refresh
        is refused. Threads whose call failed with the same tokens wait here for one renewal."""
        with self._renewing:
            if self._tokens is not stale:
                return  # another thread renewed them meanwhile
            if refresh:
                answer = self.exchange(
                    "POST", "/api/auth/refresh", json={"refreshToken": stale.refresh}
                )
                if answer.status_code == 200:
                    self._tokens = Tokens.from_json(answer.json())
                    return
                if answer.status_code != 401:
                    raise error_from_problem(answer.status_code, problem_of(answer))
                logger.info(
                    "Refresh refused (%s): signing in again", problem_of(answer).get("code")
                )
            self._tokens = self._sign_in()

    def logout(self) -> None:
        """End the session on the platform (both tokens stop working); the next call signs in
        again. One attempt, no retries: a session a logout could not end still ends when its
        refresh token does."""
        with self._renewing:
            tokens, self._tokens = self._tokens, None
        if tokens is not None:
            self.end(tokens.refresh)

    def end(self, refresh_token: str) -> None:
        """End the session of ``refresh_token``, this client's or not; one attempt."""
        refresh = {"refreshToken": refresh_token}
        answer = self.exchange("POST", "/api/auth/logout", json=refresh, retry=NO_RETRIES)
        if answer.status_code != 200:
            raise error_from_problem(answer.status_code, problem_of(answer))

    def _sign_in(self) -> Tokens:
        answer = self.exchange(
            "POST",
            "/api/auth/login/username",
            json={"username": self.login, "password": self._password},
            headers={"X-Device-Token": self._device_token} if self._device_token else None,
        )
        if answer.status_code == 200:
            body = answer.json()
            self._device_token = body.get("deviceToken") or self._device_token
            return Tokens.from_json(body)
        problem = problem_of(answer)
        if "json" not in answer.headers.get("Content-Type", ""):
            # No problem details: whatever answers there is not the platform.
            detail = (
                f"{answer.request.url} answered {answer.status_code} without problem details: "
                "is this the platform's address?"
            )
            raise error_from_problem(answer.status_code, {**problem, "detail": detail})
        if answer.status_code in _SIGN_IN_REFUSED:
            raise AuthenticationError(
                answer.status_code,
                str(problem.get("code") or f"HTTP_{answer.status_code}"),
                str(problem.get("detail") or ""),
                problem,
            )
        raise error_from_problem(answer.status_code, problem)


def _bounded_connect(timeout: Timeout) -> Timeout:
    """``timeout`` with its connect phase at most CONNECT_SECONDS: a long poll's read may wait
    50 s, a connection that takes that long is not going to be made."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS))
