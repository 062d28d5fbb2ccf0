"""(m): topics beside a RabbitMQ fanout exchange, one publisher and 10, then 100, subscribers.

The API's side: the bench's sender publishes to a topic of the bench's owner, BATCH publications
per ``POST /api/exchange/topics/{id}/messages/batch``; each subscriber (an adapter with a session
of its own) receives 100 at a time and acknowledges each batch with an ACK that receives the next
(``topic_runs``). RabbitMQ's side: a durable fanout exchange bound to a durable queue per
subscriber, persistent messages with their confirms awaited per 100, consumers with a prefetch
of 100 and one multiple ack per batch (``topic_rabbitmq``). Payloads of PAYLOAD_BYTES, the same
bytes on both sides; the publisher publishes as fast as it is answered.

Each turn publishes a fixed number of publications; its figures: publications a second (the
publisher's, from its first publish to its last answer or confirm), delivered copies a second
(ACKed by all the subscribers, from the first publish to the last ACK), the p50 from a
publication's publish to its copy's ACK (with a publisher that runs ahead, mostly the time a copy
waited behind the others), and the bytes written per publication: the PostgreSQL server's WAL
(pg_current_wal_lsn, the whole server's: pg_walinspect, where the bench may use it, says how
much of it was the bench database's) against beam.smp's write_bytes in /proc. The sides take
turns (API, RabbitMQ, RabbitMQ, API) after a warm-up turn each.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import fields
from functools import partial

from bench.throughput.figures import Bench
from bench.throughput.latency import percentile
from bench.throughput.load import in_rotation
from bench.throughput.machine import CpuShare, quiet_wait
from bench.throughput.rabbitmq import PREFETCH
from bench.throughput.report import Row, fmt, log, verdict
from bench.throughput.servers import queue_clear
from bench.throughput.stream_figures import log_note, log_since, log_size
from bench.throughput.topic_rabbitmq import (
    fanout_declared,
    fanout_purge,
    rabbitmq_publisher,
    rabbitmq_subscribers,
)
from bench.throughput.topic_runs import (
    BATCH,
    PAYLOAD_BYTES,
    Turn,
    api_publisher,
    api_subscribers,
    subscribers_create,
    turn_run,
)
from bench.throughput.waiting import Waiter

SUBSCRIBERS = (10, 100)
# Publications per turn at the plan's 12 s a figure (scaled with --duration and --quick): a few
# seconds of copies delivered on either side.
PUBLICATIONS = {10: 3_000, 100: 500}
PROCESSES = 2  # each side's subscribers are spread over this many processes
ROUNDS = 2  # measured turns of each side
WARM_SHARE = 4  # a warm-up turn of a quarter of the publications, each side, before the turns
# Seconds a measured turn waits at most for a quiet machine (or --quiet-wait's, if shorter): on a
# machine shared with test suites, waiting longer mostly makes the run longer.
TURN_QUIET = 10.0
TARGET = 1.0  # (m)100's delivered copies a second against RabbitMQ's


def publications_of(duration: float, subscribers: int) -> int:
    scaled = PUBLICATIONS[subscribers] * duration / 12
    return max(BATCH, BATCH * round(scaled / BATCH))


def topics(bench: Bench, phases: set[str]) -> None:
    if "m" not in phases:
        return
    log(f"(m) topics: 1 publisher, {' then '.join(map(str, SUBSCRIBERS))} subscribers per side")
    waiters, topic_ids = subscribers_create(bench.database_url, SUBSCRIBERS)
    offset = log_size(bench.server)
    for count in SUBSCRIBERS:
        ours, theirs = phase(bench, waiters[:count], topic_ids[count])
        key = f"(m){count}"
        bench.notes += side_notes(key + "mq", theirs) + side_notes(key, ours)
        bench.rows += phase_rows(count, ours, theirs)
    bench.notes += log_note("(m)", log_since(bench.server, offset))


def phase(bench: Bench, waiters: list[Waiter], topic: int) -> tuple[list[Turn], list[Turn]]:
    """A warm-up turn of each side, then ROUNDS turns of each in rotation."""
    assert bench.rabbitmq is not None
    broker, count = bench.rabbitmq, len(waiters)
    publications = publications_of(bench.plan.duration, count)
    key = f"(m){count}"
    log(f"{key} {publications:,} publications of {PAYLOAD_BYTES:,} bytes a turn")
    ids = [waiter.adapter_id for waiter in waiters]
    queue_clear(bench.database_url, ids)  # and the phase's one checkpoint
    with fanout_declared(broker, count) as fanout:

        def api_turn(size: int, before: float) -> Turn:
            groups = [
                partial(api_subscribers, bench.server, waiters[n::PROCESSES], size)
                for n in range(min(PROCESSES, count))
            ]
            publisher = partial(api_publisher, bench.server, bench.sender, topic, size)
            turn = turn_run(bench.database_url, bench.server, "api", count, publisher, groups)
            queue_clear(bench.database_url, ids, checkpoint=False)  # VACUUM: no dead rows
            return logged(key, turn, before)

        def rabbitmq_turn(size: int, before: float) -> Turn:
            fanout_purge(broker, fanout)
            groups = [
                partial(rabbitmq_subscribers, broker, fanout.queues[n::PROCESSES], size)
                for n in range(min(PROCESSES, count))
            ]
            publisher = partial(rabbitmq_publisher, broker, fanout, size)
            turn = turn_run(bench.database_url, bench.server, "rabbitmq", count, publisher, groups)
            return logged(key + "mq", turn, before)

        api_turn(publications // WARM_SHARE, 0.0)
        rabbitmq_turn(publications // WARM_SHARE, 0.0)
        quiet = min(TURN_QUIET, bench.quiet_limit)
        runs = [
            lambda _: api_turn(publications, quiet_wait(quiet)),
            lambda _: rabbitmq_turn(publications, quiet_wait(quiet)),
        ]
        ours, theirs = in_rotation(runs, bench.plan, ROUNDS)
    return ours, theirs


def logged(key: str, turn: Turn, before: float) -> Turn:
    turn.before = before
    log(
        f"{key} turn: {turn.publications:,} publications in {turn.publish_seconds:.2f} s, "
        f"{turn.copies:,} of {turn.expected:,} copies ACKed in {turn.seconds:.2f} s "
        f"({turn.copies / max(turn.seconds, 1e-9):,.0f}/s); errors {dict(turn.errors) or 0}"
    )
    return turn


# --- The figures of a side's turns ----------------------------------------------------------------


def copies_rate(turns: list[Turn]) -> float:
    return sum(t.copies for t in turns) / sum(t.seconds for t in turns)


def publications_rate(turns: list[Turn]) -> float:
    return sum(t.publications for t in turns) / sum(t.publish_seconds for t in turns)


def written_per_publication(turns: list[Turn], *, io: bool = False) -> float | None:
    """Bytes per publication: the WAL or beam.smp's write_bytes; with ``io``, the API's side's
    PostgreSQL processes' write_bytes."""
    written = [t.pg_written if io else t.written for t in turns]
    if any(value is None for value in written):
        return None
    return sum(value or 0 for value in written) / sum(t.publications for t in turns)


