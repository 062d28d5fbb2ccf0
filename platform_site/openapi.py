"""The OpenAPI schema's error responses, generated from the errors each operation declares.

A view names the ApplicationError subclasses it can answer with ``@answers(...)``: on the view's
class for every operation of it, on a handler method (``post``...) for that operation alone. A
class's declaration adds to its bases' (``answered``), so a base class declares once what all of
its views answer. Where an error means something narrower on one view than its class's
``default_detail`` says, the view declares an instance of it instead, raised as the view raises it
(``TokenMalformed(UNREADABLE_REFRESH)``): its detail is then the sentence the schema shows.

accounts.schema.PlatformAutoSchema adds what the machinery around a view answers (its
authentication and permissions, X-Device-ID, a JSON body, a path parameter, content negotiation,
an unreachable database) and writes one response per status with ``problem_responses``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.utils import translation

from platform_site.errors import PROBLEM_CONTENT_TYPE, ApplicationError

ErrorClass = type[ApplicationError]
Declaration = ErrorClass | ApplicationError
Declared = TypeVar("Declared")

_DECLARED = "openapi_answers"


def answers(*errors: Declaration) -> Callable[[Declared], Declared]:
    """Declare that the decorated view class or handler method can answer ``errors``: each an
    ApplicationError subclass, or an instance of one as the view raises it."""

    def declare(target: Declared) -> Declared:
        setattr(target, _DECLARED, errors)
        return target

    return declare


def answered(view_class: type, handler: Any) -> list[Declaration]:
    """What ``view_class`` declares, from its furthest base on, and then its ``handler``."""
    declared = [
        error for cls in reversed(view_class.__mro__) for error in vars(cls).get(_DECLARED, ())
    ]
    return [*declared, *getattr(handler, _DECLARED, ())]


@dataclass(frozen=True)
class Answer:
    """An error an operation can answer: ``example``, an instance as the platform raises it, and
    ``meaning``, the sentence that says when. ``shared`` when its example is its class's, the
    same in every operation (not an instance that one view declares)."""

    example: ApplicationError
    meaning: str
    shared: bool = True


def problem_responses(
    answers: Sequence[Answer],
    schema: Any,
    component: Callable[[str, dict[str, Any]], Any] = lambda name, example: example,
) -> dict[str, Any]:
    """OpenAPI responses for ``answers``, by status: ``schema`` as application/problem+json, a
    description naming each code with its extra members and meaning, and each code's example
    body. ``component(name, example)`` gives what a response holds of a shared Example Object
    (a reference to a component of it, or the object itself).

    Several errors of one code make one entry: the members of all of them, each one's meaning,
    and the first one's body as the example.
    """
    by_status: dict[int, dict[str, list[Answer]]] = {}
    for answer in answers:
        error = answer.example
        by_status.setdefault(error.status, {}).setdefault(error.code, []).append(answer)
    return {
        str(status): {
            "content": {
                PROBLEM_CONTENT_TYPE: {
                    "schema": schema,
                    "examples": {
                        code: _shown(same[0], component) for code, same in by_code.items()
                    },
                }
            },
            "description": "\n".join(_line(code, same) for code, same in by_code.items()),
        }
        for status, by_code in sorted(by_status.items())
    }


def _line(code: str, same: list[Answer]) -> str:
    members = list(dict.fromkeys(member for answer in same for member in answer.example.extra))
    with_members = f", with {', '.join(f'`{member}`' for member in members)}" if members else ""
    meanings = " ".join(dict.fromkeys(answer.meaning for answer in same))
    return f"- `{code}`{with_members}: {meanings}"


def _shown(answer: Answer, component: Callable[[str, dict[str, Any]], Any]) -> Any:
    example = _example(answer)
    return component(type(answer.example).__name__, example) if answer.shared else example


def _example(answer: Answer) -> dict[str, Any]:
    # The schema is the same document whatever the request's language: titles in English.
    with translation.override("en"):
        return {"summary": answer.meaning, "value": answer.example.body()}
