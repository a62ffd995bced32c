"""Idempotency keys are per agent: a receipt names the agent whose key it is.

Receipts are a 24-hour cache of answers; the ones kept so far name no agent, so they are dropped.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0014_thought_fillfactor_50"),
    ]

    operations = [
        migrations.RunSQL("DELETE FROM brain_importreceipt", migrations.RunSQL.noop),
        migrations.RemoveConstraint(model_name="importreceipt", name="importreceipt_space_key"),
        migrations.AddField(
            model_name="importreceipt",
            name="agent",
            field=models.ForeignKey(
                help_text="Keys are per agent: whose key it is.",
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="core.agent",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="importreceipt",
            name="agent",
            field=models.ForeignKey(
                help_text="Keys are per agent: whose key it is.",
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="core.agent",
            ),
        ),
        migrations.AddConstraint(
            model_name="importreceipt",
            constraint=models.UniqueConstraint(fields=["space", "agent", "key"], name="importreceipt_space_agent_key"),
        ),
    ]
