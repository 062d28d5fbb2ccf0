"""deploy/observability's alert rules load in Prometheus (`promtool check rules`) and behave as
their unit tests say (`promtool test rules`): each fires on what should wake someone and stays
quiet otherwise. promtool is Debian's, fetched by `make tools`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.observability.promql import ROOT, RULE_TESTS, RULES, rules

ALERTS = {
    "PlatformMetricsAbsent",
    "PlatformDatabaseDown",
    "PlatformServerErrors",
    "PlatformOldestMessageOld",
    "PlatformDeadLettersRising",
    "PlatformLockoutSpike",
    "PlatformWebhooksFailing",
    "PlatformOutOfRoomForWaitingConsumers",
}


def promtool() -> str:
    path = os.environ.get("PROMTOOL") or str(ROOT / ".data/tools/prometheus/usr/bin/promtool")
    assert Path(path).is_file(), f"promtool not found at {path}: run `make tools`"
    return path


def run_promtool(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *arguments], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_rules_are_valid_prometheus_rules():
    checked = run_promtool("check", "rules", str(RULES))

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


def test_every_rule_passes_its_unit_tests():
    tested = run_promtool("test", "rules", str(RULE_TESTS))

    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_unit_tests_fail_when_a_rule_misbehaves(tmp_path: Path):
    broken = RULES.read_text().replace("> 3600", "> 360000")
    (tmp_path / "alerts.yml").write_text(broken)
    (tmp_path / "alerts.test.yml").write_text(RULE_TESTS.read_text())

    tested = run_promtool("test", "rules", str(tmp_path / "alerts.test.yml"))

    assert tested.returncode == 1
    assert "PlatformOldestMessageOld" in tested.stdout + tested.stderr


def test_every_alert_is_there_with_a_severity_summary_and_description():
    assert {rule["alert"] for rule in rules()} == ALERTS
    for rule in rules():
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]


def test_every_alert_has_a_test_where_it_fires_and_one_where_it_does_not():
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])

    assert fired == ALERTS
    assert quiet == ALERTS
