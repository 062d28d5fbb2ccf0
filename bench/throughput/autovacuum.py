"""A stand-in for autovacuum on the hot queue table, for a server that runs with it off.

This machine's PostgreSQL has ``autovacuum = off`` (machine.py prints it). Production's has it on,
and migration exchange.0002 tells it to vacuum ``exchange_message`` after 1,000 dead rows, without
cost pauses: a queue table's claims slow down with its dead rows (docs/exchange.md, "Keeping the
hot table small"). Without it, a turn of (m) leaves every subscriber's receives walking the dead
versions of all it acknowledged, which measures the machine's setting, not the platform. While a
turn runs, this thread does what autovacuum would: VACUUM the table once it has more dead rows
than its threshold. The VACUUM runs in a backend of the server, so its CPU counts in PostgreSQL's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import psycopg

TABLE = "exchange_message"
LOOK_SECONDS = 0.2
DEAD_ROWS = """
SELECT s.n_dead_tup,
       coalesce((SELECT split_part(option, '=', 2)::int FROM unnest(c.reloptions) AS option
                 WHERE option LIKE 'autovacuum_vacuum_threshold=%%'), 50)
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.relname = %s
"""


@contextlib.contextmanager
def autovacuum_stand_in(database_url: str) -> Iterator[list[int]]:
    """While the block runs, vacuum the hot table as autovacuum would, when the server's own is
    off; the list yields how many times it did (nothing when the server's autovacuum is on)."""
    vacuums: list[int] = [0]
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
        if row is not None and row[0] == "on":
            yield vacuums
            return
        stop = threading.Event()

        def vacuum() -> None:
            while not stop.wait(LOOK_SECONDS):
                dead = conn.execute(DEAD_ROWS, [TABLE]).fetchone()
                if dead is not None and dead[0] > dead[1]:
                    conn.execute(f"VACUUM {TABLE}")
                    vacuums[0] += 1

        thread = threading.Thread(target=vacuum, name="autovacuum-stand-in", daemon=True)
        thread.start()
        try:
            yield vacuums
        finally:
            stop.set()
            thread.join()
