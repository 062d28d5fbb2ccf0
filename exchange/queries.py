"""The exchange's hot-path SQL, one statement per operation (docs/exchange.md, "Decisions"); the
statements over whole queues (figures, redrive, purge, expiry) are exchange/queue_queries.py.

Times are statement_timestamp(), the clock Django's Now() (the columns' defaults) uses: now()
would be the start of an enclosing transaction, which stands still.

Receive and ACK each run as a single autocommit statement: one round trip, no transaction held
across Python code, and row locks taken with SKIP LOCKED so parallel consumers never wait on
each other. An ACK that also receives sends ACK and RECEIVE together, one transaction in one
round trip (services.messages.messages_ack_receive). Tests pin what each statement does:
tests/exchange/test_messages_api.py through the API (receive, redelivery, dead letters, ACK,
nack, lease), tests/exchange/test_long_poll.py with parallel consumers.
"""

from exchange.delivery_queries import delivery_json
from exchange.traffic_queries import counted

# Claim up to %(max)s messages for one consumer instance. A message this instance already holds
# (received, not acknowledged) comes back in queue order even inside its lease: a consumer whose
# ACK failed gets it on its very next receive, not after the lease (docs/exchange.md, "Receiving
# and leases"). Messages past EXCHANGE_MAX_DELIVERIES move to the dead letters in the same
# statement instead of being delivered again.
#
# Each delivery comes back as its JSON, written out by PostgreSQL in the compact form every answer
# of the API has (json_build_object would write '"messageId" : ...'): a batch of 100 costs Python
# no timestamp parsing and no re-encoding of payloads. Headers and payload are jsonb's text. The
# receipt handle is base64url(message_id || lease_token), as services.leases.receipt_parse
# reads it. The rows come in queue order (RETURNING has none) with the id as text: Python sorts
# nothing and builds no UUIDs. The JSON's members are exchange/delivery_queries.py's.

_DELIVERY_JSON = delivery_json()

# The claim shared by RECEIVE and STREAM_RECEIVE, after their own ``picked`` (the messages to
# deliver, locked). The picked ids are taken as an array, looked up by the primary key: joined to
# ``picked`` instead, the planner guesses its size, and where it cannot know the LIMIT (a stream's
# credits are computed in the statement) it guessed a tenth of the table and scanned all of it,
# twice per claim (32 ms against 2.3 ms with 60,000 messages queued).
_CLAIM_HEAD = """
dead AS (
    DELETE FROM exchange_message m
    WHERE m.message_id = ANY(ARRAY(SELECT message_id FROM picked))
      AND m.receive_count >= %(max_deliveries)s
    RETURNING m.*
),
buried AS (
    INSERT INTO exchange_deadletter (
        message_id, recipient_id, sender_id, type, payload, headers, topic_id, publication_id,
        enqueued_at, first_received_at, receive_count, dead_at, reason, last_device
    )
    SELECT message_id, recipient_id, sender_id, type,
           coalesce(payload, (SELECT p.payload FROM exchange_publication p
                              WHERE p.publication_id = dead.publication_id)),
           headers,
           topic_id, publication_id, enqueued_at, first_received_at, receive_count,
           statement_timestamp(), 'MAX_DELIVERIES', leased_by
    FROM dead
),
claimed AS (
    UPDATE exchange_message m
    SET visible_at = statement_timestamp() + make_interval(secs => %(lease)s),
        receive_count = m.receive_count + 1,
        first_received_at = coalesce(m.first_received_at, statement_timestamp()),
        lease_token = gen_random_uuid(),
        leased_by = %(device)s
    WHERE m.message_id = ANY(ARRAY(SELECT message_id FROM picked))
      AND m.receive_count < %(max_deliveries)s
    RETURNING m.seq, m.message_id, m.receive_count, """
_CLAIM_TAIL = """ AS json
),"""
_CLAIM_COUNTED = counted(
    "SELECT %(recipient)s::bigint, 'received', count(*) FROM claimed",
    "SELECT %(recipient)s::bigint, 'dead_lettered', count(*) FROM dead",
)
_CLAIM = _CLAIM_HEAD + _DELIVERY_JSON + _CLAIM_TAIL + _CLAIM_COUNTED + "\n"

