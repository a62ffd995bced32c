from django.db import migrations
from django.utils import timezone


def close_suggestions_of_superseded_statements(apps, schema_editor):
    """What brain.services.suggestions.suggestions_close_superseded does for a superseded statement,
    applied to the suggestions pending on a statement already superseded (by a correction, refinement,
    consolidation or import): status superseded, resolved by Colony (accepting one would store a
    statement that no longer stands as the correct fact)."""
    suggestion = apps.get_model("brain", "CorrectionSuggestion")
    suggestion.objects.filter(status="pending", contradicting_thought__superseded=True).update(
        status="superseded", resolved_at=timezone.now(), resolved_by="colony"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0018_content_key_confusables"),
    ]

    operations = [
        migrations.RunPython(close_suggestions_of_superseded_statements, migrations.RunPython.noop),
    ]
