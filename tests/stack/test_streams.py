"""Push streams on the production server (deploy/serve, two processes) behind nginx with the
compose configuration: events pass nginx as they come, sessions ended on either process end the
stream, a second stream replaces the first across processes, a client that goes away frees its
place, and a stopping server ends its streams with SHUTDOWN instead of holding its stop."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.events import EventReader
from tests.stack.conftest import Gunicorn, StackDatabase, wait_until
from tests.stack.processes import Nginx, running_gunicorn, running_nginx
from tests.stack.test_waiting import SERVER_ENV, Signed, adapters_signed_in, scrape

pytestmark = pytest.mark.stack

STREAM = "/api/exchange/messages/stream"
ENV = {**SERVER_ENV, "EXCHANGE_STREAM_HEARTBEAT_SECONDS": "1"}


@pytest.fixture(scope="module")
def server(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("serve"), ENV) as served:
        yield served


@contextmanager
def nginx_before(server: Gunicorn, workdir: Path) -> Iterator[Nginx]:
    (workdir / "static").mkdir(parents=True)
    backend = httpx.URL(server.base_url)
    with running_nginx(
        workdir, backend=f"{backend.host}:{backend.port}", static_root=workdir / "static"
    ) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def nginx(server: Gunicorn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    with nginx_before(server, tmp_path_factory.mktemp("nginx")) as proxy:
        yield proxy


@pytest.fixture
def readers() -> Iterator[list[EventReader]]:
    opened: list[EventReader] = []
    yield opened
    for reader in opened:
        reader.close()


def stream(base_url: str, consumer: Signed, readers: list[EventReader]) -> EventReader:
    headers = {**consumer.headers(), "Accept": "text/event-stream"}
    reader = EventReader(base_url + STREAM, headers)
    readers.append(reader)
    assert reader.status == 200
    return reader


def send(base_url: str, sender: Signed, consumer: Signed, payload: object) -> str:
    answer = httpx.post(
        base_url + "/api/exchange/messages",
        json={"to": consumer.adapter_id, "type": "t", "payload": payload},
        headers=sender.headers(),
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["messageId"])


def streams_open(server: Gunicorn) -> float:
    return scrape(server, "platform_exchange_streams_open")


def test_events_pass_nginx_as_they_come_and_keep_alives_keep_the_stream(
    server: Gunicorn, nginx: Nginx, stack_database: StackDatabase, readers
):
    sender, consumer = adapters_signed_in(stack_database, "through", 2)
    reader = stream(nginx.base_url, consumer, readers)

    for n in range(3):
        # Each event arrives while the stream stays open: nothing waits in nginx's buffers.
        message_id = send(nginx.base_url, sender, consumer, n)
        event = reader.next()
        assert (event.event, event.id, event.data["payload"]) == ("message", message_id, n)
    comment = reader.next(skip_comments=False)
    assert (comment.event, comment.comment) == ("comment", "keep-alive")
    assert not reader.ended.is_set()


def test_a_logout_on_any_process_ends_the_stream_with_token_revoked(
    server: Gunicorn, nginx: Nginx, stack_database: StackDatabase, readers
):
    sender, consumer = adapters_signed_in(stack_database, "revoked", 2)
    reader = stream(nginx.base_url, consumer, readers)

    answer = httpx.post(
        nginx.base_url + "/api/auth/logout", json={"refreshToken": consumer.refresh}, timeout=30
    )
    assert answer.status_code == 200
    send(nginx.base_url, sender, consumer, "after the logout")

    end = reader.next()
    assert (end.event, end.data["code"]) == ("end", "TOKEN_REVOKED")
    assert reader.ended.wait(10)


def test_a_second_stream_replaces_the_first_whichever_process_holds_them(
    server: Gunicorn, nginx: Nginx, stack_database: StackDatabase, readers
):
    sender, consumer = adapters_signed_in(stack_database, "replaced", 2)
    streams = [stream(nginx.base_url, consumer, readers) for _ in range(4)]

    for replaced in streams[:-1]:
        end = replaced.next()
        assert (end.event, end.data["code"]) == ("end", "REPLACED")
    message_id = send(nginx.base_url, sender, consumer, "to the last")
    assert streams[-1].next().id == message_id


def test_a_client_that_goes_away_gives_its_place_back(
    server: Gunicorn, nginx: Nginx, stack_database: StackDatabase, readers
):
    _, *consumers = adapters_signed_in(stack_database, "gone", 11)
    # The earlier tests' streams have gone by now (their readers closed).
    wait_until(lambda: streams_open(server) == 0, timeout=30, what="no stream open")
    opened = [stream(nginx.base_url, consumer, readers) for consumer in consumers]
    wait_until(lambda: streams_open(server) == 10, timeout=30, what="10 streams open")

    for reader in opened:
        reader.close()

    wait_until(lambda: streams_open(server) == 0, timeout=30, what="their places back")


def test_a_stopping_server_ends_its_streams_with_shutdown(
    stack_database: StackDatabase, tmp_path: Path, readers
):
    _, *consumers = adapters_signed_in(stack_database, "stopping", 5)
    with (
        running_gunicorn(stack_database, tmp_path / "serve", ENV) as stopping,
        nginx_before(stopping, tmp_path / "nginx") as proxy,
    ):
        opened = [stream(proxy.base_url, consumer, readers) for consumer in consumers]
        for reader in opened:
            assert reader.next(skip_comments=False).comment == "keep-alive"

        assert stopping.pid is not None
        os.kill(stopping.pid, signal.SIGTERM)  # gunicorn's arbiter: a graceful stop

        for reader in opened:
            end = reader.next()
            assert (end.event, end.data["code"]) == ("end", "SHUTDOWN")
            assert reader.ended.wait(10)