# While the device's push stream is open (exchange_stream), or the recipient's webhook is enabled
# (exchange_webhook: its messages are pushed), a receive claims nothing and its last row is
# (NULL, NULL, the refusal's code): the view answers 409 STREAM_OPEN or WEBHOOK_ACTIVE.
_RECEIVE_PICKED = """
WITH streaming AS (
    SELECT 1 FROM exchange_stream
    WHERE recipient_id = %(recipient)s AND device_key = %(device)s
      AND expires_at > statement_timestamp()
),
pushed AS (
    SELECT 1 FROM exchange_webhook WHERE adapter_id = %(recipient)s AND enabled
),
picked AS (
    SELECT message_id FROM exchange_message
    WHERE recipient_id = %(recipient)s
      AND (visible_at <= statement_timestamp()
           OR (lease_token IS NOT NULL AND leased_by = %(device)s))
      AND NOT EXISTS (SELECT 1 FROM streaming) AND NOT EXISTS (SELECT 1 FROM pushed)
    ORDER BY seq
    LIMIT %(max)s
    FOR NO KEY UPDATE SKIP LOCKED
),"""
_RECEIVE_ANSWER = """
(SELECT message_id::text, receive_count, json FROM claimed ORDER BY seq)
UNION ALL
(SELECT NULL::text, NULL::integer, 'WEBHOOK_ACTIVE' FROM pushed
 UNION ALL
 SELECT NULL, NULL, 'STREAM_OPEN' FROM streaming
 LIMIT 1)
"""
RECEIVE = _RECEIVE_PICKED + _CLAIM + _RECEIVE_ANSWER

# A push stream's claim (exchange/streams.py): as many messages as its credits allow, i.e.
# %(max)s (maxOutstanding) less those leased to the device and not yet settled, and only while the
# stream still owns its exchange_stream row (a newer stream of the device took it over: nothing)
# and the recipient has no webhook enabled (its messages are pushed there: nothing). Its first
# claim is a receive's: what the device holds comes back first, and counts as new. The last row
# is (NULL, outstanding before this claim, or -1 when the row is gone, or -2 when a webhook is
# enabled, seconds until the earliest of those leases runs out).
_STREAM_PICKED = """
WITH fence AS (
    SELECT count(*) AS owned,
           (SELECT count(*) FROM exchange_webhook
            WHERE adapter_id = %(recipient)s AND enabled) AS pushed
    FROM exchange_stream WHERE stream_id = %(stream)s
),
held AS (
    SELECT count(*) AS outstanding,
           extract(epoch FROM min(visible_at) - statement_timestamp()) AS next_expiry
    FROM exchange_message
    WHERE recipient_id = %(recipient)s AND leased_by = %(device)s AND lease_token IS NOT NULL
      AND visible_at > statement_timestamp()
),
picked AS (
    SELECT message_id FROM exchange_message
    WHERE recipient_id = %(recipient)s
      AND (visible_at <= statement_timestamp()
           OR (%(first)s AND lease_token IS NOT NULL AND leased_by = %(device)s))
      AND (SELECT owned > 0 AND pushed = 0 FROM fence)
    ORDER BY seq
    LIMIT greatest(
        %(max)s - CASE WHEN %(first)s THEN 0 ELSE (SELECT outstanding FROM held) END, 0
    )
    FOR NO KEY UPDATE SKIP LOCKED
),"""
_STREAM_ANSWER = """
(SELECT message_id::text, receive_count, json FROM claimed ORDER BY seq)
UNION ALL
SELECT NULL,
       CASE WHEN fence.pushed > 0 THEN -2 WHEN fence.owned > 0 THEN held.outstanding ELSE -1 END,
       coalesce(held.next_expiry::text, '')
FROM fence, held
"""
STREAM_RECEIVE = _STREAM_PICKED + _CLAIM + _STREAM_ANSWER

# Claimed messages a stream does not deliver after all (its session ended as they were claimed):
# back in the queue at once, with the delivery they did not get uncounted (in the traffic too).
STREAM_GIVE_BACK = """
WITH given AS (
    UPDATE exchange_message
    SET visible_at = statement_timestamp(), lease_token = NULL, leased_by = NULL,
        receive_count = receive_count - 1
    WHERE recipient_id = %(recipient)s AND leased_by = %(device)s
      AND message_id = ANY(string_to_array(%(ids)s, ',')::uuid[])
    RETURNING 1
),"""
STREAM_GIVE_BACK += counted("SELECT %(recipient)s::bigint, 'received', -count(*) FROM given")
STREAM_GIVE_BACK += """
SELECT count(*) FROM given
"""

