"""The hourly decay records the clock hour each thought was stepped for (``Thought.decayed_at``), so a
retried or redelivered run steps each thought at most once per hour. A nullable column without a
default: adding it rewrites no row (null = not stepped yet)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0021_suggestion_withdrawn"),
    ]

    operations = [
        migrations.AddField(
            model_name="thought",
            name="decayed_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="Start of the clock hour whose decay step this thought took (one step per hour at most).",
                null=True,
            ),
        ),
    ]
