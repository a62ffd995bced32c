"""A session's owner as a row (quality.SessionOwner), one per session id of a space, so that two agents
reporting a new session's first turn at once can't both get it. Nothing is copied: a session without a
row is still owned by the agent that used it first (its earliest query-log row or turn), and that agent
is written as the owner when the session's next turn is logged."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0005_url_token"),
        ("quality", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="SessionOwner",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("session_id", models.CharField(max_length=100)),
                ("claimed_at", models.DateTimeField(auto_now_add=True)),
                (
                    "agent",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="core.agent"),
                ),
                (
                    "space",
                    models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="core.space"),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("space", "session_id"), name="sessionowner_unique_session")
                ],
            },
        ),
    ]
