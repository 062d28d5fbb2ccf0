"""Redis left aside after it failed (platform_site/cache.py): one failure spares every later call
of the process its timeout for REDIS_UNAVAILABLE_SECONDS; then one thread tries again. Real
connections throughout: a loopback server that accepts and never answers, and the machine's Redis.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from platform_site.cache import (
    GuardedConnection,
    GuardedSSLConnection,
    GuardedUnixConnection,
    RedisAvailability,
    RedisUnavailable,
    availability,
    guarded_connection_class,
)

LOGGER = "platform_site.cache"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port on loopback that accepts connections and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stopping = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stopping.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stopping.set()
    thread.join()
    for sock in accepted:
        sock.close()
    listener.close()


@pytest.fixture
def fresh_availability() -> Iterator[None]:
    """The process's availability as it starts: Redis taken to answer."""
    availability.answered()
    yield
    availability.answered()


def guarded_client(port: int, timeout: float = 0.2) -> redis.Redis:
    pool = redis.ConnectionPool(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        connection_class=GuardedConnection,
    )
    return redis.Redis(connection_pool=pool)


def test_after_one_timeout_every_call_is_left_aside_without_touching_the_network(
    silent_server: int, fresh_availability: None, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.REDIS_UNAVAILABLE_SECONDS = 60
    caplog.set_level(logging.WARNING, logger=LOGGER)
    client = guarded_client(silent_server)

    with pytest.raises(redis.TimeoutError):
        client.get("key")
    left_aside = []
    for _ in range(20):
        with pytest.raises(RedisUnavailable) as raised:
            client.set("key", "value")
        left_aside.append(raised.value)

    assert availability.down
    assert all(isinstance(error, redis.ConnectionError) for error in left_aside)
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        "Redis does not answer (Timeout reading from socket): left aside for 60 s at a time"
    ]


def admitted_elsewhere(tracker: RedisAvailability) -> bool:
    """Whether another thread's call to Redis would go ahead now."""
    answers: list[bool] = []

    def call() -> None:
        try:
            tracker.admit()
        except RedisUnavailable:
            answers.append(False)
        else:
            answers.append(True)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    return answers[0]


def test_once_the_while_has_run_out_one_thread_tries_and_the_others_keep_leaving_it_aside(
    settings: Any,
) -> None:
    settings.REDIS_UNAVAILABLE_SECONDS = 5
    now = [100.0]
    tracker = RedisAvailability(clock=lambda: now[0])

    tracker.failed(TimeoutError("silence"))
    with pytest.raises(RedisUnavailable):
        tracker.admit()
    now[0] += 5
    tracker.admit()  # this thread tries: admitted, and again for the next step of its call
    tracker.admit()
    assert not admitted_elsewhere(tracker)

    tracker.failed(TimeoutError("still silent"))  # the try failed: another while
    with pytest.raises(RedisUnavailable):
        tracker.admit()
    now[0] += 5
    tracker.admit()
    tracker.answered()  # it answered: every thread uses it again

    assert not tracker.down
    assert admitted_elsewhere(tracker)


def test_redis_answering_again_is_said_once(
    fresh_availability: None, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.REDIS_UNAVAILABLE_SECONDS = 0  # the next call tries at once
    caplog.set_level(logging.WARNING, logger=LOGGER)
    availability.failed(ConnectionRefusedError("refused"))
    availability.failed(ConnectionRefusedError("refused"))

    client = redis.Redis.from_url(
        "redis://127.0.0.1:6379/13", connection_class=GuardedConnection, socket_timeout=2
    )
    assert client.ping() is True
    assert client.ping() is True

    assert not availability.down
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        "Redis does not answer (refused): left aside for 0 s at a time",
        "Redis answers again",
    ]


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:6379/0", GuardedConnection),
        ("rediss://cache:6380/0", GuardedSSLConnection),
        ("unix:///run/redis.sock?db=1", GuardedUnixConnection),
    ],
)
def test_every_url_gets_the_guarded_kind_of_connection_redis_py_would_make(
    url: str, kind: type
) -> None:
    assert guarded_connection_class(url) is kind
    pool = redis.ConnectionPool.from_url(url, connection_class=guarded_connection_class(url))
    assert pool.connection_class is kind
