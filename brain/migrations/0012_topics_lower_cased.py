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
    for start in range(0, len(changed), 1000):
        batch = changed[start : start + 1000]
        rows = thought.objects.in_bulk([pk for pk, _ in batch])
        for pk, normal in batch:
            rows[pk].topic = normal
        thought.objects.bulk_update(rows.values(), ["topic"])


class Migration(migrations.Migration):

    dependencies = [
        ("brain", "0011_suggestion_status_superseded"),
    ]

    operations = [
        migrations.RunPython(lower_case_topics, migrations.RunPython.noop),
    ]
