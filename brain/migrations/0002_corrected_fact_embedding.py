import pgvector.django.vector
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("brain", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="thought",
            name="corrected_fact_embedding",
            field=pgvector.django.vector.VectorField(blank=True, dimensions=384, null=True),
        ),
    ]
