"""The SQL of publishing to a topic (exchange/services/publishing.py; docs/exchange.md,
"Topics"). The remark of exchange/queries.py on statement_timestamp() holds here too."""

from exchange.traffic_queries import counted

# Whether adapter %(sender)s (of owner %(owner)s) may publish to topic %(topic)s: no row when it
# may not (or the topic does not exist: the same answer), else the topic's subscriptions, one row
# each, or a single row of NULLs when it has none.
SUBSCRIBERS = """
SELECT s.adapter_id, s.types
FROM exchange_topic t
LEFT JOIN exchange_subscription s ON s.topic_id = t.id
WHERE t.id = %(topic)s
  AND (t.owner_id = %(owner)s OR EXISTS (
      SELECT 1 FROM exchange_topicpublisher g WHERE g.topic_id = t.id AND g.adapter_id = %(sender)s
  ))
"""

# A publish: one statement for a batch of publications to one topic, atomic by itself, as
# queries.SEND is for messages. They arrive as one JSON array of {"id", "type", "payload",
# "headers", "to" (the subscribers that have a place in their queues), "refused"} with "key" and
# "hash" for a publication with an idempotency key. The keys are claimed first, as SEND claims
# them; a publication whose key was claimed, or that has none, is stored once, with its figures,
# and each of its subscribers gets a copy: a row of its own in exchange_message, with the
# publication's id instead of the payload. The copies take their places in the queues in the order
# given. The answer: the keys claimed. The subscribers' long polls and streams are notified when
# the statement commits.
PUBLISH = """
WITH incoming AS (
    SELECT (p ->> 'id')::uuid AS publication_id, p ->> 'type' AS type, p -> 'payload' AS payload,
           p -> 'headers' AS headers, p -> 'to' AS recipients, (p ->> 'refused')::int AS refused,
           p ->> 'key' AS key, p ->> 'hash' AS body_hash, position
    FROM jsonb_array_elements(%(publications)s::jsonb) WITH ORDINALITY AS published (p, position)
),
claimed AS (
    INSERT INTO exchange_idempotencykey (sender_id, key, message_id, body_hash, created_at)
    SELECT %(sender)s, key, publication_id, body_hash, statement_timestamp()
    FROM incoming
    WHERE key IS NOT NULL
    ORDER BY key
    ON CONFLICT (sender_id, key) DO NOTHING
    RETURNING key
),
kept AS (
    SELECT * FROM incoming WHERE key IS NULL OR key IN (SELECT key FROM claimed)
),
stored AS (
    INSERT INTO exchange_publication (
        publication_id, topic_id, sender_id, type, payload, headers, published_at, recipients,
        refused
    )
    SELECT publication_id, %(topic)s, %(sender)s, type, payload, headers, statement_timestamp(),
           jsonb_array_length(recipients), refused
    FROM kept
),
copies AS (
    INSERT INTO exchange_message (
        message_id, recipient_id, sender_id, type, headers, topic_id, publication_id,
        receive_count
    )
    SELECT gen_random_uuid(), r.recipient::bigint, %(sender)s, kept.type, kept.headers,
           %(topic)s, kept.publication_id, 0
    FROM kept CROSS JOIN LATERAL jsonb_array_elements_text(kept.recipients)
         WITH ORDINALITY AS r (recipient, n)
    ORDER BY kept.position, r.n
    RETURNING recipient_id
),
woken AS (
    SELECT pg_notify('exchange_message', recipient_id::text)
    FROM (SELECT DISTINCT recipient_id FROM copies) AS recipients
),"""
# A publication is sent once by its publisher, however many copies it queues.
PUBLISH += counted(
    "SELECT %(sender)s::bigint, 'sent', count(*) FROM kept",
    "SELECT %(sender)s::bigint, 'refused', sum(refused) FROM kept",
    "SELECT recipient_id, 'queued', count(*) FROM copies GROUP BY recipient_id",
)
PUBLISH += """
SELECT key FROM claimed
UNION ALL
SELECT NULL FROM woken
"""
