"""The process's view of whether PostgreSQL answers (platform_site/db/availability.py): probes
against a real server and a closed port, their pacing, and one log line per change however many
threads observe it. tests/stack/test_database_outage.py drives it through gunicorn."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from django.db import connection

from platform_site.db import availability as module
from platform_site.db.availability import Availability

LOGGER = "platform_site.db.availability"


def live() -> dict[str, Any]:
    params = connection.get_connection_params()
    return {key: value for key, value in params.items() if key not in ("pool", "cursor_factory")}


def closed() -> dict[str, Any]:
    # Port 1 on loopback refuses at once: a server that is gone.
    return {**live(), "host": "127.0.0.1", "port": 1, "connect_timeout": 2}


def flips(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


@pytest.mark.django_db
def test_a_refused_probe_marks_the_server_down_and_a_later_one_marks_it_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    view = Availability()

    assert (view.answers(closed()), view.down) == (False, True)
    # Within the interval the last answer stands: the live server is not asked yet.
    assert (view.answers(live()), view.down) == (False, True)
    monkeypatch.setattr(module, "PROBE_INTERVAL_SECONDS", 0)
    assert (view.answers(live()), view.down) == (True, False)
    assert flips(caplog) == [
        "PostgreSQL does not answer: requests that need it get 503",
        "PostgreSQL answers again",
    ]


class SlowHandler(logging.Handler):
    """A log handler that takes its time (a blocking log shipper): the other threads run while
    the change is being logged."""

    def emit(self, record: logging.LogRecord) -> None:
        time.sleep(0.02)


def test_threads_observing_one_change_at_once_log_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    view = Availability()
    view.observed(answers=False)
    slow = SlowHandler()
    logging.getLogger(LOGGER).addHandler(slow)
    caplog.clear()
    threads = 16
    start = threading.Barrier(threads)

    def observe() -> None:
        start.wait()
        view.observed(answers=True)

    workers = [threading.Thread(target=observe) for _ in range(threads)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        logging.getLogger(LOGGER).removeHandler(slow)

    assert not view.down
    assert flips(caplog).count("PostgreSQL answers again") == 1
