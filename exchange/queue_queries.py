"""The SQL over whole queues: their figures (STATS, TOTALS, DEPTHS) and their upkeep (REDRIVE,
PURGE, EXPIRE, DEAD_LETTERS_DROP). The per-message statements of the hot path are
exchange/queries.py, whose remark on statement_timestamp() holds here too.
tests/exchange/test_messages_api.py pins the figures and the redrive through the API,
tests/exchange/test_bounded_queues.py the depth, purge and trim statements.
"""

from exchange.traffic_queries import counted

# Queue figures per recipient. The oldest message is the first in the queue index, so its age
# costs one index probe rather than a scan of enqueued_at (pgmq#170).
STATS = """
SELECT r.id,
       count(m.message_id) FILTER (WHERE m.visible_at <= statement_timestamp()),
       count(m.message_id) FILTER (WHERE m.lease_token IS NOT NULL
                             AND m.visible_at > statement_timestamp()),
       count(m.message_id) FILTER (WHERE m.lease_token IS NULL
                             AND m.visible_at > statement_timestamp()),
       (SELECT count(*) FROM exchange_deadletter d WHERE d.recipient_id = r.id),
       (SELECT extract(epoch FROM statement_timestamp() - o.enqueued_at) FROM exchange_message o
         WHERE o.recipient_id = r.id ORDER BY o.seq LIMIT 1)
FROM unnest(%(recipients)s::bigint[]) AS r(id)
LEFT JOIN exchange_message m ON m.recipient_id = r.id
GROUP BY r.id
"""

# The same figures over the whole platform, for the Prometheus scrape.
TOTALS = """
SELECT count(*) FILTER (WHERE visible_at <= statement_timestamp()),
       count(*) FILTER (WHERE lease_token IS NOT NULL AND visible_at > statement_timestamp()),
       count(*) FILTER (WHERE lease_token IS NULL AND visible_at > statement_timestamp()),
       (SELECT count(*) FROM exchange_deadletter),
       extract(epoch FROM statement_timestamp() - min(enqueued_at))
FROM exchange_message
"""

# Dead letters back to the queue with a fresh delivery budget (the owner's redrive).
REDRIVE = """
WITH revived AS (
    DELETE FROM exchange_deadletter
    WHERE recipient_id = ANY(%(recipients)s) AND message_id = ANY(%(ids)s)
    RETURNING message_id, recipient_id, sender_id, type, payload, headers, topic_id,
              publication_id, enqueued_at
),
requeued AS (
    INSERT INTO exchange_message (
        message_id, recipient_id, sender_id, type, payload, headers, topic_id, publication_id,
        enqueued_at, visible_at, receive_count
    )
    SELECT message_id, recipient_id, sender_id, type, payload, headers, topic_id,
           publication_id, enqueued_at, statement_timestamp(), 0
    FROM revived
    RETURNING message_id, recipient_id
),"""
REDRIVE += counted("SELECT recipient_id, 'queued', count(*) FROM requeued GROUP BY recipient_id")
REDRIVE += """
SELECT message_id, recipient_id FROM requeued
"""

# Bounded queues (exchange/services/queues.py). The depth of each recipient's queue, counted no
# further than the limit: a full queue costs at most that many index entries, once per
# DEPTH_SECONDS (the count is cached and kept up to date by sends in between).
DEPTHS = """
SELECT recipient, (
    SELECT count(*) FROM (
        SELECT 1 FROM exchange_message WHERE recipient_id = recipient LIMIT %(limit)s
    ) AS queued
)
FROM unnest(%(recipients)s::bigint[]) AS recipient
"""

# One batch of a purge: the recipient's messages, leased or not. A row that a receive or an ACK
# holds at this instant is skipped: it is being delivered or acknowledged.
PURGE = """
WITH purged AS (
    DELETE FROM exchange_message
    WHERE message_id IN (
        SELECT message_id FROM exchange_message
        WHERE recipient_id = %(recipient)s
        LIMIT %(batch)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
),"""
PURGE += counted("SELECT %(recipient)s::bigint, 'dropped', count(*) FROM purged")
PURGE += """
SELECT 1 FROM purged
"""

# One batch of messages enqueued before the cutoff and not leased now, to the dead letters as
# EXPIRED. No index covers enqueued_at (every send would pay for one): a scan of the hot table,
# which holds only what is undelivered, every few minutes.
EXPIRE = """
WITH expired AS (
    DELETE FROM exchange_message m
    WHERE m.message_id IN (
        SELECT message_id FROM exchange_message
        WHERE enqueued_at < %(cutoff)s
          AND (lease_token IS NULL OR visible_at <= statement_timestamp())
        LIMIT %(batch)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING m.*
),
buried AS (
    INSERT INTO exchange_deadletter (
        message_id, recipient_id, sender_id, type, payload, headers, topic_id, publication_id,
        enqueued_at, first_received_at, receive_count, dead_at, reason, last_device
    )
    SELECT message_id, recipient_id, sender_id, type,
           coalesce(payload, (SELECT p.payload FROM exchange_publication p
                              WHERE p.publication_id = expired.publication_id)),
           headers,
           topic_id, publication_id, enqueued_at, first_received_at, receive_count,
           statement_timestamp(), 'EXPIRED', leased_by
    FROM expired
),"""
EXPIRE += counted(
    "SELECT recipient_id, 'dead_lettered', count(*) FROM expired GROUP BY recipient_id"
)
EXPIRE += """
SELECT 1 FROM expired
"""

# One batch of dead letters older than the cutoff, dropped (exchange_dead_age_idx).
DEAD_LETTERS_DROP = """
DELETE FROM exchange_deadletter
WHERE id IN (
    SELECT id FROM exchange_deadletter WHERE dead_at < %(cutoff)s ORDER BY dead_at LIMIT %(batch)s
)
"""

# One batch of publications no copy waits for any more, a day after they were published (the
# life of their Idempotency-Key, whose replay answers with their figures). No index covers the
# copies' publication_id (every copy would pay for one): the anti-join scans the hot table, as
# EXPIRE does, once per batch.
PUBLICATIONS_DROP = """
DELETE FROM exchange_publication
WHERE publication_id IN (
    SELECT publication_id FROM exchange_publication p
    WHERE published_at < %(cutoff)s
      AND NOT EXISTS (SELECT 1 FROM exchange_message m WHERE m.publication_id = p.publication_id)
    ORDER BY published_at
    LIMIT %(batch)s
)
"""