# A stream opens: it takes the device's row over (the stream that had it ends: REPLACED) and the
# recipient's streams are told to look (the 'x' notification: exchange/wakeups.py).
STREAM_OPEN = """
WITH opened AS (
    INSERT INTO exchange_stream (stream_id, recipient_id, device_key, opened_at, expires_at)
    VALUES (%(stream)s, %(recipient)s, %(device)s, statement_timestamp(),
            statement_timestamp() + make_interval(secs => %(ttl)s))
    ON CONFLICT (recipient_id, device_key) DO UPDATE
    SET stream_id = EXCLUDED.stream_id, opened_at = EXCLUDED.opened_at,
        expires_at = EXCLUDED.expires_at
    RETURNING recipient_id
)
SELECT pg_notify('exchange_message', 'x' || recipient_id) FROM opened
"""

STREAM_CLOSE = "DELETE FROM exchange_stream WHERE stream_id = %(stream)s"

# The streams a server process holds are still open: their rows live on. The answer: the
# recipients among theirs with a message available now, which may have become so without a
# notification (a release's delay ran out, another device's lease ran out).
STREAMS_HELD = """
WITH held AS (
    UPDATE exchange_stream
    SET expires_at = statement_timestamp() + make_interval(secs => %(ttl)s)
    WHERE stream_id = ANY(%(streams)s::uuid[])
    RETURNING recipient_id
)
SELECT DISTINCT held.recipient_id FROM held
WHERE EXISTS (
    SELECT 1 FROM exchange_message m
    WHERE m.recipient_id = held.recipient_id AND m.visible_at <= statement_timestamp()
)
"""

# Delete the recipient's messages and log them, whoever holds their lease (an ACK is never lost
# to a lease that ran out). Foreign ids match nothing, exactly like unknown ones. The ids come as
# one comma-separated text and go back as text: a batch of 100 costs Python no UUID objects. When
# the recipient has a push stream open, the streams of the devices that held the messages are told
# that credits came free (the 's' notification, exchange/wakeups.py; a row (NULL) each in the
# answer); nobody else is.
ACK = """
WITH acked AS (
    DELETE FROM exchange_message
    WHERE recipient_id = %(recipient)s AND message_id = ANY(string_to_array(%(ids)s, ',')::uuid[])
    RETURNING message_id, recipient_id, sender_id, type, payload, headers, topic_id,
              publication_id, enqueued_at, first_received_at, receive_count, leased_by
),
logged AS (
    INSERT INTO exchange_delivery_log (
        message_id, recipient_id, sender_id, type, payload, headers, topic_id, publication_id,
        enqueued_at, first_received_at, receive_count, acked_at, acked_by
    )
    SELECT message_id, recipient_id, sender_id, type, payload, headers, topic_id,
           publication_id, enqueued_at, first_received_at, receive_count, statement_timestamp(),
           %(device)s
    FROM acked
    RETURNING message_id
),
settled AS (
    SELECT pg_notify('exchange_message', 's' || %(recipient)s || ':' || leased_by)
    FROM (SELECT DISTINCT leased_by FROM acked WHERE leased_by IS NOT NULL) AS holders
    WHERE EXISTS (SELECT 1 FROM exchange_stream WHERE recipient_id = %(recipient)s)
),"""
ACK += counted("SELECT %(recipient)s::bigint, 'acked', count(*) FROM acked")
ACK += """
SELECT message_id::text FROM logged
UNION ALL
SELECT NULL FROM settled
"""

# Why an id was not acknowledged now: acknowledged before, dead-lettered, or not the caller's.
ACK_LOOKUP = """
SELECT message_id::text, 'alreadyAcked' FROM exchange_delivery_log
WHERE recipient_id = %(recipient)s AND message_id = ANY(string_to_array(%(ids)s, ',')::uuid[])
UNION ALL
SELECT message_id::text, 'deadLettered' FROM exchange_deadletter
WHERE recipient_id = %(recipient)s AND message_id = ANY(string_to_array(%(ids)s, ',')::uuid[])
"""

