"""(m)'s bytes written around a turn: the PostgreSQL server's WAL (pg_current_wal_lsn, and its
records by relation with pg_walinspect where the bench may use it), and the write_bytes in /proc of
PostgreSQL's processes and of RabbitMQ's beam.smp (readable as their user or root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil
import psycopg

from bench.throughput.machine import postgres_backends, postgres_background, rabbitmq_servers
from bench.throughput.servers import Server

# The WAL written in a turn, record by record (pg_walinspect, superuser only), by the relation of
# the bench database each record changes (its first block's), or its transaction's other records
# (commits) when that transaction changed one; a NULL relation is another database's.
WAL_RECORDS = """
WITH records AS (
    SELECT xid::text::bigint AS xid, record_length, fpi_length,
           substring(block_ref FROM ('rel [0-9]+/' || %(database)s || '/([0-9]+)'))::oid AS node
    FROM pg_get_wal_records_info(
        %(start)s::pg_lsn, least(%(end)s::pg_lsn, pg_current_wal_flush_lsn())
    )
),
writers AS (SELECT DISTINCT xid FROM records WHERE node IS NOT NULL AND xid <> 0)
SELECT CASE WHEN r.node IS NOT NULL THEN coalesce(c.relname, r.node::text)
            WHEN r.xid IN (SELECT xid FROM writers) THEN '(commits)' END,
       sum(r.record_length)::bigint, sum(r.fpi_length)::bigint
FROM records r LEFT JOIN pg_class c ON c.relfilenode = r.node
GROUP BY 1
"""


@dataclass
class Written:
    """Counters of the bytes the servers wrote, read before and after a turn."""

    wal_lsn: str  # pg_current_wal_lsn(): the whole PostgreSQL server's WAL
    pg_io: dict[int, int]  # write_bytes of the bench database's backends and the background
    beam_io: dict[int, int]  # write_bytes of RabbitMQ's beam.smp (readable as its user or root)


def io_written(processes: list[psutil.Process]) -> dict[int, int]:
    found = {}
    for process in processes:
        try:
            found[process.pid] = int(process.io_counters().write_bytes)
        except (psutil.Error, AttributeError):
            continue
    return found


def io_since(before: dict[int, int], after: dict[int, int]) -> int | None:
    """Bytes written since ``before`` by the processes read both times, or by new ones; None
    where none could be read (another user's process without root)."""
    if not after:
        return None
    return sum(value - before.get(pid, 0) for pid, value in after.items())


def written_now(conn: psycopg.Connection[Any], server: Server) -> Written:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    backends = postgres_backends(server.database)
    return Written(
        wal_lsn=str(row[0]) if row else "0/0",
        pg_io=io_written(backends + postgres_background(backends)),
        beam_io=io_written(rabbitmq_servers()),
    )


@dataclass(frozen=True)
class WalRecords:
    """A turn's WAL records: all their bytes (no page headers), and the bench database's by
    relation, (bytes, of them full-page images); "(commits)" for its transactions' others."""

    total: int
    relations: dict[str, tuple[int, int]]

    @property
    def ours(self) -> int:
        return sum(size for size, _ in self.relations.values())

    @property
    def fpi(self) -> int:
        return sum(fpi for _, fpi in self.relations.values())


def wal_records(conn: psycopg.Connection[Any], start: str, end: str) -> WalRecords | str:
    """The WAL's records between two LSNs, or why they could not be read."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        row = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        database = str((row.fetchone() or [0])[0])
        found = conn.execute(
            WAL_RECORDS, {"database": database, "start": start, "end": end}
        ).fetchall()
    except psycopg.Error as error:
        return f"pg_walinspect: {str(error).strip().splitlines()[0]}"
    relations = {str(name): (int(size), int(fpi)) for name, size, fpi in found if name}
    return WalRecords(total=sum(int(size) for _, size, _ in found), relations=relations)


@contextmanager
def wal_kept(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Keep the WAL from now until the block ends, in a temporary replication slot (dropped with
    the session, should the bench die): a checkpoint during a turn, the bench's or another
    database's, would otherwise recycle it before pg_walinspect reads it. Without the right to
    make a slot, nothing is kept."""
    slot = f"bench_m_{os.getpid()}"
    try:
        conn.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", [slot])
    except psycopg.Error:
        yield
        return
    try:
        yield
    finally:
        conn.execute("SELECT pg_drop_replication_slot(%s)", [slot])
