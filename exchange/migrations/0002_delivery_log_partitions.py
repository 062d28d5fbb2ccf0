"""The day-partitioned delivery log, and autovacuum settings for the hot queue table."""

from django.db import migrations

CREATE_LOG = """
CREATE TABLE exchange_delivery_log (
    message_id uuid NOT NULL,
    recipient_id bigint NOT NULL,
    sender_id bigint,
    type varchar(128) NOT NULL,
    payload jsonb NOT NULL,
    headers jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL,
    first_received_at timestamptz,
    receive_count integer NOT NULL,
    acked_at timestamptz NOT NULL DEFAULT now(),
    acked_by varchar(160),
    PRIMARY KEY (message_id, acked_at)
) PARTITION BY RANGE (acked_at);
CREATE INDEX exchange_delivery_log_recipient_idx ON exchange_delivery_log (recipient_id, acked_at);
"""

# The queue table churns (every ACK deletes a row): vacuum it on an absolute number of dead
# rows instead of a share of the table, and without cost-based pauses.
TUNE_QUEUE = """
ALTER TABLE exchange_message SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.02
);
"""


def create_partitions(apps, schema_editor):
    from exchange.services.history import delivery_log_partitions_maintain

    delivery_log_partitions_maintain()


class Migration(migrations.Migration):
    dependencies = [("exchange", "0001_initial")]

    operations = [
        migrations.RunSQL(CREATE_LOG, "DROP TABLE exchange_delivery_log"),
        migrations.RunSQL(TUNE_QUEUE, migrations.RunSQL.noop),
        migrations.RunPython(create_partitions, migrations.RunPython.noop),
    ]
