"""The series the "out of room for waiting consumers" alert reads: a process that holds as many
long polls or streams as it may counts each one it refuses, under its place."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, Gauge

from platform_site.deferral import Places
from platform_site.errors import ServerBusy


def refused(place: str) -> float:
    value = REGISTRY.get_sample_value("platform_server_busy_refusals_total", {"place": place})
    assert value is not None
    return value


@pytest.mark.parametrize("place", ["long_poll", "stream"])
def test_a_place_refused_is_counted_under_its_place_and_a_place_taken_is_not(place: str):
    other = "stream" if place == "long_poll" else "long_poll"
    places = Places(Gauge(f"test_places_{place}", "places taken in this test"), place=place)
    before = (refused(place), refused(other))

    places.take(1)
    with pytest.raises(ServerBusy):
        places.take(1)
    places.give_back()
    places.take(1)

    assert (refused(place), refused(other)) == (before[0] + 1, before[1])
