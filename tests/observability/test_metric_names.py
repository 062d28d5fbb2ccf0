"""Every series the dashboard and the alert rules name is one the platform exports, present in
the first scrape of a freshly started server (gunicorn's processes over a PostgreSQL of this
module's own, after its readiness probe answered, as a deployment's probes do): a panel or a rule
that names a misspelt metric, or a label value no series has yet, would show nothing and never
fire."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from accounts.metrics import SIGN_IN_OUTCOMES
from tests.observability.promql import ROOT, expressions, selectors
from tests.stack.conftest import Gunicorn
from tests.stack.conftest import gunicorn as gunicorn
from tests.stack.conftest import stack_database as stack_database

Series = dict[str, list[dict[str, str]]]


@pytest.fixture(scope="module")
def first_scrape(gunicorn: Gunicorn) -> Series:
    """The labels of every sample of the server's first scrape, by sample name."""
    with gunicorn.client() as client:
        answer = client.get("/actuator/prometheus")
    assert answer.status_code == 200, answer.text
    series: Series = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


@pytest.mark.stack
def test_every_series_a_panel_or_rule_names_is_in_the_first_scrape(first_scrape: Series):
    problems = []
    for where, expression in expressions().items():
        for selector in selectors(expression):
            labelled = first_scrape.get(selector.name)
            if not labelled:
                problems.append(f"{where}: {selector.name} is not exported")
                continue
            for label, operator, value in selector.matchers:
                if not any(label in labels for labels in labelled):
                    problems.append(f"{where}: {selector.name} has no label {label}")
                elif operator == "=" and not any(labels.get(label) == value for labels in labelled):
                    problems.append(f"{where}: no {selector.name}{{{label}={value!r}}} yet")

    assert problems == []


@pytest.mark.stack
def test_every_counted_outcome_and_place_has_its_series_from_the_first_scrape(
    first_scrape: Series,
):
    def values(name: str, label: str) -> set[str]:
        return {labels[label] for labels in first_scrape.get(name, [])}

    assert values("platform_sign_ins_total", "outcome") == set(SIGN_IN_OUTCOMES)
    assert values("platform_exchange_webhook_deliveries_total", "outcome") == {
        "delivered",
        "failed",
        "timeout",
        "refused",
    }
    assert values("platform_server_busy_refusals_total", "place") == {"long_poll", "stream"}
    assert first_scrape["platform_database_up"] == [{}]


def test_the_outcomes_initialised_are_every_outcome_the_sign_in_counts():
    counted = set()
    for path in (ROOT / "accounts").rglob("*.py"):
        counted |= set(re.findall(r'sign_ins\.labels\("(\w+)"\)', path.read_text()))

    assert counted == set(SIGN_IN_OUTCOMES)
