"""An adapter's traffic over time: what it sent, received, acknowledged, lost to its dead letters
and had refused, per minute and per hour (docs/exchange.md, "Traffic over time").

The statements that move messages count them here themselves, in the same statement
(exchange/traffic_queries.py): nothing is counted twice and nothing is left for a periodic task
to fill in. Its queue's depth is not stored: every move in and out of the queue is counted
(``queued``, and ``acked``, ``dead_lettered`` and ``dropped``), and the depth at the end of a
minute is today's depth less what came in and went out since.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class _Counted(models.Model):
    adapter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    at = models.DateTimeField()  # the start of the minute or hour, UTC
    # Messages the adapter sent (a publication once, however many subscribers got a copy).
    sent = models.BigIntegerField(default=0, db_default=0)
    # Deliveries to it: receives, stream events and webhook posts (a redelivery again).
    received = models.BigIntegerField(default=0, db_default=0)
    acked = models.BigIntegerField(default=0, db_default=0)  # its webhook's 2xx included
    dead_lettered = models.BigIntegerField(default=0, db_default=0)  # of its queue
    # Messages it sent that the recipient's full queue refused (QUEUE_FULL; a publication's
    # subscribers whose queues were full).
    refused = models.BigIntegerField(default=0, db_default=0)
    queued = models.BigIntegerField(default=0, db_default=0)  # into its queue, redrives too
    dropped = models.BigIntegerField(default=0, db_default=0)  # purged from its queue

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.adapter_id} at {self.at:%Y-%m-%d %H:%M}"


class TrafficMinute(_Counted):
    """A minute of an adapter's traffic, kept TRAFFIC_MINUTES_HOURS (then moved to its hour).

    A minute has a row per ``shard``: a statement adds to the row of its database connection's
    shard, so parallel sends to one busy adapter do not queue behind one row's lock."""

    pk = models.CompositePrimaryKey("adapter", "at", "shard")
    shard = models.SmallIntegerField()


class TrafficHour(_Counted):
    """An hour of an adapter's traffic: its minutes once they are older than
    TRAFFIC_MINUTES_HOURS, kept TRAFFIC_HOURS_DAYS."""

    pk = models.CompositePrimaryKey("adapter", "at")
