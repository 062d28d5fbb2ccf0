from django.db import migrations

# A minute's row is updated by every statement that counts for its adapter and shard, thousands of
# times a minute on a busy one. Room left in each page keeps those updates heap-only (HOT): the new
# version goes on the same page and the primary key's index is not written again.
FILLFACTOR = "ALTER TABLE exchange_trafficminute SET (fillfactor = 50)"
FILLFACTOR_REVERSE = "ALTER TABLE exchange_trafficminute RESET (fillfactor)"


class Migration(migrations.Migration):
    dependencies = [("exchange", "0007_traffic")]

    operations = [migrations.RunSQL(FILLFACTOR, FILLFACTOR_REVERSE)]
