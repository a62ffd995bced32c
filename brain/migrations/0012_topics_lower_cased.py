from django.db import migrations


def lower_case_topics(apps, schema_editor):
    """Topics are stored as brain.choices.topic_normal gives them from now on (trimmed, lower-cased, so
    that a filter matches whatever case a topic was written in); the ones stored before are rewritten
    once. In Python, not SQL: PostgreSQL's lower() leaves non-ASCII letters alone under the C locale."""
    thought = apps.get_model("brain", "Thought")
    changed = []
    for pk, topic in thought.objects.exclude(topic="").values_list("pk", "topic").iterator(chunk_size=5000):
        normal = topic.strip().lower()
        if normal != topic:
            changed.append((pk, normal))
    thought.objects.bulk_update([thought(pk=pk, topic=normal) for pk, normal in changed], ["topic"], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ("brain", "0011_suggestion_status_superseded"),
    ]

    operations = [
        migrations.RunPython(lower_case_topics, migrations.RunPython.noop),
    ]
