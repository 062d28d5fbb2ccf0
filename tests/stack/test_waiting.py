"""Waiting consumers on the production server (deploy/serve): hundreds of long polls held on the
event loops at once, the cap that answers 503 SERVER_BUSY, clients that go away, sessions ended
during a wait, and clients that never finish their requests."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
import pytest
from exchange_client import ExchangeClient

from tests.stack.conftest import Gunicorn, StackDatabase, wait_until
from tests.stack.processes import Nginx, running_gunicorn, running_nginx

pytestmark = pytest.mark.stack

POLLS = 200
# The default deployment's promise: this many waiting at once on one 2-core machine, through nginx
# with the compose configuration (docs/deployment.md, "The server").
CAPACITY = 2000
SLOW_CLIENTS = 40

SERVER_ENV = {
    "MANAGEMENT_ENDPOINTS_EXPOSURE": "health,prometheus",
    "ACCOUNTS_RATE_LIMIT_IP": "10000/m",
    "ACCOUNTS_RATE_LIMIT_ACCOUNT": "10000/m",
}


@dataclass(frozen=True)
class Signed:
    """An adapter's session, started in the database: its access token, refresh token, device."""

    adapter_id: int
    access: str
    refresh: str
    device: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access}", "X-Device-ID": self.device}


def adapters_signed_in(database: StackDatabase, prefix: str, count: int) -> list[Signed]:
    """``count`` adapters of one owner, each with a session (tests/stack/seeding.py); the first
    is the sender."""
    code = f"from tests.stack.seeding import *; adapters_with_sessions({prefix!r}, {count})"
    return [Signed(*row) for row in json.loads(database.shell(code).strip().splitlines()[-1])]


def scrape(server: Gunicorn, family: str, labels: str = "") -> float:
    """One series of the server's /actuator/prometheus (all its processes added up)."""
    text = httpx.get(f"{server.base_url}/actuator/prometheus", timeout=10).text
    match = re.search(rf"^{family}{re.escape(labels)} (\S+)$", text, re.M)
    assert match, f"{family}{labels} not in the exposition"
    return float(match.group(1))


def waiting(server: Gunicorn) -> float:
    return scrape(server, "platform_http_requests_waiting")


def timed_out(server: Gunicorn) -> float:
    return scrape(server, "platform_exchange_long_poll_waits_total", '{ended="timed_out"}')


def poll(
    server: Gunicorn,
    consumer: Signed,
    wait_seconds: int = 20,
    timeout: httpx.Timeout | None = None,
) -> httpx.Response:
    """A long poll of ``wait_seconds``; the client waits ``timeout`` (long enough by default)."""
    timeout = timeout or httpx.Timeout(wait_seconds + 30)
    with httpx.Client(base_url=server.base_url, timeout=timeout) as client:
        return client.get(
            f"/api/exchange/messages?waitSeconds={wait_seconds}", headers=consumer.headers()
        )


def send(server: Gunicorn, sender: Signed, consumers: list[Signed]) -> None:
    """One message to each consumer, its payload the consumer's adapter id, in batches of 100."""
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        for start in range(0, len(consumers), 100):
            batch = [
                {"to": consumer.adapter_id, "type": "t", "payload": consumer.adapter_id}
                for consumer in consumers[start : start + 100]
            ]
            answer = client.post(
                "/api/exchange/messages/batch", json={"messages": batch}, headers=sender.headers()
            )
            assert answer.status_code == 200, answer.text
            assert {item["status"] for item in answer.json()["results"]} == {"sent"}


