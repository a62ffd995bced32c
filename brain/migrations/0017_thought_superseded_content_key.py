"""The superseded thoughts of a space by their text's key: a corrected thought sent again word for word is
flagged ``contradicts_correction`` (``brain.services.flags.contribution_checks``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('brain', '0016_thought_content_key'),
        ('core', '0005_url_token'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='thought',
            index=models.Index(models.F('space'), models.Func(models.F('content'), function='brain_content_key', output_field=models.CharField()), condition=models.Q(('superseded', True)), name='thought_space_superseded_key'),
        ),
    ]
