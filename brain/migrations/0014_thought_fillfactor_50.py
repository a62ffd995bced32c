"""brain_thought keeps half of each page free for the new versions of its rows (fillfactor 50).

Every memory call's reinforcement rewrites the rows of what it returned (access_count,
pheromone_weight, last_accessed, accessed_by, co_retrieved_with: unindexed columns). A new version that
fits on its page is a HOT update: no index changes. One that doesn't is a new entry in every index of
the table, the HNSW graph's included (hundreds of buffers each), and a dead entry there until VACUUM.
Rows are ~1 kB on 8 kB pages; with half of each page left free by inserts, a fold, which rewrites
every thought a second's calls returned in one statement, finds room on the page for nearly all of its
updates (docs/performance.md, "PostgreSQL"). The price is a larger heap, not a larger TOAST table,
where the vectors and long texts are.

The setting applies to pages written from now on; ``VACUUM FULL brain_thought`` (an exclusive lock
while it runs) rewrites an existing table with it. Reversing the migration restores fillfactor 70,
the setting of migration 0005.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("brain", "0013_querylog_reinforced")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE brain_thought SET (fillfactor = 50)",
            "ALTER TABLE brain_thought SET (fillfactor = 70)",
        ),
    ]
