"""PostgreSQL crashes under a live exchange: how long requests take to fail while it is gone, and
how soon they succeed once it is back (docs/operations.md, "When PostgreSQL goes away").

    .venv/bin/python -m bench.outage [--runs 5] [--outage 5] [--after 5] [--stop kill|fast]

It starts a PostgreSQL of its own in a temporary folder (platform_site.embedded, as
tests/stack/conftest.py's StackDatabase does), migrates it, uses the Redis of REDIS_URL or a
redis-server of its own, and serves the platform with one gunicorn in the production shape
(bench.throughput.servers.server_start: deploy/gunicorn.conf.py, 2 workers x 8 threads). In this
process, plain httpx loops run the exchange the whole time, each thread on one keep-alive
connection and a device id of its own: senders (the sender adapter) send to the consumers in
turn, and each consumer adapter's receiver receives up to 10 messages and ACKs them. A loop waits
--pause (20 ms) after every send and after every failed or empty receive: it ignores Retry-After
on purpose, so that the delays measured are the server's and not a client's back-off. Another
thread asks /api/actuator/health every 0.1 s.

Each run SIGKILLs the postmaster (the pid in postmaster.pid), as the fault run did, waits until
its processes are gone, leaves PostgreSQL down for --outage seconds, starts it again (crash
recovery included), and keeps the loops running for --after seconds. It reports:

- during the outage (exchange requests started once the server's last process was gone, a few ms
  after the kill, and before PostgreSQL accepted connections again): how long the first one took,
  the median and the maximum of the others, and their answers (503 SERVICE_UNAVAILABLE with
  Retry-After expected);
- from the moment PostgreSQL accepts connections again (its postmaster.pid says "ready", read
  every 2 ms): when the first send answered 201, when the first ACK of a receive answered 200,
  when health said UP, and how many exchange requests failed after that moment.

At the end the senders stop, the receivers drain the queues, and the database is asked whether
every message sent with 201 was received and ACKed (it is in the delivery log) and whether anything
is left queued or dead-lettered. Exit status 0 when nothing was lost and every exchange request
during the outages answered 503, 1 otherwise. docs/operations.md has a run.
"""

from __future__ import annotations

DATABASE = "outage_bench"
BATCH = 10
LEASE_SECONDS = 30
HEALTH_EVERY = 0.1
SLOW_MS = 100
ACCEPT_POLL = 0.002
EXCHANGE = ("send", "receive", "ack")
# What the workers log when their view of the database changes.
AVAILABILITY_LOGGER = "platform_site.db.availability"
FLIPS = {"down": "PostgreSQL does not answer", "up": "PostgreSQL answers again"}
