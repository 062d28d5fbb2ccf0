"""Line charts drawn on the server as inline SVG: nothing to download, no script, nothing the
pages' Content-Security-Policy forbids (docs/cabinet.md, "Traffic charts" says why not a
charting library). The colours are the stylesheet's (static/platform.css, ``.chart``), so the
dark theme has its own; each chart has a title and a description for screen readers, and its
legend is HTML under it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.utils.formats import date_format, number_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 720, 220
# The plot's margins: the y axis' labels on the left, the x axis' under it.
LEFT, RIGHT, TOP, BOTTOM = 56, 24, 10, 26
GRID_LINES = 4


@dataclass(frozen=True)
class Series:
    key: str  # its CSS class: .series-{key}
    label: str
    values: Sequence[int]


def nice_ceiling(value: int) -> int:
    """The y axis' top: GRID_LINES grid lines a round step apart (1, 2, 2.5 or 5 times a power
    of ten, and a whole number), the first that reaches ``value``."""
    if value <= GRID_LINES:
        return GRID_LINES
    magnitude = 10 ** math.floor(math.log10(value / GRID_LINES))
    for factor in (1, 2, 2.5, 5, 10):
        step = factor * magnitude
        if step == int(step) and step * GRID_LINES >= value:
            return int(step * GRID_LINES)
    raise AssertionError(value)  # pragma: no cover (10 times the magnitude always reaches it)


def x_ticks(times: Sequence[datetime], step: int) -> list[tuple[int, str]]:
    """(index, label) of the x axis: every 10 minutes for steps of a minute (an hour), every 3
    hours for steps of 5 minutes (a day), every day for longer ones (a week), labelled in UTC as
    the cabinet's times are."""
    every = {60: 600, 300: 3 * 3600}.get(step, 86400)
    ticks = []
    for index, moment in enumerate(times):
        if int(moment.timestamp()) % every == 0:
            utc = moment.astimezone(UTC)
            label = date_format(utc, "j M") if every == 86400 else f"{utc:%H:%M}"
            ticks.append((index, label))
    return ticks


def line_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    times: Sequence[datetime],
    step: int,
    series: Sequence[Series],
) -> SafeString:
    """An SVG of ``series`` over ``times`` (one value of each per time, a step apart)."""
    top = nice_ceiling(max((max(s.values, default=0) for s in series), default=0))
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    last = max(len(times) - 1, 1)

    def x(index: int) -> float:
        return LEFT + plot_width * index / last

    def y(value: int) -> float:
        return TOP + plot_height * (1 - value / top)

    grid = format_html_join(
        "",
        '<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}"/>'
        '<text class="y-label" x="{}" y="{}">{}</text>',
        (
            (
                LEFT,
                WIDTH - RIGHT,
                f"{y(v):.1f}",
                f"{y(v):.1f}",
                LEFT - 6,
                f"{y(v) + 4:.1f}",
                number_format(v, force_grouping=True),
            )
            for v in (top * n // GRID_LINES for n in range(GRID_LINES + 1))
        ),
    )
    ticks = format_html_join(
        "",
        '<line class="tick" x1="{}" x2="{}" y1="{}" y2="{}"/>'
        '<text class="x-label" x="{}" y="{}">{}</text>',
        (
            (
                f"{x(i):.1f}",
                f"{x(i):.1f}",
                HEIGHT - BOTTOM,
                HEIGHT - BOTTOM + 4,
                f"{x(i):.1f}",
                HEIGHT - 8,
                label,
            )
            for i, label in x_ticks(times, step)
        ),
    )
    lines = format_html_join(
        "",
        '<polyline class="series series-{}" points="{}"><title>{}</title></polyline>',
        (
            (s.key, " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values)), s.label)
            for s in series
        ),
    )
    legend = format_html_join(
        "",
        '<li><span class="swatch series-{}" aria-hidden="true"></span>{}</li>',
        ((s.key, s.label) for s in series),
    )
    return format_html(
        '<figure class="chart" id="{id}">'
        '<svg viewBox="0 0 {w} {h}" role="img" aria-labelledby="{id}-title {id}-desc">'
        '<title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>'
        '<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>'
        '<line class="axis" x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>'
        "{grid}{ticks}{lines}</svg>"
        '<figcaption><span class="chart-title">{title}</span><ul class="legend">{legend}</ul>'
        "</figcaption></figure>",
        id=chart_id,
        w=WIDTH,
        h=HEIGHT,
        title=title,
        desc=description,
        left=LEFT,
        right=WIDTH - RIGHT,
        top=TOP,
        bottom=HEIGHT - BOTTOM,
        grid=grid,
        ticks=ticks,
        lines=lines,
        legend=legend,
    )
