"""The JSON parser reads a body's nesting off its text when it has many brackets, and walks the
parsed values only for escapes of characters PostgreSQL cannot store (platform_site/parsers.py)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from platform_site.errors import MalformedBody
from platform_site.parsers import MAX_DEPTH, NonFiniteNumber, StrictJSONParser, deepest


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def walked_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((walked_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((walked_depth(v) for v in value), default=0)
    return 0


DOCUMENTS: list[Any] = [
    {},
    [],
    "text",
    nested(1),
    nested(64),
    nested(65),
    {"messages": [{"to": 1, "payload": nested(5)} for _ in range(100)]},
    {"s": "[[[[{{{{" * 50, "t": ['"]]]', '\\"[', "\\\\"], "u": [[[]]]},
    ["\\u005b" * 80, {"a": "}" * 90}],
]


@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_the_depth_read_off_the_text_is_the_depth_of_the_values(document: Any) -> None:
    for text in (json.dumps(document), json.dumps(document, indent=2, ensure_ascii=False)):
        assert deepest(text) == walked_depth(document)


def parse(text: str) -> Any:
    return StrictJSONParser().parse(io.BytesIO(text.encode()), None, {})


def test_a_wide_body_with_many_brackets_passes_and_one_level_too_deep_does_not() -> None:
    wide = {"messages": [{"payload": [[{"a": [1]}]]} for _ in range(100)]}
    assert parse(json.dumps(wide)) == wide
    at_the_limit = {"messages": [nested(MAX_DEPTH - 2)] * 3}
    assert parse(json.dumps(at_the_limit)) == at_the_limit

    too_deep = {"messages": [{"payload": 1}] * 50 + [nested(MAX_DEPTH - 1)]}
    with pytest.raises(MalformedBody, match="nested deeper than 64"):
        parse(json.dumps(too_deep))


def test_brackets_inside_strings_do_not_count() -> None:
    body = {"messages": ["[" * 500, "{" * 500, '\\"[[[' * 40]}

    assert parse(json.dumps(body)) == body


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "x\\u0000"}',
        '{"a": ["\\ud800"]}',
        '{"a": ["\\uDC00 ' + "[" * 70 + '"]}',
    ],
)
def test_escapes_of_unstorable_characters_are_still_refused(text: str) -> None:
    with pytest.raises(MalformedBody):
        parse(text)


def test_a_paired_surrogate_escape_is_a_character_like_any_other() -> None:
    assert parse('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}


# JSON numbers as the grammar writes them: an integer part without leading zeros, a fraction, an
# exponent with a sign and leading zeros of its own.
NUMBERS = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}",
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,320}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,30}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?0{0,3}[0-9]{1,4}", fullmatch=True)),
)


@given(NUMBERS)
@settings(database=None, deadline=None)  # nothing written into the checkout
def test_every_number_beyond_a_double_is_kept_as_non_finite_and_every_other_as_it_reads(
    text: str,
) -> None:
    """No number that a double cannot hold slips past the parser as infinity."""
    [value] = parse(f"[{text}]")

    expected = json.loads(text)
    if isinstance(expected, float) and math.isinf(expected):
        assert isinstance(value, NonFiniteNumber)
        assert str(value) == text or len(text) > 40
    else:
        assert value == expected
