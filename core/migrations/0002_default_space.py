from django.db import migrations


def create_default_space(apps, schema_editor):
    Space = apps.get_model("core", "Space")
    Space.objects.get_or_create(slug="default", defaults={"name": "Default space"})


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial")]
    operations = [migrations.RunPython(create_default_space, migrations.RunPython.noop)]
