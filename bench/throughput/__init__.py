"""The exchange benchmark: one run, one table.

    .venv/bin/python -m bench.throughput [--quick] [--only abcdefghijklm] [--duration S] ...

It builds a database of its own (``exchange_bench``, or ``--database``'s name: on the server of
DATABASE_URL when that is set, on the embedded PostgreSQL otherwise; dropped and created anew on
every run), uses the Redis
of REDIS_URL or starts a redis-server of its own (production runs with Redis: the cache, the
rate-limit counters and the session revisions), starts the platform's server on a free loopback
port as deploy/serve does (gunicorn with deploy/gunicorn.conf.py: 2 processes, each an event loop
with 8 threads for Django), and measures with 8 concurrent clients the figures (a) to (f) of
``figures``: the HTTP API against the database's own ceiling on the same machine, long-poll
latency, authentication's cost against a bare Django view, and receive latency against queue
depth; (k), 2,000 adapters waiting in long polls at once (``waiting``). Then (g) and (h) of
``comparison``: sending only, and
sending, receiving and acknowledging at once, the API beside the machine's RabbitMQ
(RABBITMQ_URL) doing the same work, in turns. Then the push stream's figures of
``stream_figures``: (i) one-at-a-time handlers on streams with the adapters' client against
RabbitMQ's basic_consume, on queues filled before each turn; (j) a stream's latency at a low rate
beside RabbitMQ's and (d)'s, and a logout's end of a stream; (k) again with 2,000 streams open.
Then (l) of ``webhook_figures``: webhooks, the deliverer in the server's processes pushing to a
receiver on loopback, beside the streams: delivered messages a second against (i), send ->
endpoint latency against (j), and a fast endpoint alone and beside one that answers after 5 s.
Then (m) of ``topic_figures``: topics, one publisher and 10, then 100, subscribers, beside a
RabbitMQ fanout exchange bound to as many durable queues: publications and delivered copies a
second, and the bytes written per publication.

HTTP load comes from wrk (C, one connection per thread) with a Lua script that ACKs what each
receive returned, so the client takes little of the machine's CPU; the latency figures (d, f) come
from a small Python client. (g) and (h) drive both sides with Python processes, http.client and
py-amqp, since the AMQP side has no wrk. docs/performance.md has the latest run and what limits
each figure.

Modules: ``servers`` (the database, Redis, gunicorn and the signed-in adapters, which the other
bench scripts use too), ``machine`` (CPU accounting, waiting for a quiet machine), ``load`` (the
raw psycopg loops and wrk), ``latency`` (the Python clients of (d) and (f)), ``waiting`` ((k)'s
thousands of waiting consumers), ``figures`` (each
figure measured into a row), ``flow`` (the producer and consumer processes of (g) and (h)),
``api`` and ``rabbitmq`` (their loops on each side), ``comparison`` ((g) and (h) into rows),
``events`` (a stream's events read off the wire), ``stream_handlers`` ((i)'s workers on each
side), ``stream_latency`` ((j)), ``streams_held`` ((k)'s thousands of streams),
``stream_figures`` ((i), (j) and (k)'s streams into rows), ``webhook_receiver`` ((l)'s
endpoints), ``webhook_runs`` ((l)'s turns against them), ``webhook_figures`` ((l) into rows),
``topic_runs`` ((m)'s turns and the API's side of them), ``topic_rabbitmq`` (RabbitMQ's side),
``topic_written`` (the bytes each side wrote), ``topic_figures`` ((m) into rows),
``profiling`` (py-spy, ``--profile``), ``report`` (the table).
"""