# Release (nack) or extend leases, but only while the receipt's lease token is still the
# message's: a holder whose lease was taken over cannot touch the new holder's delivery. A release
# wakes the recipient's long polls and streams (a row (NULL) in the answer): the message may be
# theirs now, and a stream has a credit back.
RELEASE = """
WITH released AS (
    UPDATE exchange_message m
    SET visible_at = statement_timestamp() + make_interval(secs => %(delay)s),
        lease_token = NULL,
        leased_by = NULL
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS receipt(message_id, lease_token)
    WHERE m.recipient_id = %(recipient)s
      AND m.message_id = receipt.message_id AND m.lease_token = receipt.lease_token
    RETURNING m.message_id
),
woken AS (
    SELECT pg_notify('exchange_message', %(recipient)s::text)
    WHERE EXISTS (SELECT 1 FROM released)
)
SELECT message_id FROM released
UNION ALL
SELECT NULL FROM woken
"""

EXTEND = """
UPDATE exchange_message m
SET visible_at = statement_timestamp() + make_interval(secs => %(lease)s)
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS receipt(message_id, lease_token)
WHERE m.recipient_id = %(recipient)s
  AND m.message_id = receipt.message_id AND m.lease_token = receipt.lease_token
RETURNING m.message_id, m.visible_at
"""

HELD = """
SELECT message_id FROM exchange_message
WHERE recipient_id = %(recipient)s AND message_id = ANY(%(ids)s)
"""

# Which of the recipients (ids joined by commas) the sender may send to: adapters of its own
# owner, and adapters whose owner granted the sender a route (exchange.selectors).
REACHABLE = """
SELECT id FROM accounts_user AS recipient
WHERE id = ANY(string_to_array(%(recipients)s, ',')::bigint[])
  AND kind = 'ADAPTER'
  AND (owner_id = %(owner)s OR EXISTS (
      SELECT 1 FROM exchange_route
      WHERE exchange_route.recipient_id = recipient.id AND sender_id = %(sender)s
  ))
"""

# A send: one statement for any number of messages (a batch of up to 100, or one), atomic by itself
# (exchange/services/sending.py). They arrive as one JSON array of {"id", "to", "type",
# "payload", "headers"} with "key" and "hash" for a message with an idempotency key: services
# .messages writes each payload out anyway to measure it, and one text parameter costs less than
# arrays of 100. The keys are claimed first (in the keys' order, so two batches that share keys
# wait on each other rather than deadlock; a key another transaction holds makes this one wait
# until that commits, then DO NOTHING, or rolls back, then it is claimed here). Only messages
# without a key or whose key was claimed are inserted, in the order given, so each recipient's
# messages take their seq, their place in the queue, in that order. The answer: the keys claimed.
# The long polls of the recipients are notified when the statement commits.
SEND = """
WITH incoming AS (
    SELECT (message ->> 'id')::uuid AS message_id, (message ->> 'to')::bigint AS recipient_id,
           message ->> 'type' AS type, message -> 'payload' AS payload,
           message -> 'headers' AS headers, message ->> 'key' AS key,
           message ->> 'hash' AS body_hash, position
    FROM jsonb_array_elements(%(messages)s::jsonb) WITH ORDINALITY AS sent (message, position)
),
claimed AS (
    INSERT INTO exchange_idempotencykey (sender_id, key, message_id, body_hash, created_at)
    SELECT %(sender)s, key, message_id, body_hash, statement_timestamp()
    FROM incoming
    WHERE key IS NOT NULL
    ORDER BY key
    ON CONFLICT (sender_id, key) DO NOTHING
    RETURNING key
),
queued AS (
    INSERT INTO exchange_message (
        message_id, recipient_id, sender_id, type, payload, headers, receive_count
    )
    SELECT message_id, recipient_id, %(sender)s, type, payload, headers, 0
    FROM incoming
    WHERE key IS NULL OR key IN (SELECT key FROM claimed)
    ORDER BY position
    RETURNING recipient_id
),
woken AS (
    SELECT pg_notify('exchange_message', recipient_id::text)
    FROM (SELECT DISTINCT recipient_id FROM queued) AS recipients
),"""
SEND += counted(
    "SELECT %(sender)s::bigint, 'sent', count(*) FROM queued",
    "SELECT recipient_id, 'queued', count(*) FROM queued GROUP BY recipient_id",
)
SEND += """
SELECT key FROM claimed
UNION ALL
SELECT NULL FROM woken
"""

# Wakes the long polls waiting for these recipients (exchange/wakeups.py) when the transaction
# commits (a redrive's; a send notifies in its own statement).
NOTIFY_CHANNEL = "exchange_message"
NOTIFY = """
SELECT pg_notify('exchange_message', recipient::text)
FROM unnest(%(recipients)s::bigint[]) AS recipient
"""
