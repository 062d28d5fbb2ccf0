"""The SQL of traffic over time (exchange/models/traffic.py; docs/exchange.md, "Traffic over
time"): the counting every statement that moves messages carries, the points the owner reads and
the minutes' move to their hours. The remark of exchange/queries.py on statement_timestamp()
holds here too.
"""

# The counted columns of exchange_trafficminute and exchange_traffichour (exchange/models
# /traffic.py): the figures of the API's points and the queue's moves.
COUNTED = ("sent", "received", "acked", "dead_lettered", "refused", "queued", "dropped")
# A minute's rows per adapter: a statement writes the row of its connection's shard.
SHARDS = 8


def counted(*sources: str) -> str:
    """The common table expression ``counted``, for a statement that moves messages: it adds
    what the statement moved to its adapters' rows of this minute, in the same statement (no
    statement more on the hot path, and the count commits or rolls back with the move).

    Each source is a SELECT of (adapter id, counted column, how many) rows, over the statement's
    own expressions (``SELECT %(recipient)s::bigint, 'acked', count(*) FROM acked``). Rows of
    nothing are not written: a receive that finds nothing writes no row. The adapters' rows are
    locked in the order of their ids, so two statements that count for the same adapters wait
    for each other rather than deadlock.
    """
    columns = ", ".join(COUNTED)
    sums = ",\n           ".join(
        f"coalesce(sum(n) FILTER (WHERE counted = '{column}'), 0)" for column in COUNTED
    )
    added = ", ".join(f"{column} = t.{column} + EXCLUDED.{column}" for column in COUNTED)
    union = "\n        UNION ALL ".join(sources)
    # Only this module's constants and the statements' own SQL are put in, never a value.
    return f"""
counted AS (
    INSERT INTO exchange_trafficminute AS t (adapter_id, at, shard, {columns})
    SELECT adapter_id, date_trunc('minute', statement_timestamp()), mod(pg_backend_pid(), {SHARDS}),
           {sums}
    FROM (
        {union}
    ) AS moved (adapter_id, counted, n)
    WHERE n <> 0
    GROUP BY adapter_id
    ORDER BY adapter_id
    ON CONFLICT (adapter_id, at, shard) DO UPDATE SET {added}
)"""  # noqa: S608


# What is counted outside the statements that move messages: refusals (a send a full queue
# refused never reaches the database otherwise) and a webhook's test event.
ADD = "WITH " + counted("SELECT %(adapter)s::bigint, %(counted)s, %(n)s::bigint") + " SELECT 1"

# Adapters' points over a range (exchange.services.traffic.traffic_points): for each adapter,
# every step from the first to the one now, the minutes' figures summed per step (the hours' too
# for a step of an hour), and the queue's depth at each step's end: its depth now, less what came
# in and went out in the steps after (now, for the step now).
POINTS = """
WITH range AS (
    SELECT make_interval(secs => %(step)s) AS step,
           date_bin(make_interval(secs => %(step)s), statement_timestamp(), 'epoch') AS last
),
first AS (
    SELECT last - (%(steps)s - 1) * step AS at FROM range
),
steps AS (
    SELECT adapter_id, at
    FROM unnest(%(adapters)s::bigint[]) AS adapters (adapter_id),
         range, generate_series((SELECT at FROM first), last, step) AS at
),
kept AS (
    SELECT adapter_id, date_bin((SELECT step FROM range), at, 'epoch') AS at, {columns}
    FROM exchange_trafficminute
    WHERE adapter_id = ANY(%(adapters)s) AND at >= (SELECT at FROM first)
    UNION ALL
    SELECT adapter_id, at, {columns}
    FROM exchange_traffichour
    WHERE adapter_id = ANY(%(adapters)s) AND at >= (SELECT at FROM first) AND %(step)s >= 3600
),
summed AS (
    SELECT adapter_id, at, {sums} FROM kept GROUP BY adapter_id, at
),
depth AS (
    SELECT recipient_id AS adapter_id, count(*) AS now
    FROM exchange_message WHERE recipient_id = ANY(%(adapters)s)
    GROUP BY recipient_id
)
SELECT steps.adapter_id, steps.at,
       coalesce(sent, 0), coalesce(received, 0), coalesce(acked, 0),
       coalesce(dead_lettered, 0), coalesce(refused, 0),
       greatest(0, coalesce(depth.now, 0) - coalesce(sum(
           coalesce(queued, 0) - coalesce(acked, 0) - coalesce(dead_lettered, 0)
           - coalesce(dropped, 0)
       ) OVER (
           PARTITION BY steps.adapter_id ORDER BY steps.at DESC
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
       ), 0))::bigint
FROM steps
LEFT JOIN summed USING (adapter_id, at)
LEFT JOIN depth USING (adapter_id)
ORDER BY steps.adapter_id, steps.at
""".format(  # noqa: S608 (the columns' names, constants: never a value)
    columns=", ".join(COUNTED),
    # sum() of bigint is numeric: back to bigint, so the figures come as integers.
    sums=", ".join(f"sum({column})::bigint AS {column}" for column in COUNTED),
)

# One batch of minutes older than the cutoff, moved to their hours (added: an hour's minutes may
# move in several batches). The minutes' shards end here.
MINUTES_MOVE = """
WITH moved AS (
    DELETE FROM exchange_trafficminute
    WHERE (adapter_id, at, shard) IN (
        SELECT adapter_id, at, shard FROM exchange_trafficminute
        WHERE at < %(cutoff)s
        LIMIT %(batch)s
    )
    RETURNING *
),
added AS (
    INSERT INTO exchange_traffichour AS h (adapter_id, at, {columns})
    SELECT adapter_id, date_trunc('hour', at, 'UTC'), {sums}
    FROM moved
    GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (adapter_id, at) DO UPDATE SET {added}
)
SELECT 1 FROM moved
""".format(  # noqa: S608 (the columns' names, constants: never a value)
    columns=", ".join(COUNTED),
    sums=", ".join(f"sum({column})" for column in COUNTED),
    added=", ".join(f"{column} = h.{column} + EXCLUDED.{column}" for column in COUNTED),
)

HOURS_DROP = """
DELETE FROM exchange_traffichour
WHERE (adapter_id, at) IN (
    SELECT adapter_id, at FROM exchange_traffichour WHERE at < %(cutoff)s LIMIT %(batch)s
)
"""