def p50(turns: list[Turn]) -> float:
    return percentile([value for t in turns for value in t.latencies_ms], 0.5)


def cpu_of(turns: list[Turn]) -> CpuShare:
    """The turns' CPU shares, weighted by their windows."""
    weights = [t.meter_seconds for t in turns]
    cpu = CpuShare()
    for share in fields(CpuShare):
        if share.name != "split":
            values = [getattr(t.cpu, share.name) for t in turns]
            setattr(cpu, share.name, statistics.fmean(values, weights=weights))
    return cpu


def per_copy_us(turns: list[Turn], share: str) -> float:
    """µs of CPU per ACKed copy of one party's share (a CpuShare field: client, server, ...)."""
    used = sum(float(getattr(t.cpu, share)) / 100 * t.meter_seconds for t in turns)
    return 1e6 * used / max(1, sum(t.copies for t in turns))


def side_notes(key: str, turns: list[Turn]) -> list[str]:
    rabbit = turns[0].side == "rabbitmq"
    cpu = cpu_of(turns)
    copies, publications = sum(t.copies for t in turns), sum(t.publications for t in turns)
    requests = sum(t.requests for t in turns)
    before = "/".join(f"{t.before:.0f}" for t in turns)
    if rabbit:
        servers = f"beam.smp {per_copy_us(turns, 'rabbitmq'):,.0f}"
        calls = f"{copies / max(1, requests):.1f} copies per multiple ack"
    else:
        servers = (
            f"gunicorn {per_copy_us(turns, 'server'):,.0f}, PostgreSQL "
            f"{per_copy_us(turns, 'postgres'):,.0f} (its background "
            f"{per_copy_us(turns, 'postgres_background'):,.0f}), Redis "
            f"{per_copy_us(turns, 'redis'):,.0f}"
        )
        calls = f"{requests / max(1, copies) * BATCH:.2f} subscriber requests per {BATCH} copies"
    lines = [
        f"{key:<8} {cpu.line()}  beam.smp {cpu.rabbitmq:.0f}%, postgres background "
        f"{cpu.postgres_background:.0f}%  [machine {before}% just before each turn]",
        " " * 11
        + f"µs of CPU per copy: {servers}, the clients {per_copy_us(turns, 'client'):,.0f}",
        " " * 11 + f"{publications:,} publications, {copies:,} of "
        f"{sum(t.expected for t in turns):,} copies ACKed, {calls}; publishing took "
        f"{sum(t.publish_seconds for t in turns) / sum(t.seconds for t in turns):.0%} of the "
        f"window; refused {sum(t.refused for t in turns)}; errors "
        f"{dict(sum((t.errors for t in turns), Counter())) or 0}",
    ]
    if rabbit:
        beam = written_per_publication(turns)
        wrote = f"{beam:,.0f} bytes per publication" if beam is not None else "? (unreadable)"
        return [*lines, " " * 11 + f"beam.smp wrote {wrote}"]
    wal = sum(t.wal for t in turns)
    lines.append(
        " " * 11 + f"WAL {wal / max(1, copies):,.0f} bytes per copy, {wal / publications:,.0f} "
        f"per publication; {wal_share(turns)}"
    )
    lines.append(
        " " * 11 + f"the autovacuum stand-in vacuumed the hot table "
        f"{sum(t.vacuums for t in turns)} times (the server's autovacuum is off: autovacuum.py)"
    )
    return lines


