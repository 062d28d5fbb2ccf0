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

# An adapter's points over a range (exchange.selectors.traffic_points): every step from the
# first to the one now, the minutes' figures summed per step (the hours' too for a step of an
# hour), and the queue's depth at each step's end: its depth now, less what came in and went out
# in the steps after (now, for the step now).
POINTS = """
WITH range AS (
    SELECT make_interval(secs => %(step)s) AS step,
           date_bin(make_interval(secs => %(step)s), statement_timestamp(), 'epoch') AS last
),
steps AS (
    SELECT at FROM range, generate_series(last - (%(steps)s - 1) * step, last, step) AS at
),
kept AS (
    SELECT date_bin((SELECT step FROM range), at, 'epoch') AS at, {columns}
    FROM exchange_trafficminute
    WHERE adapter_id = %(adapter)s AND at >= (SELECT min(at) FROM steps)
    UNION ALL
    SELECT at, {columns}
    FROM exchange_traffichour
    WHERE adapter_id = %(adapter)s AND at >= (SELECT min(at) FROM steps) AND %(step)s >= 3600
),
summed AS (
    SELECT at, {sums} FROM kept GROUP BY at
),
depth AS (
    SELECT count(*) AS now FROM exchange_message WHERE recipient_id = %(adapter)s
)
SELECT steps.at,
       coalesce(sent, 0), coalesce(received, 0), coalesce(acked, 0),
       coalesce(dead_lettered, 0), coalesce(refused, 0),
       greatest(0, (SELECT now FROM depth) - coalesce(sum(
           coalesce(queued, 0) - coalesce(acked, 0) - coalesce(dead_lettered, 0)
           - coalesce(dropped, 0)
       ) OVER (ORDER BY steps.at DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))
FROM steps LEFT JOIN summed USING (at)
ORDER BY steps.at
""".format(  # noqa: S608 (the columns' names, constants: never a value)
    columns=", ".join(COUNTED),
    sums=", ".join(f"sum({column}) AS {column}" for column in COUNTED),
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
