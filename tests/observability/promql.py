"""What deploy/observability's dashboard and alert rules ask Prometheus for: their PromQL
expressions, and the series selectors in them (a small reader, enough for these expressions:
functions, aggregations and their label lists, ranges, binary operators)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
DASHBOARDS = OBSERVABILITY / "grafana" / "dashboards"
RULES = OBSERVABILITY / "prometheus" / "alerts.yml"
RULE_TESTS = OBSERVABILITY / "prometheus" / "alerts.test.yml"

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\{[^}]*\}|[a-zA-Z_:][\w:]*|\S')
_MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
# Ranges and subqueries ([5m], [$__rate_interval], [1h:1m]) and the label lists of aggregations
# and vector matching: none of them names a series.
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_KEYWORDS = {"and", "or", "unless", "bool"}


@dataclass(frozen=True)
class Selector:
    name: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, operator, value)


def selectors(expression: str) -> list[Selector]:
    text = _LABEL_LIST.sub(" ", _RANGE.sub("", expression))
    tokens = _TOKEN.findall(text)
    found = []
    for position, token in enumerate(tokens):
        if not re.fullmatch(r"[a-zA-Z_:][\w:]*", token) or token in _KEYWORDS:
            continue
        following = tokens[position + 1] if position + 1 < len(tokens) else ""
        if following == "(":
            continue  # a function or an aggregation
        if token == "offset":
            raise ValueError(f"offset is not read here: {expression}")
        block = following if following.startswith("{") else ""
        found.append(Selector(token, tuple(_MATCHER.findall(block))))
    return found


def dashboards() -> dict[Path, dict[str, Any]]:
    return {path: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel but rows, rows' collapsed panels included."""
    found = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def expressions() -> dict[str, str]:
    """Every expression, by where it is: "panel <title> <refId>" or "rule <alert>"."""
    found = {}
    for dashboard in dashboards().values():
        for panel in panels(dashboard):
            for target in panel["targets"]:
                found[f"panel {panel['title']} {target['refId']}"] = target["expr"]
    for rule in rules():
        found[f"rule {rule['alert']}"] = rule["expr"]
    return found
