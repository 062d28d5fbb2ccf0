"""The API's JSON parser: what it accepts can be stored in PostgreSQL and means one thing."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.parsers import JSONParser

from platform_site.errors import MalformedBody, PayloadTooLarge, body_limit

MAX_DEPTH = 64

# PostgreSQL text and jsonb cannot hold NUL, and lone surrogates are not Unicode text at all:
# either would pass json.loads and then fail as a 500 deep inside a query.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Escapes of NUL (\u0000) and of surrogates (\ud800-\udfff, paired or not: a pair is checked
# after parsing).
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def deepest(text: str) -> int:
    """How deep the arrays and objects of ``text``, valid JSON, nest: check_storable's depth,
    read off the text (strings removed, brackets counted) without walking the values."""
    depth = most = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            most = max(most, depth)
        else:
            depth -= 1
    return most


# A JSON number that a double cannot hold: 1e400 reads as infinity in Python, and PostgreSQL's json
# refuses Infinity. Every number with a fraction or an exponent goes through _finite_float: a scan
# of the text for numbers that might overflow cost more than the parse itself (a regular
# expression over a 10 KB batch, 3x json.loads), where the hook costs only bodies full of such
# numbers (a payload of 20,000 of them, 1.8x).
class NonFiniteNumber:
    """A JSON number too large for a double, where the body had it. It is of no JSON type a field
    accepts, so every serializer field refuses it as invalid (400 VALIDATION_FAILED on that field),
    and json.dumps refuses it, so no service can store it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"NonFiniteNumber({self.text[:20]!r})"

    def __str__(self) -> str:
        return self.text if len(self.text) <= 40 else f"{self.text[:37]}..."


def _finite_float(text: str) -> float | NonFiniteNumber:
    number = float(text)
    return number if math.isfinite(number) else NonFiniteNumber(text)


def _reject_constant(name: str) -> None:
    raise MalformedBody(f"{name} is not a JSON number.")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key means different things to different parsers (first or last wins), which is
    # a way to smuggle a value past a check; refuse it.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MalformedBody(f"The key {key!r} appears more than once in one object.")
        result[key] = value
    return result


def check_storable(data: Any) -> None:
    """Raise MalformedBody for nesting deeper than MAX_DEPTH or strings PostgreSQL cannot store."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _UNSTORABLE.search(value):
                raise MalformedBody("Strings may not contain NUL (\\u0000) or lone surrogates.")
        elif isinstance(value, Mapping | list):
            if depth > MAX_DEPTH:
                raise MalformedBody(f"JSON may not be nested deeper than {MAX_DEPTH} levels.")
            if isinstance(value, Mapping):
                stack.extend((key, depth) for key in value)
                stack.extend((item, depth + 1) for item in value.values())
            else:
                stack.extend((item, depth + 1) for item in value)


def json_strict(text: str) -> Any:
    """``text`` parsed as the API parses a body: no NaN or Infinity, no key twice in an object, a
    number beyond a double kept as NonFiniteNumber, no NUL or lone surrogate, no nesting deeper
    than MAX_DEPTH. MalformedBody says what it is not."""
    try:
        data = json.loads(
            text,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise MalformedBody(f"JSON may not be nested deeper than {MAX_DEPTH} levels.") from None
    except ValueError as error:
        raise MalformedBody(f"The request body is not valid JSON: {error}") from None
    # NUL and lone surrogates can only arrive as \u escapes of them (json.loads refuses raw
    # control characters, UTF-8 decoding refuses surrogates): only a text with such an escape is
    # walked. Deep nesting needs brackets; a text with many, such as a batch send, has its depth
    # read off the text, not the parsed values.
    if _RISKY_ESCAPE.search(text):
        check_storable(data)
    elif text.count("[") + text.count("{") > MAX_DEPTH and deepest(text) > MAX_DEPTH:
        raise MalformedBody(f"JSON may not be nested deeper than {MAX_DEPTH} levels.")
    return data


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[Any] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = body_limit((parser_context or {}).get("view"))
        # Read at most one byte past the limit: a chunked body has no Content-Length to refuse.
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedBody("The request body is not UTF-8.") from None
        return json_strict(text)
