"""The database cache table the per-token throttle uses when Redis is not the broker (core/throttling.py).

Same shape as ``manage.py createcachetable`` creates, written out so that it exists whatever cache
the settings pick at migrate time.
"""

from django.db import migrations

CREATE = """
CREATE TABLE IF NOT EXISTS colony_cache (
    cache_key varchar(255) NOT NULL PRIMARY KEY,
    value text NOT NULL,
    expires timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS colony_cache_expires ON colony_cache (expires);
"""


class Migration(migrations.Migration):
    dependencies = [("core", "0003_worker_heartbeat")]

    operations = [migrations.RunSQL(CREATE, reverse_sql="DROP TABLE IF EXISTS colony_cache;")]
