"""A problem's ``title``: the reason phrase of its status as RFC 9110 names it, in the request's
language (RFC 9457 lets a title be localised; ``code`` is what clients branch on). Python's own
phrases keep names RFC 9110 replaced ("Request Entity Too Large")."""

from __future__ import annotations

from http import HTTPStatus

from django.utils.translation import gettext_lazy as _

# Every status the platform answers with a problem; another one keeps Python's phrase.
_TITLES = {
    400: _("Bad Request"),
    401: _("Unauthorized"),
    403: _("Forbidden"),
    404: _("Not Found"),
    405: _("Method Not Allowed"),
    406: _("Not Acceptable"),
    409: _("Conflict"),
    413: _("Content Too Large"),
    415: _("Unsupported Media Type"),
    422: _("Unprocessable Content"),
    423: _("Locked"),
    428: _("Precondition Required"),
    429: _("Too Many Requests"),
    500: _("Internal Server Error"),
    503: _("Service Unavailable"),
}


def problem_title(status: int) -> str:
    title = _TITLES.get(status)
    return str(title) if title is not None else HTTPStatus(status).phrase
