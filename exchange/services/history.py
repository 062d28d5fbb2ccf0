"""The delivery log's day partitions: created ahead of time, dropped whole when they expire.

Dropping a partition deletes nothing row by row, so history costs the hot path no dead tuples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

PARENT = "exchange_delivery_log"
DAYS_AHEAD = 7
_PARTITION = re.compile(rf"^{PARENT}_(\d{{8}})$")


@dataclass(frozen=True)
class PartitionChanges:
    created: list[str]
    dropped: list[str]


def _name(day: date) -> str:
    return f"{PARENT}_{day:%Y%m%d}"


def delivery_log_partitions_maintain(*, today: date | None = None) -> PartitionChanges:
    """Make sure today's and the next DAYS_AHEAD days' partitions exist; drop the expired ones.

    A partition holds the ACKs of one UTC day and is dropped once its whole day is older than
    EXCHANGE_HISTORY_DAYS. Safe to run any number of times, from any number of workers.
    """
    today = today or timezone.now().date()
    created: list[str] = []
    dropped: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
            [PARENT],
        )
        existing = {row[0] for row in cursor.fetchall()}
        for offset in range(DAYS_AHEAD + 1):
            day = today + timedelta(days=offset)
            name = _name(day)
            if name in existing:
                continue
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {PARENT} "
                "FOR VALUES FROM (%s) TO (%s)",
                [
                    f"{day.isoformat()} 00:00:00+00",
                    f"{(day + timedelta(days=1)).isoformat()} 00:00:00+00",
                ],
            )
            created.append(name)
        oldest_kept = today - timedelta(days=settings.EXCHANGE_HISTORY_DAYS)
        for name in sorted(existing):
            match = _PARTITION.match(name)
            if match and datetime.strptime(match.group(1), "%Y%m%d").date() < oldest_kept:  # noqa: DTZ007
                cursor.execute(f"DROP TABLE IF EXISTS {name}")
                dropped.append(name)
    return PartitionChanges(created=created, dropped=dropped)
