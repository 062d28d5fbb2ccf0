"""Every problem the API answers in the tests, held against what the OpenAPI schema declares.

AnswerRecorder (a middleware that tests/conftest.py puts in front of all others for the whole
run) records, for each problem+json answer of an operation of /api/schema/, the operation (method
and path template), the status, the ``code`` and the extra members. ``undeclared`` says which of
them the schema does not declare: the status among the operation's responses, the code named in
that response's description, each member named with its code. The stack test of schemathesis
holds a live server's answers to the same rule (``undeclared_answer``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from platform_site.errors import PROBLEM_CONTENT_TYPE

# The members every problem has; the others are the error's own (lockedUntil...).
PROBLEM_MEMBERS = frozenset({"type", "title", "status", "detail", "code"})
# The schema describes the platform's own URLs; a test's URLconf (tests/platform/urls.py) has
# views of its own, which no schema declares.
PLATFORM_URLCONF = "platform_site.urls"
# A line of a response's description, as platform_site.openapi writes it:
# "- `ACCOUNT_LOCKED`, with `lockedUntil`: ..."
_DESCRIBED = re.compile(r"^- `(?P<code>[A-Z0-9_]+)`(?:, with (?P<members>[^:]*))?:", re.MULTILINE)


class Observed(NamedTuple):
    method: str
    path: str  # the operation's template, as the schema writes it: /api/users/adapters/{adapter_id}
    status: int
    code: str
    members: frozenset[str]

    def __str__(self) -> str:
        members = f" with {', '.join(sorted(self.members))}" if self.members else ""
        return f"{self.method} {self.path}: {self.status} {self.code}{members}"


OBSERVED: set[Observed] = set()


class AnswerRecorder:
    """Records each problem+json answer of a route of the platform's URLconf in OBSERVED."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if (
            match is not None
            and match.route
            and response.get("Content-Type", "").startswith(PROBLEM_CONTENT_TYPE)
            and settings.ROOT_URLCONF == PLATFORM_URLCONF
            and getattr(request, "urlconf", None) is None
        ):
            problem = json.loads(response.content)
            OBSERVED.add(
                Observed(
                    request.method or "",
                    path_template(match.route),
                    response.status_code,
                    str(problem.get("code")),
                    frozenset(problem) - PROBLEM_MEMBERS,
                )
            )
        return response


def path_template(route: str) -> str:
    """A Django route (``api/users/adapters/<int:adapter_id>``) as an OpenAPI path template."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def described(response: dict[str, Any]) -> dict[str, frozenset[str]]:
    """The codes a response's description names, each with the members it names."""
    return {
        found["code"]: frozenset(re.findall(r"`(\w+)`", found["members"] or ""))
        for found in _DESCRIBED.finditer(response.get("description", ""))
    }


def undeclared_answer(
    operation: dict[str, Any], status: int, code: str, members: Iterable[str] = ()
) -> str | None:
    """Why the schema's ``operation`` does not declare this answer; None when it does."""
    response = operation.get("responses", {}).get(str(status))
    if response is None:
        return f"status {status} is not among the operation's responses"
    if PROBLEM_CONTENT_TYPE not in response.get("content", {}):
        return f"the {status} response is not {PROBLEM_CONTENT_TYPE}"
    codes = described(response)
    if code not in codes:
        return f"the {status} response names {', '.join(codes) or 'no code'}, not {code}"
    missing = sorted(set(members) - codes[code])
    if missing:
        return f"the {status} response names no member {', '.join(missing)} for {code}"
    return None


def undeclared(observed: Iterable[Observed], schema: dict[str, Any]) -> list[str]:
    """Each observed answer of an operation of ``schema`` that it does not declare, with why."""
    found = []
    for answer in sorted(observed):
        operation = schema["paths"].get(answer.path, {}).get(answer.method.lower())
        if operation is None:
            continue  # not an operation: a 405, or a path outside the schema
        reason = undeclared_answer(operation, answer.status, answer.code, answer.members)
        if reason is not None:
            found.append(f"{answer}: {reason}")
    return found


def generated_schema() -> dict[str, Any]:
    """The document /api/schema/ serves, as JSON would carry it (string status keys)."""
    from drf_spectacular.generators import SchemaGenerator

    document: dict[str, Any] = json.loads(
        json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str)
    )
    return document
