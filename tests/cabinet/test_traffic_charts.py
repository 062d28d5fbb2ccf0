"""The traffic charts of /bus and of an adapter's page (docs/cabinet.md, "Traffic charts"):
inline SVG drawn on the server, over the range the page names, in both languages."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import translation

from accounts.models import User
from exchange.services.sending import message_send
from exchange.services.traffic import Point
from exchange.web.charts import Series, line_chart, nice_ceiling, x_ticks
from exchange.web.traffic import _drawn
from tests.factories import AdapterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def mine(person: User) -> User:
    adapter = AdapterFactory.create(username="billing", owner=person)
    crm = AdapterFactory.create(username="crm", owner=person)
    for n in range(3):
        message_send(
            sender=crm, to=adapter.pk, type="t", payload={"n": n}, headers={}, idempotency_key=None
        )
    return adapter


def charts_of(page: Any, chart_id: str) -> dict[str, str]:
    """Each chart of the page whose id starts with ``chart_id``: its SVG, by id."""
    text = page.content.decode()
    return dict(re.findall(rf'<figure class="chart" id="({chart_id}[^"]*)">(.*?)</figure>', text))


def polyline_points(svg: str, key: str) -> list[tuple[float, float]]:
    [points] = re.findall(rf'class="series series-{key}" points="([^"]*)"', svg)
    return [tuple(map(float, pair.split(","))) for pair in points.split()]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 4), (3, 4), (5, 8), (9, 20), (40, 40), (41, 80), (99, 100), (1234, 2000)],
)
def test_the_y_axis_ends_on_a_round_number_every_grid_line_whole(value, top):
    assert nice_ceiling(value) == top
    assert top % 4 == 0


def test_the_x_axis_is_labelled_in_utc_every_10_minutes_3_hours_or_day():
    start = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)
    hour = [start + timedelta(minutes=n) for n in range(60)]
    day = [start + timedelta(minutes=5 * n) for n in range(289)]  # a day and its partial step
    week = [start + timedelta(hours=n) for n in range(168)]

    assert [label for _, label in x_ticks(hour, 60)] == [
        "22:00", "22:10", "22:20", "22:30", "22:40", "22:50",
    ]  # fmt: skip
    assert [label for _, label in x_ticks(day, 300)][:3] == ["00:00", "03:00", "06:00"]
    with translation.override("ru"):
        days = [label for _, label in x_ticks(week, 3600)]
    with translation.override("en"):
        assert next(label for _, label in x_ticks(week, 3600)) == "28 Nov"
    assert len(days) == 7
    assert days[0].startswith("28 ")
    assert "Nov" not in days[0]


def test_five_minutes_of_a_day_are_drawn_as_one_step_counts_added_the_depth_at_its_end():
    start = datetime(2026, 11, 28, 0, 3, tzinfo=UTC)  # not on a step of five minutes
    points = [Point(start + timedelta(minutes=n), n, 1, 1, 0, 0, depth=n) for n in range(10)]

    drawn = _drawn(points, 300)

    # Steps start at multiples of five minutes: the first and the last are partial.
    assert [(p.at.minute, p.sent, p.received, p.depth) for p in drawn] == [
        (0, 0 + 1, 2, 1),
        (5, 2 + 3 + 4 + 5 + 6, 5, 6),
        (10, 7 + 8 + 9, 3, 9),
    ]


def test_a_chart_escapes_its_words_and_draws_a_line_per_series():
    times = [datetime(2026, 11, 28, tzinfo=UTC) + timedelta(minutes=n) for n in range(3)]

    svg = line_chart(
        chart_id="c",
        title="<b>title</b>",
        description="a & b",
        times=times,
        step=60,
        series=[Series("sent", "</svg>", [0, 4, 2]), Series("acked", "Acked", [1, 1, 1])],
    )

    assert "<b>" not in svg
    assert "&lt;b&gt;title&lt;/b&gt;" in svg
    assert "a &amp; b" in svg
    assert svg.count("</svg>") == 1
    sent = polyline_points(svg, "sent")
    assert len(sent) == 3
    assert sent[1][1] < sent[2][1] < sent[0][1]  # 4 highest, 0 on the axis
    assert "style=" not in svg  # colours are the stylesheet's: nothing the CSP forbids


def test_bus_draws_each_adapters_messages_and_depth_over_the_last_hour(browser, mine):
    page = browser.get("/bus")

    charts = charts_of(page, f"traffic-{mine.pk}")
    assert sorted(charts) == [f"traffic-{mine.pk}-depth", f"traffic-{mine.pk}-messages"]
    messages = charts[f"traffic-{mine.pk}-messages"]
    assert "Messages per minute (last hour)" in messages
    assert "In all: sent 0, received 0, acknowledged 0, dead-lettered 0, refused 0." in messages
    assert len(polyline_points(messages, "received")) == 60
    assert "Messages in the queue now: 3." in charts[f"traffic-{mine.pk}-depth"]
    crm = next(
        id_
        for id_ in charts_of(page, "traffic-")
        if id_.endswith("-messages") and str(mine.pk) not in id_
    )
    assert "sent 3," in charts_of(page, "traffic-")[crm]
    assert 'aria-current="true" data-range="1h"' in page.content.decode()


@pytest.mark.parametrize(
    ("range_name", "title", "steps"),
    [
        # A day's 1,440 minutes in steps of five, the first and the last partial but now and then.
        ("24h", "Messages per 5 minutes (24 hours)", {288, 289}),
        ("7d", "Messages per hour (7 days)", {168}),
        ("1y", "Messages per minute (last hour)", {60}),  # not a range: the last hour
    ],
)
def test_the_adapters_page_draws_the_range_it_names(browser, mine, range_name, title, steps):
    page = browser.get(f"/bus/adapters/{mine.pk}?range={range_name}")

    charts = charts_of(page, "traffic-")
    assert title in charts["traffic-messages"]
    assert len(polyline_points(charts["traffic-depth"], "depth")) in steps
    assert polyline_points(charts["traffic-depth"], "depth")[-1][1] < 210  # 3 waiting now


def test_the_charts_speak_russian(browser, mine):
    browser.post("/i18n/setlang/", {"language": "ru", "next": "/bus"})

    page = browser.get(f"/bus/adapters/{mine.pk}")

    charts = charts_of(page, "traffic-")
    assert "Сообщений в минуту" in charts["traffic-messages"]
    assert "Глубина очереди" in charts["traffic-depth"]
    assert "Sent" not in charts["traffic-messages"]