def wal_share(turns: list[Turn]) -> str:
    """The bench database's part of the WAL's records, and its bytes per copy by relation."""
    notes = {t.records_note for t in turns if t.records is None}
    if notes:
        return "its records unread (" + "; ".join(sorted(notes)) + ")"
    total = ours = fpi = 0
    relations: Counter[str] = Counter()
    for t in turns:
        assert t.records is not None
        total, ours, fpi = total + t.records.total, ours + t.records.ours, fpi + t.records.fpi
        relations.update({name: size for name, (size, _) in t.records.relations.items()})
    copies = max(1, sum(t.copies for t in turns))
    top = ", ".join(f"{name} {size / copies:,.0f}" for name, size in relations.most_common(6))
    return (
        f"the bench database's {ours / max(1, total):.0%} of the records' bytes (pg_walinspect), "
        f"full-page images {fpi / max(1, ours):.0%} of those; bytes per copy by relation: {top}"
    )


# --- The rows -------------------------------------------------------------------------------------


def ratio(ours: float | None, theirs: float | None, key: str) -> str:
    return f"{ours / theirs:.2f} x {key}" if ours is not None and theirs else ""


def phase_rows(count: int, ours: list[Turn], theirs: list[Turn]) -> list[Row]:
    key, mq = f"(m){count}", f"(m){count}mq"
    published, published_mq = publications_rate(ours), publications_rate(theirs)
    copies, copies_mq = copies_rate(ours), copies_rate(theirs)
    written, written_mq = written_per_publication(ours), written_per_publication(theirs)
    io = written_per_publication(ours, io=True)
    delivered = ratio(copies, copies_mq, mq)
    target = f">= {TARGET:.2f} x {mq}" if count == max(SUBSCRIBERS) else ""
    return [
        Row(
            mq,
            f"RabbitMQ fanout exchange, {count} durable queues, persistent, confirms per "
            f"{BATCH}: publications",
            fmt(published_mq),
            "pubs/s",
            "baseline",
        ),
        Row(
            key,
            f"topic, {count} subscribers, {BATCH} per POST .../messages/batch: publications",
            fmt(published),
            "pubs/s",
            ratio(published, published_mq, mq),
        ),
        Row(
            mq,
            f"RabbitMQ, {count} consumers, prefetch {PREFETCH}, a multiple ack: delivered "
            f"copies (p50 publish -> ack {p50(theirs):,.0f} ms)",
            fmt(copies_mq),
            "copies/s",
            "baseline",
        ),
        Row(
            key,
            f"topic, {count} subscribers, ACKs that receive {BATCH}: delivered copies "
            f"(p50 publish -> ACK {p50(ours):,.0f} ms)",
            fmt(copies),
            "copies/s",
            delivered,
            target,
            verdict(copies >= TARGET * copies_mq) if target else "",
        ),
        Row(
            mq,
            "bytes written per publication (beam.smp's write_bytes)",
            fmt(written_mq) if written_mq is not None else "unread",
            "bytes",
            "baseline" if written_mq is not None else "/proc/<beam.smp>/io unreadable",
        ),
        Row(
            key,
            "WAL written per publication (pg_current_wal_lsn, the whole server)",
            fmt(written) if written is not None else "?",
            "bytes",
            ratio(written, written_mq, mq),
        ),
        Row(
            key,
            "PostgreSQL's write_bytes per publication (the database's backends, the background)",
            fmt(io) if io is not None else "unread",
            "bytes",
            ratio(io, written_mq, mq),
        ),
    ]
