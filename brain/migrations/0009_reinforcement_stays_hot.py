"""Drop the index on access_count: every retrieval updates access_count, and an UPDATE that changes
an indexed column can't be HOT, so each reinforced row got a new entry in every index of
brain_thought, the HNSW graph included (~1 ms a row). Highways are now picked among the search's own
candidates (brain.selectors.activity.highways_among), which needs no index.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('brain', '0008_text_statistics'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='thought',
            name='thought_space_busy',
        ),
    ]
