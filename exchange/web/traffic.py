"""An adapter's traffic charts on /bus and on its own page (docs/cabinet.md, "Traffic charts"):
the points of exchange.services.traffic, drawn by exchange.web.charts over the range the page's
``?range=`` names (the last hour when it names none, or one there is not)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from exchange.services.traffic import RANGES, Point, Traffic, traffic_points
from exchange.web.charts import Series, line_chart

DEFAULT_RANGE = "1h"
RANGE_LABELS = {
    "1h": gettext_lazy("Last hour"),
    "24h": gettext_lazy("24 hours"),
    "7d": gettext_lazy("7 days"),
}
# The seconds of a step as each range is drawn: a chart draws at most a few hundred steps, so a
# day's 1,440 minutes are drawn as steps of five (counts added, the depth at each one's end).
DRAWN_STEPS = {"1h": 60, "24h": 300, "7d": 3600}


@dataclass(frozen=True)
class RangeLink:
    name: str
    label: str
    current: bool


@dataclass(frozen=True)
class TrafficCharts:
    ranges: list[RangeLink]
    charts: list[SafeString]


def range_of(request: HttpRequest) -> str:
    chosen = request.GET.get("range", DEFAULT_RANGE)
    return chosen if chosen in RANGES else DEFAULT_RANGE


def _drawn(points: list[Point], length: int) -> list[Point]:
    """The points drawn as steps of ``length`` seconds, starting at multiples of it (so the
    axis' labels fall on them; the first and the last, now's, may be partial): counts added, the
    depth the last one's."""
    drawn = []
    for _bucket, grouped in itertools.groupby(points, key=lambda p: p.at.timestamp() // length):
        group = list(grouped)
        drawn.append(
            Point(
                at=datetime.fromtimestamp(group[0].at.timestamp() // length * length, tz=UTC),
                sent=sum(p.sent for p in group),
                received=sum(p.received for p in group),
                acked=sum(p.acked for p in group),
                dead_lettered=sum(p.dead_lettered for p in group),
                refused=sum(p.refused for p in group),
                depth=group[-1].depth,
            )
        )
    return drawn


def traffic_charts(
    *, adapter_ids: Sequence[int], range_name: str, chart_id: str
) -> dict[int, TrafficCharts]:
    """Each adapter's two charts over ``range_name`` (messages per step, and the queue's depth),
    their ids ``chart_id`` with the adapter's id put in for ``{}``."""
    return {
        adapter_id: _charts(traffic, chart_id.format(adapter_id))
        for adapter_id, traffic in traffic_points(
            adapter_ids=adapter_ids, range_name=range_name
        ).items()
    }


def _charts(traffic: Traffic, chart_id: str) -> TrafficCharts:
    range_name = traffic.range
    step = DRAWN_STEPS[range_name]
    points = traffic.points if step == traffic.step else _drawn(traffic.points, step)
    times: list[datetime] = [p.at for p in points]
    moves = [
        Series("sent", _("Sent"), [p.sent for p in points]),
        Series("received", _("Received"), [p.received for p in points]),
        Series("acked", _("Acknowledged"), [p.acked for p in points]),
        Series("dead", _("Dead-lettered"), [p.dead_lettered for p in points]),
        Series("refused", _("Refused"), [p.refused for p in points]),
    ]
    per = {60: _("Messages per minute"), 300: _("Messages per 5 minutes")}.get(
        step, _("Messages per hour")
    )
    over = RANGE_LABELS[range_name]
    totals = ", ".join(
        f"{series.label.lower()} {number_format(sum(series.values), force_grouping=True)}"
        for series in moves
    )
    depth_now = points[-1].depth if points else 0
    charts = [
        line_chart(
            chart_id=f"{chart_id}-messages",
            title=f"{per} ({over.lower()})",
            description=_("In all: %(totals)s.") % {"totals": totals},
            times=times,
            step=step,
            series=moves,
        ),
        line_chart(
            chart_id=f"{chart_id}-depth",
            title=f"{_('Queue depth')} ({over.lower()})",
            description=_("Messages in the queue now: %(depth)s.")
            % {"depth": number_format(depth_now, force_grouping=True)},
            times=times,
            step=step,
            series=[Series("depth", _("Queue depth"), [p.depth for p in points])],
        ),
    ]
    return TrafficCharts(ranges=range_links(range_name), charts=charts)


def range_links(chosen: str) -> list[RangeLink]:
    return [
        RangeLink(name=name, label=str(label), current=name == chosen)
        for name, label in RANGE_LABELS.items()
    ]


def traffic_context(request: HttpRequest, adapter_id: int) -> dict[str, Any]:
    """What templates/cabinet/_traffic.html takes, as ``traffic``: the adapter's page's."""
    charts = traffic_charts(
        adapter_ids=[adapter_id], range_name=range_of(request), chart_id="traffic"
    )
    return {"traffic": charts[adapter_id]}
