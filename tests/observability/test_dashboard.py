"""deploy/observability's Grafana dashboard, checked for the shape Grafana imports (no Grafana
runs on these machines): a fixed uid, schemaVersion 39 or later, panels that fit the grid without
overlapping, each with a title, a description and queries on the datasource variable; the topics
the operators asked for; and docs/operations.md explaining each panel and each alert."""

from __future__ import annotations

from typing import Any

from tests.observability.promql import DASHBOARDS, ROOT, dashboards, panels, rules

UID = "exchange-platform"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
OPERATIONS = ROOT / "docs" / "operations.md"
# What the dashboard must show, by the metric that shows it.
TOPICS = {
    "requests by status and route": "http_server_requests_seconds_count",
    "latency percentiles": "platform_http_request_seconds_bucket",
    "sign-ins by outcome": "platform_sign_ins_total",
    "lockouts": "platform_account_lockouts_total",
    "queue depth": "platform_exchange_queue_depth",
    "oldest age": "platform_exchange_oldest_message_age_seconds",
    "redeliveries": "platform_exchange_redeliveries_total",
    "dead letters": "platform_exchange_dead_letters",
    "waiting consumers": "platform_http_requests_waiting",
    "streams": "platform_exchange_streams_open",
    "webhook outcomes": "platform_exchange_webhook_deliveries_total",
    "the database pool": "hikaricp_connections_active",
}


def the_dashboard() -> dict[str, Any]:
    [dashboard] = dashboards().values()
    return dashboard


def test_there_is_one_dashboard_with_its_fixed_uid_and_a_recent_schema():
    assert [path.name for path in DASHBOARDS.glob("*.json")] == ["exchange-platform.json"]
    dashboard = the_dashboard()

    assert dashboard["uid"] == UID
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["schemaVersion"] >= 39
    assert dashboard["title"]
    assert "id" not in dashboard  # Grafana's own, per instance: provisioning sets it


def test_the_datasource_is_a_variable_of_prometheus_datasources():
    [variable] = the_dashboard()["templating"]["list"]

    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    for panel in panels(the_dashboard()):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]


def test_every_panel_has_a_unique_id_a_title_a_description_and_queries():
    top = the_dashboard()["panels"]
    ids = [panel["id"] for panel in top]
    ids += [child["id"] for panel in top if panel["type"] == "row" for child in panel["panels"]]

    assert len(ids) == len(set(ids))
    titles = [panel["title"] for panel in panels(the_dashboard())]
    assert len(titles) == len(set(titles))
    for panel in panels(the_dashboard()):
        assert panel["type"] in {"timeseries", "stat"}, panel["title"]
        assert panel["description"].strip(), panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]


def test_the_panels_fit_the_grid_without_overlapping():
    taken: set[tuple[int, int]] = set()
    for panel in the_dashboard()["panels"]:
        grid = panel["gridPos"]
        assert set(grid) == {"h", "w", "x", "y"}, panel["title"]
        assert grid["w"] > 0
        assert grid["h"] > 0
        assert grid["x"] >= 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (grid["x"] + column, grid["y"] + row)
            for column in range(grid["w"])
            for row in range(grid["h"])
        }
        assert not cells & taken, panel["title"]
        taken |= cells


def test_the_dashboard_shows_every_topic_the_operators_asked_for():
    queried = " ".join(
        target["expr"] for panel in panels(the_dashboard()) for target in panel["targets"]
    )

    missing = {topic for topic, metric in TOPICS.items() if metric not in queried}
    assert missing == set()


def test_the_operations_guide_explains_every_panel_and_every_alert():
    text = OPERATIONS.read_text()
    assert "## Dashboards and alerts" in text
    part = text.split("## Dashboards and alerts", 1)[1].split("\n## ", 1)[0]

    for panel in panels(the_dashboard()):
        assert f"**{panel['title']}**" in part, panel["title"]
    for rule in rules():
        assert f"`{rule['alert']}`" in part, rule["alert"]
    assert "When it fires" in part
