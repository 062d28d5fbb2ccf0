"""The SQL of webhook delivery (exchange/webhooks/delivery.py; docs/exchange.md, "Webhooks").

A message pushed to a webhook is leased like a received one, under the device key ``DELIVERER``
(no device key has that form: theirs are "d:..." or "f:..."): the lease covers its POST and is
the promise that no other delivery process posts it meanwhile. A process killed mid-request loses
nothing: the lease runs out and the message is claimed again. Attempts are counted in
``push_attempts``, not ``receive_count``: they have their own schedule and do not count toward
EXCHANGE_MAX_DELIVERIES.

The remark of exchange/queries.py on statement_timestamp() holds here too.
"""

from exchange.delivery_queries import delivery_json
from exchange.traffic_queries import counted

DELIVERER = "webhook"

# A claim is a transaction of two statements. The first locks the webhooks that have a message
# to push and whose circuit breaker lets them (SKIP LOCKED: another process claiming for one of
# them now is left to it), with what signing needs. The second, in a snapshot of its own that sees
# every claim committed before the lock was taken, counts what each endpoint has in flight and
# claims what its room allows, oldest first: EXCHANGE_WEBHOOK_CONCURRENCY, or one probe while its
# breaker is half-open. So two processes never together exceed an endpoint's room. The endpoints
# come in random order: when more have work than one claim serves, none waits behind the others.
CLAIM_WEBHOOKS = """
SELECT w.adapter_id, w.url, w.secret, w.previous_secret, w.previous_secret_until,
       w.consecutive_failures >= %(breaker)s
FROM exchange_webhook w
WHERE w.enabled
  AND (w.paused_until IS NULL OR w.paused_until <= statement_timestamp())
  AND w.adapter_id <> ALL(%(full)s::bigint[])
  AND EXISTS (
      SELECT 1 FROM exchange_message m
      WHERE m.recipient_id = w.adapter_id AND m.visible_at <= statement_timestamp()
  )
ORDER BY random()
LIMIT %(webhooks)s
FOR NO KEY UPDATE OF w SKIP LOCKED
"""

CLAIM_MESSAGES = """
WITH ready AS (
    SELECT r.adapter_id, r.room - (
        SELECT count(*) FROM exchange_message f
        WHERE f.recipient_id = r.adapter_id AND f.leased_by = %(deliverer)s
          AND f.lease_token IS NOT NULL AND f.visible_at > statement_timestamp()
    ) AS room
    FROM unnest(%(webhooks)s::bigint[], %(rooms)s::int[]) AS r(adapter_id, room)
),
picked AS (
    SELECT p.message_id
    FROM ready CROSS JOIN LATERAL (
        SELECT m.message_id FROM exchange_message m
        WHERE m.recipient_id = ready.adapter_id AND m.visible_at <= statement_timestamp()
        ORDER BY m.seq
        LIMIT greatest(ready.room, 0)
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS p
    LIMIT %(total)s
),
claimed AS (
    UPDATE exchange_message m
    SET visible_at = statement_timestamp() + make_interval(secs => %(lease)s),
        push_attempts = m.push_attempts + 1,
        lease_token = gen_random_uuid(),
        leased_by = %(deliverer)s
    WHERE m.message_id = ANY(ARRAY(SELECT message_id FROM picked))
    RETURNING m.seq, m.recipient_id, m.message_id, m.lease_token, m.push_attempts, """
CLAIM_MESSAGES += delivery_json(count="m.push_attempts")
CLAIM_MESSAGES += """ AS json
),"""
CLAIM_MESSAGES += counted(
    "SELECT recipient_id, 'received', count(*) FROM claimed GROUP BY recipient_id"
)
CLAIM_MESSAGES += """
SELECT recipient_id, message_id::text, lease_token::text, push_attempts, json
FROM claimed ORDER BY seq
"""

