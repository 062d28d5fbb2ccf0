"""The errors the client raises: each carries the platform's problem ``code``.

The platform answers every failure with RFC 9457 problem details and a stable ``code``; these
classes group the codes a program branches on. Branch on the class or on ``code``, never on
``detail``, which is a sentence for people.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from exchange_client.timestamps import parse_timestamp


class ExchangeError(Exception):
    """A request the platform refused or could not answer: ``status`` (None when no answer came),
    ``code`` (``TOKEN_REVOKED``, ``SEND_NOT_ALLOWED``...), ``detail`` and the whole ``problem``."""

    def __init__(
        self,
        status: int | None,
        code: str,
        detail: str,
        problem: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}" if status is None else f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}


class AuthenticationError(ExchangeError):
    """Sign-in itself was refused: wrong credentials (``BAD_CREDENTIALS``), a locked account
    (``ACCOUNT_LOCKED``, until ``locked_until``), a disabled or expired one, or credentials to
    renew (``ACTION_RESET_PASSWORD``). Retrying does not help; the owner has to act."""

    @property
    def locked_until(self) -> datetime | None:
        value = self.problem.get("lockedUntil")
        return parse_timestamp(value) if isinstance(value, str) else None


class SessionError(ExchangeError):
    """The session's tokens were refused after the client renewed them (``DEVICE_MISMATCH``,
    ``TOKEN_MALFORMED``...)."""


class ValidationError(ExchangeError):
    """400: the request is wrong (``VALIDATION_FAILED``, ``UNKNOWN_FIELD``, ``MALFORMED_JSON``);
    ``errors`` names the fields."""

    @property
    def errors(self) -> dict[str, list[str]]:
        errors: dict[str, list[str]] = self.problem.get("errors") or {}
        return errors


class PermissionDenied(ExchangeError):
    """403: ``SEND_NOT_ALLOWED``, ``PUBLISH_NOT_ALLOWED`` (a topic this adapter may not publish
    to, or none of that id), or a token that is not an adapter's."""


class NotFound(ExchangeError):
    """404: ``MESSAGE_NOT_FOUND`` or ``NOT_FOUND``."""


class Conflict(ExchangeError):
    """409: ``IDEMPOTENCY_KEY_REUSED`` (the same key with a different message or publication:
    sends and publishes share their keys), ``STREAM_OPEN`` (a receive from a device whose stream
    is open), ``WEBHOOK_ACTIVE`` (the adapter's messages are pushed to its webhook: a receive,
    or a stream's end, says so; the owner turns the webhook off to receive them again)."""


class PayloadTooLarge(ExchangeError):
    """413: the payload or the body is above the platform's limit."""


class Unavailable(ExchangeError):
    """429 or 503 that outlasted the retries, or no answer at all (``status`` None, code
    ``CONNECTION_FAILED``)."""


class StreamReplaced(ExchangeError):
    """The platform ended a stream because another one opened for the same adapter and device
    id (``end`` event ``REPLACED``; ``status`` None). The stream does not reconnect: two
    consumers sharing a device id would take each other's stream in turn."""


class StreamUnsupported(ExchangeError):
    """The platform has no push stream (404 or 405 on its path, or an answer that is not an
    event stream): long-poll instead, as ``consume()`` does by itself."""


_BY_STATUS: dict[int, type[ExchangeError]] = {
    400: ValidationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: Unavailable,
    503: Unavailable,
}


def error_from_problem(status: int, problem: dict[str, Any]) -> ExchangeError:
    code = str(problem.get("code") or f"HTTP_{status}")
    detail = str(problem.get("detail") or problem.get("title") or "")
    error_class = SessionError if status == 401 else _BY_STATUS.get(status, ExchangeError)
    return error_class(status, code, detail, problem)
