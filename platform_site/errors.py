"""The one error shape: RFC 9457 problem details with a stable ``code``.

Services raise ``ApplicationError`` subclasses. Three interfaces turn failures into the same body:
the DRF exception handler (API views), ``ApiProblemMiddleware`` (plain Django views under the API
paths, unhandled exceptions, and Django's own error pages there) and the 404/500 handlers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from django import db
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django_ratelimit.exceptions import Ratelimited
from rest_framework import exceptions as drf
from rest_framework.response import Response

from platform_site.problem_titles import problem_title
from platform_site.serializers import has_unknown_field

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
API_PATH_PREFIXES = ("/api/", "/actuator/")


class ApplicationError(Exception):
    """A failure the client can act on: an HTTP status, a stable code, a sentence, extra members.

    ``extra`` holds the top-level members docs/errors.md names for the error (``lockedUntil``,
    ``attemptsRemaining``...), already in their wire form.
    """

    status: int = 400
    code: str = "BAD_REQUEST"
    default_detail: ClassVar[str] = "The request cannot be processed."

    def __init__(
        self,
        detail: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.detail = detail or self.default_detail
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})
        super().__init__(self.detail)

    def body(self) -> dict[str, Any]:
        return {
            "type": "about:blank",
            "title": problem_title(self.status),
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
            **self.extra,
        }


class ValidationFailed(ApplicationError):
    code = "VALIDATION_FAILED"
    default_detail = "Some fields are invalid; see errors."

    def __init__(self, errors: Mapping[str, list[str]], detail: str | None = None) -> None:
        super().__init__(detail, extra={"errors": dict(errors)})


class UnknownField(ValidationFailed):
    code = "UNKNOWN_FIELD"
    default_detail = "The request has fields this endpoint does not accept; see errors."


class MalformedBody(ApplicationError):
    code = "MALFORMED_JSON"
    default_detail = "The request body is not valid JSON."


class TokenMissing(ApplicationError):
    status = 401
    code = "TOKEN_MISSING"
    default_detail = "Send the access token in the header Authorization: Bearer <token>."


class TokenMalformed(ApplicationError):
    status = 401
    code = "TOKEN_MALFORMED"
    default_detail = "The access token cannot be read: send Bearer and the JWT without line breaks."


class PermissionDeniedError(ApplicationError):
    status = 403
    code = "PERMISSION_DENIED"
    default_detail = "You may not do this."


class NotFound(ApplicationError):
    status = 404
    code = "NOT_FOUND"
    default_detail = "Nothing is here."


class MethodNotAllowed(ApplicationError):
    status = 405
    code = "METHOD_NOT_ALLOWED"
    default_detail = "This method is not allowed here."


class NotAcceptable(ApplicationError):
    status = 406
    code = "NOT_ACCEPTABLE"
    default_detail = "None of the media types in Accept can be produced here."


class PayloadTooLarge(ApplicationError):
    status = 413
    code = "PAYLOAD_TOO_LARGE"
    default_detail = "The request body is too large."


class UnsupportedMediaType(ApplicationError):
    status = 415
    code = "UNSUPPORTED_MEDIA_TYPE"
    default_detail = "Send the body as application/json."


class RateLimited(ApplicationError):
    status = 429
    code = "RATE_LIMITED"
    default_detail = "Too many requests; try again later."

    def __init__(
        self, *, retry_after_seconds: int | None = None, detail: str | None = None
    ) -> None:
        headers = {"Cache-Control": "no-store"}
        extra: dict[str, Any] = {}
        if retry_after_seconds is not None:
            headers["Retry-After"] = str(retry_after_seconds)
            headers["X-Rate-Limit-Retry-After-Seconds"] = str(retry_after_seconds)
            extra["retryAfterSeconds"] = retry_after_seconds
        super().__init__(detail, extra=extra, headers=headers)


class ServiceUnavailable(ApplicationError):
    """A dependency is unreachable for a moment: 503 with ``Retry-After: 1``, never cached."""

    status = 503
    code = "SERVICE_UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1", "Cache-Control": "no-store"})


class DatabaseUnavailable(ServiceUnavailable):
    default_detail = "The database is unreachable for a moment; retry shortly."


class CacheUnavailable(ServiceUnavailable):
    default_detail = "The shared cache is unreachable for a moment; retry shortly."


class ServerBusy(ServiceUnavailable):
    """This server process holds as many waiting requests as it may (a long poll's limit): its
    capacity, not the client's rate. Another process, or this one in a moment, has room."""

    code = "SERVER_BUSY"
    default_detail = "This server is out of room for waiting requests; retry shortly."


class InternalError(ApplicationError):
    status = 500
    code = "INTERNAL_ERROR"
    default_detail = "The server failed to handle this request; it has been logged."


class HttpError(ApplicationError):
    """An error status Django answered by itself (a CSRF failure, a disallowed host...)."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.code = HTTPStatus(status).name
        super().__init__(HTTPStatus(status).description or HTTPStatus(status).phrase)


# Codes for error responses that arrive without an ApplicationError (Django's own 4xx pages,
# HttpResponseNotAllowed...), by status.
_ERROR_BY_STATUS: dict[int, type[ApplicationError]] = {
    error.status: error
    for error in (
        ApplicationError,
        PermissionDeniedError,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        PayloadTooLarge,
        UnsupportedMediaType,
        RateLimited,
        InternalError,
    )
}


def is_api_path(path: str) -> bool:
    return path.startswith(API_PATH_PREFIXES) or path in {"/api", "/actuator"}


def problem_response(error: ApplicationError) -> HttpResponse:
    response = JsonResponse(
        error.body(),
        status=error.status,
        content_type=PROBLEM_CONTENT_TYPE,
        json_dumps_params={"separators": (",", ":")},
    )
    for name, value in error.headers.items():
        response[name] = value
    return response


def error_for_status(status: int) -> ApplicationError:
    error_class = _ERROR_BY_STATUS.get(status)
    if error_class is not None:
        return error_class()
    return HttpError(status)


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF error details as ``{"field": [...], "parent.child": [...], "items[0].x": [...]}``."""
    if isinstance(detail, Mapping):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if isinstance(key, int):
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flatten_errors(value, name).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    key = prefix or str(settings.REST_FRAMEWORK["NON_FIELD_ERRORS_KEY"])
    if isinstance(detail, list):
        if all(not isinstance(item, Mapping | list) for item in detail):
            return {key: [str(item) for item in detail]}
        flat = {}
        for index, item in enumerate(detail):
            if not item:
                continue
            for field, messages in flatten_errors(item, f"{prefix}[{index}]").items():
                flat.setdefault(field, []).extend(messages)
        return flat
    return {key: [str(detail)]}


def application_error_for(exc: BaseException) -> ApplicationError | None:
    """The problem a known exception stands for; None for a bug (answered as a logged 500)."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, Ratelimited):  # a PermissionDenied subclass, so it goes first
        return RateLimited()
    if isinstance(exc, drf.ValidationError):
        errors = flatten_errors(exc.detail)
        return UnknownField(errors) if has_unknown_field(exc.detail) else ValidationFailed(errors)
    if isinstance(exc, DjangoValidationError):
        errors = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
        return ValidationFailed(flatten_errors(errors))
    if isinstance(exc, drf.ParseError):
        return MalformedBody(str(exc.detail))
    # DRF makes these 403 when the view's authenticators offer no WWW-Authenticate challenge.
    if isinstance(exc, drf.NotAuthenticated) and exc.status_code == 401:
        return TokenMissing()
    if isinstance(exc, drf.AuthenticationFailed) and exc.status_code == 401:
        return TokenMalformed()
    if isinstance(exc, drf.PermissionDenied | drf.NotAuthenticated | drf.AuthenticationFailed):
        return PermissionDeniedError()
    if isinstance(exc, PermissionDenied):
        return PermissionDeniedError()
    if isinstance(exc, drf.NotFound | Http404):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        return MethodNotAllowed(str(exc.detail))
    if isinstance(exc, drf.NotAcceptable):
        return NotAcceptable()
    if isinstance(exc, drf.UnsupportedMediaType):
        return UnsupportedMediaType(str(exc.detail))
    if isinstance(exc, drf.Throttled):
        wait = getattr(exc, "wait", None)
        return RateLimited(retry_after_seconds=None if wait is None else math.ceil(wait))
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, drf.APIException):
        error = error_for_status(exc.status_code)
        error.detail = str(exc.detail)
        return error
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every API failure as problem+json; bugs go on to the middleware."""
    error = application_error_for(exc)
    if error is None:
        return None
    headers = dict(error.headers)
    challenge = getattr(exc, "auth_header", None)  # set by APIView for 401s
    if challenge:
        headers["WWW-Authenticate"] = challenge
    # No set_rollback(): ATOMIC_REQUESTS stays off, services own their transactions.
    return Response(
        error.body(), status=error.status, headers=headers, content_type=PROBLEM_CONTENT_TYPE
    )


def _is_json(response: HttpResponse) -> bool:
    content_type = response.get("Content-Type", "").split(";")[0].strip()
    return content_type == "application/json" or content_type.endswith("+json")


def body_limit(view: Any) -> int:
    """The largest request body ``view`` (a view function, or a DRF view class) takes: the setting
    its class names in ``body_limit_setting`` (the batch send's is larger), else
    HTTP_MAX_BODY_BYTES."""
    view_class = getattr(view, "cls", view)  # DRF's as_view() keeps the class it was made of
    limit: int = getattr(settings, getattr(view_class, "body_limit_setting", "HTTP_MAX_BODY_BYTES"))
    return limit


class ApiProblemMiddleware:
    """Under the API paths, no HTML error page and no stack trace: problem+json instead.

    It rejects bodies above the view's body_limit() before anything reads them, answers unhandled
    exceptions with a logged 500 (also when DEBUG would show Django's technical page), and rewrites
    error responses that Django produced as HTML or plain text.
    """

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api_path(request.path_info):
            response: HttpResponse = self.get_response(request)
            return response
        response = self.get_response(request)
        if response.status_code >= 400 and not _is_json(response):
            error = error_for_status(response.status_code)
            converted = problem_response(error)
            for header in ("Allow", "Retry-After", "WWW-Authenticate"):
                if header in response:
                    converted[header] = response[header]
            return converted
        return response

    def process_view(
        self, request: HttpRequest, view: Any, args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if not is_api_path(request.path_info):
            return None
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > body_limit(view):
            return problem_response(PayloadTooLarge())
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_api_path(request.path_info):
            return None
        error = application_error_for(exception)
        if error is None and isinstance(exception, (db.OperationalError, db.InterfaceError)):
            # A restart or failover of PostgreSQL, not a bug: 503 tells clients to retry and
            # keeps the operators' 5xx-as-bugs alerts clean. Pooled connections heal themselves.
            logger.warning("Database unavailable: %s", exception)
            request.unhandled_exception = type(exception).__name__  # type: ignore[attr-defined]
            error = DatabaseUnavailable()
        if error is None:
            logger.error("Unhandled exception", exc_info=exception)
            request.unhandled_exception = type(exception).__name__  # type: ignore[attr-defined]
            error = InternalError()
        return problem_response(error)


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path_info):
        return problem_response(NotFound())
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path_info):
        return problem_response(InternalError())
    return defaults.server_error(request)
