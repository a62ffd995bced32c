from django.db import migrations, models


def rollups_keyed_by_agent(apps, schema_editor):
    """Rows written before were keyed by the agent's name at the time: each goes to the agent of the space
    that bears that name now, if it already existed on the row's day (an agent created later, given a
    retired agent's name, is not charged with its record). Other rows (a deleted agent's, a renamed
    agent's from before its rename) stay keyed by their name. The hourly rollup rewrites the recent days
    (``quality.services.rollups.ROLLUP_RECOMPUTE_DAYS``) from the turn logs, by the turns' agents."""
    QualityRollup = apps.get_model("quality", "QualityRollup")
    Agent = apps.get_model("core", "Agent")
    for agent in Agent.objects.all().iterator():
        QualityRollup.objects.filter(
            space_id=agent.space_id,
            agent_name=agent.name,
            agent_id__isnull=True,
            day__gte=agent.created_at.date(),
        ).update(agent_id=agent.id)


def rollups_keyed_by_name(apps, schema_editor):
    """Back to one row per (day, space, name), as the constraint restored after this requires."""
    QualityRollup = apps.get_model("quality", "QualityRollup")
    # Two rows of one day for one name (an agent's and a deleted agent's of that name) can't both stay.
    QualityRollup.objects.filter(agent_id__isnull=False).exclude(
        pk__in=models.Subquery(
            QualityRollup.objects.filter(agent_id__isnull=False)
            .order_by("day", "space_id", "agent_name", "pk")
            .distinct("day", "space_id", "agent_name")
            .values("pk")
        )
    ).delete()
    QualityRollup.objects.filter(agent_id__isnull=True).exclude(agent_name="").filter(
        models.Exists(
            QualityRollup.objects.filter(
                day=models.OuterRef("day"),
                space_id=models.OuterRef("space_id"),
                agent_name=models.OuterRef("agent_name"),
                agent_id__isnull=False,
            )
        )
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0006_url_token_maker"),
        ("quality", "0003_confidence_change_agent"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="qualityrollup", name="rollup_unique_day_space_agent"),
        migrations.AddField(
            model_name="qualityrollup",
            name="agent_id",
            field=models.UUIDField(blank=True, help_text="The agent's id; null for the space's row.", null=True),
        ),
        migrations.RunPython(rollups_keyed_by_agent, rollups_keyed_by_name),
        migrations.AddConstraint(
            model_name="qualityrollup",
            constraint=models.UniqueConstraint(
                condition=models.Q(agent_id__isnull=False),
                fields=("day", "space", "agent_id"),
                name="rollup_unique_day_space_agent_id",
            ),
        ),
        migrations.AddConstraint(
            model_name="qualityrollup",
            constraint=models.UniqueConstraint(
                condition=models.Q(agent_id__isnull=True),
                fields=("day", "space", "agent_name"),
                name="rollup_unique_day_space_name",
            ),
        ),
    ]
