"""The selector reader the metric-name test relies on finds what an expression names, and only
that."""

from __future__ import annotations

from tests.observability.promql import Selector, selectors


def test_the_reader_finds_each_selector_with_its_matchers_and_nothing_else():
    expression = (
        'topk(10, histogram_quantile(0.95, sum by (le, uri) (rate(a_bucket{uri!~"/x|/y", '
        'method="GET"}[$__rate_interval])))) / on (uri) group_left (method) '
        "sum without (instance) (b_total) > bool 0.5 and absent(c_up)"
    )

    assert selectors(expression) == [
        Selector("a_bucket", (("uri", "!~", "/x|/y"), ("method", "=", "GET"))),
        Selector("b_total", ()),
        Selector("c_up", ()),
    ]


def test_the_reader_skips_ranges_and_subqueries():
    assert selectors("max(delta(d[15m])) - max_over_time(e[1h:1m])") == [
        Selector("d", ()),
        Selector("e", ()),
    ]
