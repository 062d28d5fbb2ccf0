"""The exchange_client library in this process against the live platform (gunicorn over a
PostgreSQL of this module's own): a consumer that outlives its access token and its refresh
token, four consumers with their own device ids sharing out one queue, a batch that outlasts its
lease, and a consumer that goes on through a PostgreSQL restart. Consumers run in threads; what
they handled and every ACK result the platform answered them are recorded and compared with the
server's sessions and delivery log."""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from exchange_client import (
    AuthenticationError,
    ExchangeClient,
    ExchangeError,
    Message,
    Outgoing,
    PayloadTooLarge,
    PermissionDenied,
    Sent,
    Summary,
)

from tests.clients.conftest import query, stock
from tests.stack.conftest import Adapter, Gunicorn, Owner, StackDatabase, wait_until
from tests.stack.processes import running_gunicorn

pytestmark = pytest.mark.stack

# The shortest lifetimes the platform allows (platform_site/settings.py): a refresh token never
# outlives its session, so with the session's maximum age at 60 s the pair issued by the first
# refresh (at 30 s) is the last; the next expiry needs a new sign-in.
SHORT_LIVED_TOKENS = {
    "JWT_ACCESS_TTL_SECONDS": "30",
    "JWT_REFRESH_TTL_SECONDS": "60",
    "SESSION_MAX_AGE_SECONDS": "60",
}
CONSUMERS = 4
PARALLEL_MESSAGES = 2000
RESTART_MESSAGES = 300
# Short enough for a test to outlast, long enough for the lease keeper to extend it in time.
SHORT_LEASE = 6