@pytest.fixture(scope="module")
def server(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    """The default deployment's shape: two processes."""
    with running_gunicorn(stack_database, tmp_path_factory.mktemp("serve"), SERVER_ENV) as served:
        yield served


@pytest.fixture(scope="module")
def small_server(
    stack_database: StackDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    """One process with room for two waiting long polls."""
    env = {**SERVER_ENV, "EXCHANGE_LONG_POLL_MAX_WAITING": "2"}
    with running_gunicorn(
        stack_database, tmp_path_factory.mktemp("small"), env, workers=1
    ) as served:
        yield served


def test_hundreds_of_long_polls_wait_at_once_and_each_is_woken_by_its_message(
    server: Gunicorn, stack_database: StackDatabase
):
    sender, *consumers = adapters_signed_in(stack_database, "many", POLLS + 1)
    timed_out_before = timed_out(server)

    with ThreadPoolExecutor(max_workers=POLLS) as pool:
        answers = [pool.submit(poll, server, consumer) for consumer in consumers]
        wait_until(lambda: waiting(server) == POLLS, timeout=60, what=f"{POLLS} polls waiting")
        send(server, sender, consumers)
        responses = [answer.result() for answer in answers]

    assert [response.status_code for response in responses] == [200] * POLLS
    # Each poll answered with its own message, and only that.
    for consumer, response in zip(consumers, responses, strict=True):
        assert [m["payload"] for m in response.json()["messages"]] == [consumer.adapter_id]
    # No wait ran out: every one ended because a send reached its recipient.
    assert timed_out(server) == timed_out_before
    assert waiting(server) == 0


@pytest.fixture(scope="module")
def nginx(server: Gunicorn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    workdir = tmp_path_factory.mktemp("nginx")
    (workdir / "static").mkdir()
    backend = httpx.URL(server.base_url)
    with running_nginx(
        workdir, backend=f"{backend.host}:{backend.port}", static_root=workdir / "static"
    ) as proxy:
        yield proxy


async def long_poll_raw(base_url: str, consumer: Signed) -> int:
    """One long poll on a connection of its own, HTTP/1.1 written out (httpx's pool took tens of
    seconds to hand back 2,000 answers that nginx had sent within two): 200 once the answer
    holds exactly the consumer's message, else the status (-1: another answer)."""
    url = httpx.URL(base_url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    headers = "".join(f"{name}: {value}\r\n" for name, value in consumer.headers().items())
    writer.write(
        f"GET /api/exchange/messages?waitSeconds=20 HTTP/1.1\r\nHost: {url.host}\r\n"
        f"{headers}Connection: close\r\n\r\n".encode()
    )
    answer = await reader.read()  # until the server closes: the whole answer
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        return status
    payloads = [message["payload"] for message in json.loads(body)["messages"]]
    return 200 if payloads == [consumer.adapter_id] else -1


async def polls_through(base_url: str, consumers: list[Signed]) -> list[int]:
    """Every consumer's long poll at once, from one event loop."""
    return await asyncio.gather(*(long_poll_raw(base_url, consumer) for consumer in consumers))


def test_two_thousand_long_polls_wait_at_once_through_nginx_and_none_is_refused(
    server: Gunicorn, nginx: Nginx, stack_database: StackDatabase
):
    sender, *consumers = adapters_signed_in(stack_database, "capacity", CAPACITY + 1)
    timed_out_before = timed_out(server)

    with ThreadPoolExecutor(max_workers=1) as pool:
        statuses = pool.submit(asyncio.run, polls_through(nginx.base_url, consumers))
        wait_until(lambda: waiting(server) == CAPACITY, timeout=120, what="all polls waiting")
        send(server, sender, consumers)
        answered = statuses.result(timeout=120)

    assert Counter(answered) == {200: CAPACITY}
    assert timed_out(server) == timed_out_before
    assert waiting(server) == 0


def test_a_process_out_of_room_for_waiting_polls_answers_503_server_busy(
    small_server: Gunicorn, stack_database: StackDatabase
):
    sender, *consumers = adapters_signed_in(stack_database, "busy", 4)

    with ThreadPoolExecutor(max_workers=2) as pool:
        held = [pool.submit(poll, small_server, consumer) for consumer in consumers[:2]]
        wait_until(lambda: waiting(small_server) == 2, timeout=30, what="two polls waiting")
        refused = poll(small_server, consumers[2])
        at_once = poll(small_server, consumers[2], wait_seconds=0)
        send(small_server, sender, consumers[:2])
        answered = [answer.result().status_code for answer in held]

    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["code"] == "SERVER_BUSY"
    assert at_once.status_code == 200  # a receive that does not wait is never refused
    assert answered == [200, 200]


def test_the_adapters_client_retries_a_poll_refused_as_busy_and_receives(
    small_server: Gunicorn, stack_database: StackDatabase, caplog: pytest.LogCaptureFixture
):
    sender, first, second, third = adapters_signed_in(stack_database, "retry", 4)
    stack_database.shell(
        "from accounts.models import User\n"
        f"user = User.objects.get(pk={third.adapter_id})\n"
        "user.set_password('a-long-and-unusual-passphrase')\n"
        "user.save()\n"
    )
    caplog.set_level(logging.WARNING, logger="exchange_client")
    client = ExchangeClient(
        small_server.base_url, "retry-3", "a-long-and-unusual-passphrase", device_id="retry-3b"
    )

    with client, ThreadPoolExecutor(max_workers=3) as pool:
        held = [pool.submit(poll, small_server, consumer) for consumer in (first, second)]
        wait_until(lambda: waiting(small_server) == 2, timeout=30, what="two polls waiting")
        receiving = pool.submit(client.receive, 1, 20)
        wait_until(
            lambda: any("503; retrying" in record.getMessage() for record in caplog.records),
            timeout=30,
            what="the client refused as busy, and retrying",
        )
        send(small_server, sender, [first, second, third])
        received = receiving.result(timeout=60)
        answers = [answer.result().status_code for answer in held]

    assert [message.payload for message in received] == [third.adapter_id]
    assert answers == [200, 200]


def test_a_client_that_goes_away_mid_wait_frees_its_place(
    small_server: Gunicorn, stack_database: StackDatabase
):
    sender, first, second = adapters_signed_in(stack_database, "gone", 3)

    # The client gives up after 1 s of its 20 s wait and closes the connection.
    with pytest.raises(httpx.ReadTimeout):
        poll(small_server, first, timeout=httpx.Timeout(10, read=1))
    wait_until(lambda: waiting(small_server) == 0, timeout=10, what="the place given back")

    with ThreadPoolExecutor(max_workers=2) as pool:
        held = [pool.submit(poll, small_server, consumer) for consumer in (first, second)]
        wait_until(lambda: waiting(small_server) == 2, timeout=30, what="both places taken")
        send(small_server, sender, [first, second])
        answers = [answer.result() for answer in held]

    assert [answer.status_code for answer in answers] == [200, 200]


def test_a_session_ended_during_a_wait_answers_401_when_the_wait_returns(
    server: Gunicorn, stack_database: StackDatabase
):
    sender, consumer = adapters_signed_in(stack_database, "revoked", 2)

    with ThreadPoolExecutor(max_workers=1) as pool:
        answer = pool.submit(poll, server, consumer)
        wait_until(lambda: waiting(server) == 1, timeout=30, what="the poll waiting")
        logout = httpx.post(
            f"{server.base_url}/api/auth/logout",
            json={"refreshToken": consumer.refresh},
            headers={"X-Device-ID": consumer.device},
            timeout=30,
        )
        send(server, sender, [consumer])  # wakes the wait
        response = answer.result()

    assert logout.status_code in (200, 204), logout.text
    assert response.status_code == 401
    assert response.json()["code"] == "TOKEN_REVOKED"
    # The message was not leased to the ended session: another session receives it, first time.
    [again] = adapters_signed_in_again(stack_database, consumer)
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        [message] = client.get("/api/exchange/messages", headers=again.headers()).json()["messages"]
    assert (message["payload"], message["deliveryCount"]) == (consumer.adapter_id, 1)


def adapters_signed_in_again(database: StackDatabase, adapter: Signed) -> list[Signed]:
    code = (
        f"from tests.stack.seeding import *; session_more({adapter.adapter_id}, "
        f"{adapter.device + '-2'!r})"
    )
    return [Signed(*row) for row in json.loads(database.shell(code).strip().splitlines()[-1])]


def half_a_request(address: tuple[str, int]) -> socket.socket:
    """A connection that sent its headers and half its declared body, and sends no more."""
    connection = socket.create_connection(address, timeout=10)
    body = b'{"messages": [' + b" " * 500
    connection.sendall(
        b"POST /api/exchange/messages/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + body
    )
    return connection


def test_the_server_answers_health_while_clients_hold_half_sent_requests(server: Gunicorn):
    host, port = httpx.URL(server.base_url).host, httpx.URL(server.base_url).port
    assert port is not None

    with ExitStack() as stack:
        for _ in range(SLOW_CLIENTS):
            stack.enter_context(half_a_request((host, port)))
        # Every thread of both processes would be taken by now under a threaded server.
        answers = [
            httpx.get(f"{server.base_url}/api/actuator/health/liveness", timeout=10)
            for _ in range(20)
        ]

    assert [answer.status_code for answer in answers] == [200] * 20
