"""The webhook deliverer: claims messages of enabled webhooks, POSTs them, settles the outcomes.

One ``Deliverer`` runs on an event loop: in every server process (ExchangeConfig.serving), or in
a process of its own (``manage.py deliver_webhooks``, with EXCHANGE_WEBHOOK_DELIVERY_SEPARATE).
Any number of them share the work: a claim leases what it posts (exchange/webhook_queries.py), so
no message is posted by two at once, and one killed mid-request loses nothing.

The loop claims whenever a message may have arrived for a webhook's adapter (the exchange's
notifications, exchange/wakeups.py), an attempt settled (its endpoint has room again), or every
POLL_SECONDS (retries whose delay ran out, breakers that closed). Each claimed message is posted
in a task of its own, so a slow endpoint holds only its own room (EXCHANGE_WEBHOOK_CONCURRENCY
requests) and never the loop; outcomes are settled in batches, one transaction each, on a
connection of their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import httpcore
import psycopg
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from exchange import metrics, webhook_queries
from exchange.services.webhooks import webhook_disabled_notify
from exchange.wakeups import wakeups
from exchange.webhooks.outcomes import (
    Outcome,
    Push,
    health_parameters,
    retry_delay,
    settle_parameters,
)
from exchange.webhooks.signing import signature, signing_keys
from exchange.webhooks.targets import CheckedBackend, TargetRefused, ssl_context
from platform_site.database import direct_connect_async

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
REFRESH_SECONDS = 10.0  # the enabled webhooks are read again this often (and on a change)
MAX_IN_FLIGHT = 1000  # requests one deliverer has in flight, over all endpoints
CLAIM_WEBHOOKS = 200  # endpoints one claim serves at most
ERROR_BYTES = 200  # of an error answer, kept in the log
READ_BYTES = 64 * 1024  # of an answer, read before the connection is dropped
USER_AGENT = b"exchange-platform-webhooks/1"


class Deliverer:
    def __init__(self) -> None:
        self.ssl_context = ssl_context()
        self.network = CheckedBackend(allow_private=settings.EXCHANGE_WEBHOOK_ALLOW_PRIVATE)
        # A connection pool per endpoint, of its room: httpcore's pool walks all of its
        # connections at every request's start and end, so one pool for all endpoints cost each
        # request more the more endpoints were served (docs/performance.md, (l)).
        self.pools: dict[int, httpcore.AsyncConnectionPool] = {}
        self.in_flight: dict[int, int] = {}  # by adapter: posts this deliverer has under way
        self.outcomes: list[Outcome] = []
        self.woken = asyncio.Event()
        self.to_settle = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.webhooks: set[int] = set()  # adapters whose webhook is enabled, as last read
        self.refresh_at = 0.0  # when to read them again

    # -- one round, as the tests drive it ----------------------------------------------------------

    async def deliver_once(self) -> list[Outcome]:
        """Claim once, post everything claimed, settle: the outcomes."""
        async with await direct_connect_async(autocommit=True) as connection:
            pushes = await self.claim(connection)
            outcomes = list(await asyncio.gather(*(self.post(push) for push in pushes)))
            await self.settle(connection, outcomes)
        await self._close_pools(set())
        return outcomes

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        """Deliver until ``stopping`` is set; then let the posts under way finish (within the
        timeout) and settle them."""
        wakeups.watch_all(self._notified)
        settler = asyncio.create_task(self._settle_loop(stopping), name="webhook-settler")
        on_stop = asyncio.create_task(self._wake_on(stopping))
        try:
            while not stopping.is_set():
                try:
                    async with await direct_connect_async(autocommit=True) as connection:
                        await self._claim_loop(connection, stopping)
                except psycopg.Error as error:
                    logger.warning("The webhook deliverer lost its connection (%s)", error)
                    await _sleep_unless(stopping, POLL_SECONDS)
            if self.tasks:
                await asyncio.wait(self.tasks, timeout=settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS)
        finally:
            wakeups.unwatch_all(self._notified)
            self.to_settle.set()
            await settler
            on_stop.cancel()
            await self._close_pools(set())

    async def _claim_loop(
        self, connection: psycopg.AsyncConnection[Any], stop: asyncio.Event
    ) -> None:
        while not stop.is_set():
            if time.monotonic() >= self.refresh_at:
                cursor = await connection.execute(webhook_queries.ENABLED)
                self.webhooks = {row[0] for row in await cursor.fetchall()}
                self.refresh_at = time.monotonic() + REFRESH_SECONDS
                await self._close_pools(self.webhooks)
            self.woken.clear()
            room = MAX_IN_FLIGHT - sum(self.in_flight.values())
            # No webhook enabled: nothing to claim until one is (its "w" notification).
            pushes = await self.claim(connection, total=room) if room > 0 and self.webhooks else []
            for push in pushes:
                self.in_flight[push.adapter_id] = self.in_flight.get(push.adapter_id, 0) + 1
                task = asyncio.create_task(self._post_and_keep(push))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            if pushes:
                continue  # until nothing more has room: then settled attempts wake the loop
            try:
                async with asyncio.timeout(POLL_SECONDS):
                    await self.woken.wait()
            except TimeoutError:
                pass

    def _notified(self, recipient_id: int, kind: str) -> None:
        if kind in ("*", "w"):  # a webhook changed (or the listener reconnected): read them again
            self.refresh_at = 0.0
            self.woken.set()
        elif kind == "" and recipient_id in self.webhooks:
            self.woken.set()

    async def _wake_on(self, stopping: asyncio.Event) -> None:
        await stopping.wait()
        self.woken.set()
        self.to_settle.set()

    def _pool(self, adapter_id: int) -> httpcore.AsyncConnectionPool:
        pool = self.pools.get(adapter_id)
        if pool is None:
            pool = self.pools[adapter_id] = httpcore.AsyncConnectionPool(
                ssl_context=self.ssl_context,
                max_connections=settings.EXCHANGE_WEBHOOK_CONCURRENCY,
                keepalive_expiry=30,
                network_backend=self.network,
            )
        return pool

    async def _close_pools(self, keep: set[int]) -> None:
        """Close the pools of endpoints not in ``keep`` (their webhooks were turned off) that have
        nothing in flight."""
        for adapter_id in [a for a in self.pools if a not in keep and a not in self.in_flight]:
            await self.pools.pop(adapter_id).aclose()

    async def _post_and_keep(self, push: Push) -> None:
        try:
            outcome = await self.post(push)
        except Exception:
            # A fault of the deliverer's own: the lease runs out and the message comes back.
            logger.exception("Posting message %s failed", push.message_id)
            self._finished(push.adapter_id)
            return
        # Appended only now: the settler swaps the list while posts are under way.
        self.outcomes.append(outcome)
        self.to_settle.set()

    def _finished(self, adapter_id: int) -> None:
        """A post of this endpoint's is done with (settled, or lost to its lease)."""
        self.in_flight[adapter_id] -= 1
        if not self.in_flight[adapter_id]:
            del self.in_flight[adapter_id]

    async def _settle_loop(self, stopping: asyncio.Event) -> None:
        connection: psycopg.AsyncConnection[Any] | None = None
        try:
            while True:
                await self.to_settle.wait()
                self.to_settle.clear()
                while self.outcomes:
                    outcomes, self.outcomes = self.outcomes, []
                    try:
                        if connection is None or connection.closed:
                            connection = await direct_connect_async(autocommit=True)
                        await self.settle(connection, outcomes)
                    except psycopg.Error as error:
                        # Unsettled: their leases run out and they are posted again.
                        logger.warning("Webhook outcomes not settled (%s)", error)
                        connection = None
                    for outcome in outcomes:
                        self._finished(outcome.push.adapter_id)
                    self.woken.set()
                if stopping.is_set() and not self.tasks:
                    return
        finally:
            if connection is not None:
                await connection.close()

    # -- claim, post, settle -----------------------------------------------------------------------

    async def claim(
        self, connection: psycopg.AsyncConnection[Any], *, total: int = MAX_IN_FLIGHT
    ) -> list[Push]:
        """Lease what the endpoints have room for: the pushes to make."""
        concurrency = settings.EXCHANGE_WEBHOOK_CONCURRENCY
        full = [adapter for adapter, count in self.in_flight.items() if count >= concurrency]
        async with connection.transaction():
            cursor = await connection.execute(
                webhook_queries.CLAIM_WEBHOOKS,
                {
                    "breaker": settings.EXCHANGE_WEBHOOK_BREAKER_FAILURES,
                    "full": full,
                    "webhooks": CLAIM_WEBHOOKS,
                },
            )
            now = timezone.now()
            targets: dict[int, tuple[str, tuple[bytes, ...], bool]] = {}
            for (
                adapter_id,
                url,
                secret,
                previous,
                previous_until,
                probing,
            ) in await cursor.fetchall():
                valid = [secret] + ([previous] if previous and previous_until > now else [])
                targets[adapter_id] = (url, signing_keys(adapter_id, *valid), probing)
            if not targets:
                return []
            cursor = await connection.execute(
                webhook_queries.CLAIM_MESSAGES,
                {
                    "webhooks": list(targets),
                    "rooms": [1 if probing else concurrency for *_, probing in targets.values()],
                    "total": total,
                    "lease": 2 * settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS,
                    "deliverer": webhook_queries.DELIVERER,
                },
            )
            rows = await cursor.fetchall()
        return [
            Push(
                adapter_id=adapter_id,
                url=targets[adapter_id][0],
                keys=targets[adapter_id][1],
                message_id=message_id,
                lease_token=lease_token,
                attempt=attempt,
                body=body.encode(),
            )
            for adapter_id, message_id, lease_token, attempt, body in rows
        ]

    async def post(self, push: Push) -> Outcome:
        """POST one message; its outcome (never raises for the endpoint's faults)."""
        timestamp = int(time.time())
        headers = [
            (b"Content-Type", b"application/json"),
            (b"User-Agent", USER_AGENT),
            (b"webhook-id", push.message_id.encode()),
            (b"webhook-timestamp", str(timestamp).encode()),
            (
                b"webhook-signature",
                signature(
                    push.keys, webhook_id=push.message_id, timestamp=timestamp, body=push.body
                ).encode(),
            ),
        ]
        at, started = timezone.now(), time.monotonic()
        status: int | None = None
        retry_after: str | None = None
        error = ""
        try:
            async with asyncio.timeout(settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS):
                async with self._pool(push.adapter_id).stream(
                    "POST", push.url, headers=headers, content=push.body
                ) as response:
                    answer = b""
                    async for chunk in response.aiter_stream():
                        answer += chunk
                        if len(answer) >= READ_BYTES:
                            break
            status = response.status
            retry_after = _header(response.headers, b"retry-after")
            kind = "delivered" if 200 <= status < 300 else "failed"
            if kind == "failed":
                error = answer[:ERROR_BYTES].decode(errors="replace")
        except TimeoutError:
            kind, error = (
                "timeout",
                f"No answer within {settings.EXCHANGE_WEBHOOK_TIMEOUT_SECONDS} s",
            )
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError, ValueError) as failed:
            kind = "refused" if _refused(failed) else "failed"
            error = str(failed) or type(failed).__name__
        seconds = time.monotonic() - started
        metrics.webhook_deliveries.labels(kind).inc()
        metrics.webhook_delivery_seconds.observe(seconds)
        delivered = kind == "delivered"
        return Outcome(
            push=push,
            at=at,
            status=status,
            outcome=kind,
            latency_ms=round(seconds * 1000),
            error=error[:ERROR_BYTES],
            delay=0
            if delivered or status == 410
            else retry_delay(push.attempt, status, retry_after),
            gone=status == 410,
        )

    async def settle(
        self, connection: psycopg.AsyncConnection[Any], outcomes: Sequence[Outcome]
    ) -> None:
        """Record the outcomes: the messages ACKed, retried later or dead-lettered, the log, the
        endpoints' health; and tell the owners of the webhooks that this disabled."""
        if not outcomes:
            return
        async with connection.transaction():
            # The endpoints' rows first, the traffic's after (SETTLE counts): a claim holds its
            # endpoints' rows while it counts, so the other order could deadlock with one.
            cursor = await connection.execute(webhook_queries.HEALTH, health_parameters(outcomes))
            disabled = [(row[0], row[1]) for row in await cursor.fetchall() if row[1]]
            await connection.execute(
                webhook_queries.SETTLE,
                {**settle_parameters(outcomes), "deliverer": webhook_queries.DELIVERER},
            )
        for adapter_id, reason in disabled:
            logger.warning("Webhook of adapter %s disabled: %s", adapter_id, reason)
            await asyncio.to_thread(_tell_owner, adapter_id, reason)


def _refused(error: BaseException) -> bool:
    """A connection refused, by the endpoint or by the address check."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, TargetRefused | ConnectionRefusedError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _tell_owner(adapter_id: int, reason: str) -> None:
    try:
        webhook_disabled_notify(adapter_id=adapter_id, reason=reason)
    finally:
        close_old_connections()


_serving: set[asyncio.Task[None]] = set()


def deliver_while_serving() -> None:
    """Run a deliverer on the running event loop for as long as it runs (a server process): a
    process that stops abandons its posts under way, whose leases then run out (at least once)."""
    task = asyncio.get_running_loop().create_task(_deliver_forever(), name="webhook-deliverer")
    _serving.add(task)
    task.add_done_callback(_serving.discard)


async def _deliver_forever() -> None:
    """A deliverer, and a new one if it ever fails: a fault of its own must not end the server
    process's delivery for good."""
    while True:
        try:
            await Deliverer().run(asyncio.Event())
        except Exception:
            logger.exception("The webhook deliverer failed; starting another")
            await asyncio.sleep(POLL_SECONDS)


async def _sleep_unless(stopping: asyncio.Event, seconds: float) -> None:
    try:
        async with asyncio.timeout(seconds):
            await stopping.wait()
    except TimeoutError:
        pass