class RecordingClient(ExchangeClient):
    """An ExchangeClient that keeps every ACK result the platform answered it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ack_results: list[tuple[str, str]] = []

    def ack(self, messages: Iterable[Message | str]) -> dict[str, str]:
        results = super().ack(messages)
        self.ack_results.extend(results.items())
        return results

    def ack_and_receive(
        self, messages: Iterable[Message | str], *receiving: int
    ) -> tuple[dict[str, str], list[Message]]:
        # Its ACKs before the last chunk's go through ack() above.
        messages = list(messages)
        before = len(self.ack_results)
        results, received = super().ack_and_receive(messages, *receiving)
        recorded = dict(self.ack_results[before:])
        self.ack_results.extend((m, s) for m, s in results.items() if m not in recorded)
        return results, received


def client_for(base_url: str, adapter: Adapter, device: str) -> RecordingClient:
    return RecordingClient(base_url, adapter.login, adapter.password, device_id=device)


def consuming(
    pool: ThreadPoolExecutor,
    client: ExchangeClient,
    handler: Callable[[Message], None],
    **options: Any,
) -> Future[Summary]:
    """``client.consume(handler)`` in a thread of ``pool`` (signals are the main thread's)."""
    return pool.submit(client.consume, handler, handle_signals=False, **options)


def alive(run: Future[Summary]) -> bool:
    """Whether a consume() still runs; one that failed raises its error here."""
    if run.done():
        run.result()
    return not run.done()


def sessions_of(database: StackDatabase, adapter: Adapter) -> list[dict[str, Any]]:
    rows = query(
        database,
        "SELECT device_id, created_at, refreshed_at, expires_at, revoked_at, revoked_reason "
        "FROM accounts_session WHERE user_id = %s ORDER BY created_at",
        adapter.adapter_id,
    )
    names = ("device_id", "created_at", "refreshed_at", "expires_at", "revoked_at", "reason")
    return [dict(zip(names, row, strict=True)) for row in rows]


def delivery_log(database: StackDatabase, adapter: Adapter) -> Counter[str]:
    """How often each message of the adapter's queue is in the delivery log (acknowledged)."""
    rows = query(
        database,
        "SELECT message_id::text FROM exchange_delivery_log WHERE recipient_id = %s",
        adapter.adapter_id,
    )
    return Counter(message_id for (message_id,) in rows)


def waiting(database: StackDatabase, adapter: Adapter) -> tuple[int, int]:
    """Messages still queued for the adapter, and its dead letters."""
    [counts] = query(
        database,
        "SELECT (SELECT count(*) FROM exchange_message WHERE recipient_id = %s), "
        "(SELECT count(*) FROM exchange_deadletter WHERE recipient_id = %s)",
        adapter.adapter_id,
        adapter.adapter_id,
    )
    return counts[0], counts[1]


def acked_once_each(clients: Iterable[RecordingClient], ids: set[str]) -> None:
    """Every message was answered ``acked`` to exactly one ACK, and nothing else went wrong."""
    results = [result for client in clients for result in client.ack_results]
    acked = Counter(message_id for message_id, status in results if status == "acked")
    assert set(acked) == ids
    assert set(acked.values()) == {1}, [m for m, n in acked.items() if n > 1]
    assert {status for _, status in results} <= {"acked", "alreadyAcked"}


def handled_again_only_when_redelivered(handled: Iterable[Message]) -> None:
    deliveries: dict[str, list[int]] = {}
    for message in handled:
        deliveries.setdefault(message.message_id, []).append(message.delivery_count)
    for message_id, counts in deliveries.items():
        if len(counts) > 1:
            assert max(counts) > 1, (message_id, counts)
            assert len(set(counts)) == len(counts), (message_id, counts)


TRANSPORTS = ("stream", "poll")


def test_consumers_outlive_their_access_and_refresh_tokens_by_refreshing_then_signing_in_again(
    stack_database: StackDatabase,
    owner: Owner,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A consumer on a push stream and one polling, side by side in one server (the lifetimes
    take a minute to run out: both transports live through the same minute)."""
    recipients = {t: owner.create_adapter(f"lifetimes-consumer-{t}") for t in TRANSPORTS}
    senders = {t: owner.create_adapter(f"lifetimes-sender-{t}") for t in TRANSPORTS}
    caplog.set_level(logging.INFO, logger="exchange_client")
    handled: dict[str, list[Message]] = {t: [] for t in TRANSPORTS}
    sent: dict[str, list[str]] = {t: [] for t in TRANSPORTS}
    summaries: dict[str, Summary] = {}

    with running_gunicorn(stack_database, tmp_path / "short-lived", SHORT_LIVED_TOKENS) as server:
        consumers = {
            t: client_for(server.base_url, recipients[t], "lifetimes-consumer-1")
            for t in TRANSPORTS
        }
        sending = {
            t: client_for(server.base_url, senders[t], "lifetimes-sender-1") for t in TRANSPORTS
        }
        with ExitStack() as clients, ThreadPoolExecutor(max_workers=len(TRANSPORTS)) as pool:
            for client in (*consumers.values(), *sending.values()):
                clients.enter_context(client)
            runs = {
                t: consuming(pool, consumers[t], handled[t].append, wait=1, transport=t)
                for t in TRANSPORTS
            }

            def sessions(transport: str) -> list[dict[str, Any]]:
                assert alive(runs[transport])
                return sessions_of(stack_database, recipients[transport])

            def handled_last(transport: str) -> bool:
                latest = sent[transport][-1]
                return alive(runs[transport]) and latest in {
                    m.message_id for m in handled[transport]
                }

            phases: list[tuple[str, Callable[[str], bool]]] = [
                ("signed in", lambda t: len(sessions(t)) == 1),
                ("refreshed", lambda t: sessions(t)[0]["refreshed_at"] is not None),
                ("signed in again", lambda t: len(sessions(t)) == 2),
            ]
            try:
                for phase, reached in phases:
                    for t in TRANSPORTS:
                        wait_until(
                            functools.partial(reached, t),
                            timeout=90,
                            what=f"the {t} consumer's session to be {phase}",
                        )
                        message = sending[t].send(recipients[t].adapter_id, "tick", {"at": phase})
                        sent[t].append(message.message_id)
                    for t in TRANSPORTS:
                        wait_until(
                            functools.partial(handled_last, t),
                            timeout=30,
                            what=f"the message sent once {phase} to be handled by {t}",
                        )
            finally:
                for t in TRANSPORTS:
                    consumers[t].stop()
            summaries = {t: runs[t].result(timeout=30) for t in TRANSPORTS}

    for t in TRANSPORTS:
        # It kept working: each message handled once, and acknowledged.
        assert [m.message_id for m in handled[t]] == sent[t]
        assert summaries[t] == Summary(handled=3, failed=0, given_back=0)
        acked_once_each([consumers[t]], set(sent[t]))
        # The server saw one refresh of the first session, then, once the refresh token had
        # expired (with its session: at its end cut to the second, as JWTs count), a new sign-in
        # from the same device id; no refresh token was presented twice, and the consumer signed
        # out as it stopped.
        first, second = sessions_of(stack_database, recipients[t])
        assert first["refreshed_at"] is not None
        assert (
            first["refreshed_at"]
            < first["expires_at"].replace(microsecond=0)
            <= second["created_at"]
        )
        assert (first["device_id"], second["device_id"]) == ("lifetimes-consumer-1",) * 2
        assert first["revoked_at"] is None
        assert second["reason"] == "logout"
    # The senders, in this thread, renewed their own pairs the same way; the consumers' threads:
    # each was refused a refresh once and signed in again.
    logged = [r.getMessage() for r in caplog.records if r.threadName != "MainThread"]
    refused = [message for message in logged if message.startswith("Refresh refused")]
    assert refused == ["Refresh refused (TOKEN_EXPIRED): signing in again"] * len(TRANSPORTS)
    # On the stream, the platform ended it as each access token expired; it reconnected. The
    # polling consumer has no stream to end.
    ended = "Stream ended (TOKEN_EXPIRED): renewing the tokens and reconnecting"
    assert ended in logged


def test_a_client_signs_in_again_with_its_device_token_while_others_locked_its_adapter(
    gunicorn: Gunicorn, owner: Owner
) -> None:
    adapter = owner.create_adapter("device-token-keeper")
    wrong = {"username": adapter.login, "password": "somebody else's guess"}
    with (
        client_for(gunicorn.base_url, adapter, "device-token-keeper-1") as running,
        client_for(gunicorn.base_url, adapter, "device-token-keeper-2") as restarted,
        gunicorn.client() as stranger,
    ):
        assert running.whoami()["login"] == adapter.login  # signed in: a device token kept
        guesses = [stranger.post("/api/auth/login/username", json=wrong) for _ in range(6)]
        assert [g.status_code for g in guesses] == [401] * 5 + [423]

        running.logout()
        again = running.whoami()  # a new sign-in, with X-Device-Token

        with pytest.raises(AuthenticationError) as refused:
            restarted.whoami()  # no token yet: the account's lock
    assert again["login"] == adapter.login
    assert (refused.value.status, refused.value.code) == (423, "ACCOUNT_LOCKED")


def test_four_consumers_with_their_own_device_ids_ack_each_of_2000_messages_exactly_once(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("parallel")
    ids = set(stock(stack_database, adapter, PARALLEL_MESSAGES))
    clients = [
        client_for(gunicorn.base_url, adapter, f"parallel-{index}") for index in range(CONSUMERS)
    ]
    handled: list[list[Message]] = [[] for _ in clients]
    # Each consumer's first message waits until all four hold a batch: they run side by side.
    all_at_work = threading.Barrier(CONSUMERS)

    def handler(index: int) -> Callable[[Message], None]:
        def handle(message: Message) -> None:
            if not handled[index]:
                all_at_work.wait(timeout=60)
            handled[index].append(message)

        return handle

    with ThreadPoolExecutor(max_workers=CONSUMERS) as pool:
        runs = [
            consuming(pool, client, handler(index), batch=10, wait=0, until_empty=True)
            for index, client in enumerate(clients)
        ]
        summaries = [run.result(timeout=180) for run in runs]
    for client in clients:
        client.close()

    assert not all_at_work.broken
    everything = [message for messages in handled for message in messages]
    assert {m.message_id for m in everything} == ids
    assert all(handled), [len(messages) for messages in handled]
    handled_again_only_when_redelivered(everything)
    assert [s.handled for s in summaries] == [len(messages) for messages in handled]
    assert sum(s.failed + s.given_back for s in summaries) == 0
    acked_once_each(clients, ids)
    logged = delivery_log(stack_database, adapter)
    assert set(logged) == ids
    assert set(logged.values()) == {1}
    assert waiting(stack_database, adapter) == (0, 0)
    acked_by = query(
        stack_database,
        "SELECT DISTINCT acked_by FROM exchange_delivery_log WHERE recipient_id = %s",
        adapter.adapter_id,
    )
    assert len(acked_by) == CONSUMERS


def test_a_slow_batch_keeps_the_leases_of_its_handled_messages_until_their_ack(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("slow-batch")
    first, second = stock(stack_database, adapter, 2)
    handled: list[Message] = []
    in_hand = threading.Event()
    go_on = threading.Event()

    def handle(message: Message) -> None:
        handled.append(message)
        if message.message_id == second:  # the first is handled, not yet acknowledged
            in_hand.set()
            go_on.wait(timeout=60)

    consumer = client_for(gunicorn.base_url, adapter, "slow-batch-1")
    other = client_for(gunicorn.base_url, adapter, "slow-batch-2")
    with consumer, other, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(
            pool, consumer, handle, batch=2, wait=0, lease=SHORT_LEASE, until_empty=True
        )
        try:
            wait_until(lambda: alive(run) and in_hand.is_set(), timeout=30, what="the batch")
            # The lease the batch was received with has run out by the platform's clock (its
            # leaseExpiresAt is cut to the second).
            lease_ended = handled[0].lease_expires_at + timedelta(seconds=2)
            wait_until(
                lambda: (
                    alive(run)
                    and query(stack_database, "SELECT statement_timestamp()")[0][0] > lease_ended
                ),
                timeout=30,
                what="the first lease to end",
            )
            taken = other.receive(max_messages=10)
        finally:
            go_on.set()
        summary = run.result(timeout=30)

    # Another instance got nothing: the handled message's lease was kept until the batch's ACK.
    assert [m.message_id for m in taken] == []
    assert [m.message_id for m in handled] == [first, second]
    assert summary == Summary(handled=2, failed=0, given_back=0)
    assert consumer.ack_results == [(first, "acked"), (second, "acked")]


def test_a_consumer_handles_every_message_through_a_postgresql_restart_and_none_is_acked_twice(
    gunicorn: Gunicorn,
    stack_database: StackDatabase,
    owner: Owner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = owner.create_adapter("restarted")
    ids = stock(stack_database, adapter, RESTART_MESSAGES)
    caplog.set_level(logging.WARNING, logger="exchange_client")
    handled: list[Message] = []
    in_hand = threading.Event()
    go_on = threading.Event()

    def handle(message: Message) -> None:
        handled.append(message)
        if len(handled) == RESTART_MESSAGES // 3 - 5:  # mid-batch, near a third of the queue
            in_hand.set()
            go_on.wait(timeout=60)

    def retried() -> bool:
        return any("retrying" in record.getMessage() for record in caplog.records)

    consumer = client_for(gunicorn.base_url, adapter, "restarted-1")
    with consumer, ThreadPoolExecutor(max_workers=1) as pool:
        run = consuming(pool, consumer, handle, batch=10, wait=1)
        try:
            wait_until(lambda: alive(run) and in_hand.is_set(), timeout=60, what="a batch in hand")
            stack_database.stop()
            go_on.set()  # the batch's ACK meets the database stopped
            wait_until(lambda: alive(run) and retried(), timeout=60, what="the client to retry")
            stack_database.start()
            wait_until(
                lambda: alive(run) and {m.message_id for m in handled} == set(ids),
                timeout=120,
                what="every message to be handled",
            )
            wait_until(
                lambda: alive(run) and waiting(stack_database, adapter) == (0, 0),
                timeout=60,
                what="the queue to be empty",
            )
        finally:
            go_on.set()
            consumer.stop()
        summary = run.result(timeout=30)

    # "POST /api/exchange/messages/ack: 503; retrying in 1.0 s" -> "POST /api/exchange/messages/ack: 503"
    retries = Counter(
        r.getMessage().split(";")[0] for r in caplog.records if "retrying" in r.getMessage()
    )
    print(f"what the consumer retried through the restart: {dict(retries)}")  # noqa: T201
    assert retries
    assert {m.message_id for m in handled} == set(ids)
    handled_again_only_when_redelivered(handled)
    assert (summary.failed, summary.given_back) == (0, 0)
    acked_once_each([consumer], set(ids))
    logged = delivery_log(stack_database, adapter)
    assert set(logged) == set(ids)
    assert set(logged.values()) == {1}


def sent_only(outcomes: list[Sent | ExchangeError]) -> list[Sent]:
    assert all(isinstance(outcome, Sent) for outcome in outcomes), outcomes
    return [outcome for outcome in outcomes if isinstance(outcome, Sent)]


def test_send_batch_answers_each_message_in_order_and_a_retry_queues_nothing_twice(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    recipient = owner.create_adapter("batch-recipient")
    producer = owner.create_adapter("batch-producer")
    batch = [
        Outgoing(recipient.adapter_id, "stock", {"n": n}, idempotency_key=f"stock-{n}")
        for n in range(230)
    ]
    batch[7] = Outgoing(999_999, "stock", {"n": 7})  # nobody we may send to
    batch[150] = Outgoing(recipient.adapter_id, "stock", "x" * 300_000)  # over 256 KiB

    with client_for(gunicorn.base_url, producer, "batch-producer-1") as client:
        first = client.send_batch(batch)
        again = client.send_batch(batch[:7] + batch[8:150] + batch[151:])

    assert isinstance(first[7], PermissionDenied)
    assert first[7].code == "SEND_NOT_ALLOWED"
    assert isinstance(first[150], PayloadTooLarge)
    sent = sent_only([outcome for n, outcome in enumerate(first) if n not in (7, 150)])
    assert not any(outcome.duplicate for outcome in sent)
    # The same keys again: each a duplicate of its first message, nothing queued anew.
    assert [(o.message_id, o.duplicate) for o in sent_only(again)] == [
        (o.message_id, True) for o in sent
    ]
    handled: list[Message] = []
    with client_for(gunicorn.base_url, recipient, "batch-recipient-1") as consumer:
        consumer.consume(handled.append, batch=100, wait=0, until_empty=True, handle_signals=False)
    assert [m.payload["n"] for m in handled] == [n for n in range(230) if n not in (7, 150)]
    assert [m.message_id for m in handled] == [o.message_id for o in sent]


def test_send_batch_sends_again_what_a_full_queue_refused_until_all_are_queued(
    stack_database: StackDatabase,
    owner: Owner,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="exchange_client")
    recipient = owner.create_adapter("bounded-recipient")
    producer = owner.create_adapter("bounded-producer")
    bounded = {"EXCHANGE_MAX_QUEUE_DEPTH": "20"}
    batch = [Outgoing(recipient.adapter_id, "stock", {"n": n}) for n in range(60)]
    handled: list[Message] = []

    with running_gunicorn(stack_database, tmp_path / "bounded", bounded) as server:
        consumer = client_for(server.base_url, recipient, "bounded-recipient-1")
        with consumer, ThreadPoolExecutor(max_workers=1) as pool:
            run = consuming(pool, consumer, handled.append, batch=10, wait=1)
            with client_for(server.base_url, producer, "bounded-producer-1") as client:
                outcomes = client.send_batch(batch)
            wait_until(
                lambda: alive(run) and len(handled) >= 60, timeout=120, what="all 60 handled"
            )
            consumer.stop()
            run.result(timeout=30)

    sent = sent_only(outcomes)
    assert not any(outcome.duplicate for outcome in sent)
    # The first request found room for 20: the rest were sent again as the consumer made room.
    assert any("refused for now" in record.getMessage() for record in caplog.records)
    assert sorted(m.payload["n"] for m in handled) == list(range(60))
    assert {m.message_id for m in handled} == {o.message_id for o in sent}


class CountingTransport(httpx.HTTPTransport):
    """Counts the requests a client makes, by method and path; ``on_request`` runs before each."""

    def __init__(self, on_request: Callable[[httpx.Request], None] = lambda request: None) -> None:
        super().__init__()
        self.requests: Counter[tuple[str, str]] = Counter()
        self.on_request = on_request

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests[(request.method, request.url.path)] += 1
        self.on_request(request)
        return super().handle_request(request)


RECEIVE = ("GET", "/api/exchange/messages")
ACK = ("POST", "/api/exchange/messages/ack")


def test_ack_and_receive_acknowledges_then_answers_the_next_batch_in_one_request_per_100(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("ack-receive")
    ids = stock(stack_database, adapter, 260)
    transport = CountingTransport()
    with (
        ExchangeClient(
            gunicorn.base_url,
            adapter.login,
            adapter.password,
            device_id="ack-receive-1",
            transport=transport,
        ) as client,
        ExchangeClient(
            gunicorn.base_url, adapter.login, adapter.password, device_id="ack-receive-2"
        ) as other,
    ):
        first = client.receive(100)
        second = other.receive(100)  # an ACK goes by id, whoever holds the message
        results, following = client.ack_and_receive(first + second, 60)
        rest, nothing = client.ack_and_receive(following, 100)
        _, last = client.ack_and_receive([], 10)

    assert results == dict.fromkeys(ids[:200], "acked")
    assert [m.message_id for m in following] == ids[200:]
    assert rest == dict.fromkeys(ids[200:], "acked")
    assert (nothing, last) == ([], [])
    # 200 ids: a plain ACK of the first 100, then the last 100 with the receive; no ids: a GET.
    assert (transport.requests[RECEIVE], transport.requests[ACK]) == (2, 3)
    assert waiting(stack_database, adapter) == (0, 0)


def test_consume_receives_each_next_batch_with_the_ack_of_the_last(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("one-request")
    ids = stock(stack_database, adapter, 30)
    transport = CountingTransport()
    handled: list[Message] = []
    with ExchangeClient(
        gunicorn.base_url,
        adapter.login,
        adapter.password,
        device_id="one-request-1",
        transport=transport,
    ) as client:
        summary = client.consume(
            handled.append, batch=10, wait=0, until_empty=True, handle_signals=False
        )

    assert [m.message_id for m in handled] == ids
    assert (summary.handled, summary.failed, summary.given_back) == (30, 0, 0)
    # One receive to start; each batch's ACK received the next (the last found none).
    assert (transport.requests[RECEIVE], transport.requests[ACK]) == (1, 3)
    assert set(delivery_log(stack_database, adapter)) == set(ids)


def test_a_stop_while_the_ack_receives_gives_the_batch_it_received_back_at_once(
    gunicorn: Gunicorn, stack_database: StackDatabase, owner: Owner
) -> None:
    adapter = owner.create_adapter("stop-receive")
    ids = stock(stack_database, adapter, 20)
    handled: list[Message] = []

    def stop_on_the_receiving_ack(request: httpx.Request) -> None:
        if request.url.path == ACK[1] and b'"receive"' in request.content:
            client.stop()  # as a signal would, while the request is on its way

    client = ExchangeClient(
        gunicorn.base_url,
        adapter.login,
        adapter.password,
        device_id="stop-receive-1",
        transport=CountingTransport(stop_on_the_receiving_ack),
    )
    with client:
        summary = client.consume(
            handled.append, batch=10, wait=0, handle_signals=False, transport="poll"
        )
        # Given back, not held under a lease: another instance receives them at once.
        with ExchangeClient(
            gunicorn.base_url, adapter.login, adapter.password, device_id="stop-receive-2"
        ) as other:
            again = other.receive(100)

    assert [m.message_id for m in handled] == ids[:10]
    assert (summary.handled, summary.given_back) == (10, 10)
    assert [m.message_id for m in again] == ids[10:]
    assert set(delivery_log(stack_database, adapter)) == set(ids[:10])
