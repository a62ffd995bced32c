"""Receipts of imports sent with an Idempotency-Key (brain.services.receipts): a batch sent again with
its key is answered from its receipt instead of stored twice."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('brain', '0009_reinforcement_stays_hot'),
        ('core', '0005_url_token'),
    ]

    operations = [
        migrations.CreateModel(
            name='ImportReceipt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(help_text="The client's Idempotency-Key.", max_length=255)),
                ('fingerprint', models.CharField(help_text="sha256 of the request's media type and body.", max_length=64)),
                ('status_code', models.PositiveSmallIntegerField()),
                ('response', models.JSONField(help_text='The response body, as first sent.')),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('space', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='core.space')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('space', 'key'), name='importreceipt_space_key')],
            },
        ),
    ]