# The outcomes of attempts, settled together (one transaction, after HEALTH): a delivered
# message moves to the delivery log as an ACK moves it (whoever holds its lease now: an ACK is
# never lost); one that failed goes back to the queue after its retry delay, or to the dead
# letters as WEBHOOK_FAILED when its schedule ran out (both only under the lease it was posted
# with: a newer holder's delivery is not touched). Every attempt is written to the log.
SETTLE = """
WITH outcome AS (
    SELECT * FROM unnest(
        %(ids)s::uuid[], %(tokens)s::uuid[], %(delays)s::float8[], %(adapters)s::bigint[],
        %(attempts)s::int[], %(at)s::timestamptz[], %(statuses)s::int[], %(outcomes)s::text[],
        %(latencies)s::int[], %(errors)s::text[]
    ) AS o(message_id, lease_token, delay, adapter_id, attempt, at, status, outcome, latency,
           error)
),
acked AS (
    DELETE FROM exchange_message m USING outcome o
    WHERE m.message_id = o.message_id AND o.outcome = 'delivered'
    RETURNING m.*
),
logged AS (
    INSERT INTO exchange_delivery_log (
        message_id, recipient_id, sender_id, type, payload, headers, topic_id, publication_id,
        enqueued_at, first_received_at, receive_count, acked_at, acked_by
    )
    SELECT message_id, recipient_id, sender_id, type, payload, headers, topic_id,
           publication_id, enqueued_at, first_received_at, receive_count, statement_timestamp(),
           %(deliverer)s
    FROM acked
),
dead AS (
    DELETE FROM exchange_message m USING outcome o
    WHERE m.message_id = o.message_id AND m.lease_token = o.lease_token
      AND o.outcome <> 'delivered' AND o.delay < 0
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
           statement_timestamp(), 'WEBHOOK_FAILED', leased_by
    FROM dead
),
retried AS (
    UPDATE exchange_message m
    SET visible_at = statement_timestamp() + make_interval(secs => o.delay),
        lease_token = NULL, leased_by = NULL
    FROM outcome o
    WHERE m.message_id = o.message_id AND m.lease_token = o.lease_token
      AND o.outcome <> 'delivered' AND o.delay >= 0
),"""
SETTLE += counted(
    "SELECT recipient_id, 'acked', count(*) FROM acked GROUP BY recipient_id",
    "SELECT recipient_id, 'dead_lettered', count(*) FROM dead GROUP BY recipient_id",
)
SETTLE += """
INSERT INTO exchange_webhookattempt (
    adapter_id, message_id, attempt, at, status, outcome, latency_ms, error
)
SELECT adapter_id, message_id, attempt, at, status, outcome, latency, error
FROM outcome
-- a webhook deleted meanwhile took its log with it
WHERE EXISTS (SELECT 1 FROM exchange_webhook w WHERE w.adapter_id = outcome.adapter_id)
"""

# Each endpoint's health after a batch of its outcomes, in their order: whether one succeeded,
# the failures after the last success, whether one answered 410 Gone. Consecutive failures open
# the circuit breaker (paused_until: its pause doubles with every failed probe, up to the cap);
# a success closes it. A 410, or failures without a success for EXCHANGE_WEBHOOK_DISABLE_AFTER_DAYS,
# disable the webhook; the answer names the ones disabled now (their owners are told).
HEALTH = """
WITH outcome AS (
    SELECT * FROM unnest(%(adapters)s::bigint[], %(succeeded)s::bool[], %(failures)s::int[],
                         %(gone)s::bool[]) AS o(adapter_id, succeeded, failures, gone)
),
health AS (
    SELECT w.adapter_id, w.enabled AS was_enabled, o.gone,
           CASE WHEN o.succeeded THEN o.failures
                ELSE w.consecutive_failures + o.failures END AS failures,
           CASE WHEN o.failures = 0 THEN NULL
                WHEN o.succeeded THEN statement_timestamp()
                ELSE coalesce(w.failing_since, statement_timestamp()) END AS failing_since
    FROM exchange_webhook w JOIN outcome o USING (adapter_id)
    -- An endpoint that only succeeds, as most do, is neither locked nor written.
    WHERE o.failures > 0 OR o.gone OR w.consecutive_failures > 0 OR w.failing_since IS NOT NULL
       OR w.paused_until IS NOT NULL
    ORDER BY w.adapter_id
    FOR NO KEY UPDATE OF w
),
judged AS (
    SELECT health.*,
           CASE WHEN health.gone THEN 'GONE'
                WHEN health.failing_since <= statement_timestamp()
                     - make_interval(days => %(disable_days)s) THEN 'FAILING' END AS disabling
    FROM health
)
UPDATE exchange_webhook w
SET consecutive_failures = j.failures,
    failing_since = j.failing_since,
    paused_until = CASE WHEN j.failures >= %(breaker)s THEN statement_timestamp() + make_interval(
        secs => least(%(pause)s * power(2, least(j.failures - %(breaker)s, 16)), %(max_pause)s)
    ) END,
    enabled = w.enabled AND j.disabling IS NULL,
    disabled_reason = CASE WHEN w.enabled AND j.disabling IS NOT NULL THEN j.disabling
                           ELSE w.disabled_reason END
FROM judged j
WHERE w.adapter_id = j.adapter_id
RETURNING w.adapter_id, CASE WHEN j.was_enabled AND j.disabling IS NOT NULL THEN j.disabling END
"""

# The webhooks that may have something to push: a process wakes for their recipients' messages.
ENABLED = "SELECT adapter_id FROM exchange_webhook WHERE enabled"
