"""brain_thought keeps half of each page free for the new versions of its rows (fillfactor 50, was 70).

Every memory call's reinforcement rewrites the rows of what it returned (access_count,
pheromone_weight, last_accessed, accessed_by, co_retrieved_with: unindexed columns). A new version that
fits on its page is a HOT update: no index changes. One that doesn't is a new entry in every index of
the table, the HNSW graph's included (hundreds of buffers each), and a dead entry there until VACUUM. With 70,
a page held five rows of ~1 kB and room for two new versions until the page is pruned; a fold, which
rewrites every thought a second's calls returned in one statement, found no room for 4-14% of its
updates. Measured on bench-compare's 10,000-thought database (docs/performance.md, "Forty-sixth
session"): ``python -m benchmarks.reinforcement_fold --sizes 75 --rounds 10 --fillfactors 70,60,50``
(a copy rewritten at each setting, ten folds of 75 logged calls): fillfactor 70 96.3% of the updates
HOT, 45.3 ms a fold; 60 99.2%, 39.1 ms; 50 99.9%, 37.7 ms. Over a fresh bench-compare run and a reused
one (``--skip-mem0``, two rounds each way): 86.5% HOT at 70 (1,069 updates a run needing a new page),
98.2% at 50 (146). The heap grows from 11 to 14-17 MB at 10,000 thoughts (the vectors and long texts
are in the TOAST table, which doesn't change).

The setting applies to pages written from now on; ``VACUUM FULL brain_thought`` (an exclusive lock
while it runs) rewrites an existing table with it.
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
