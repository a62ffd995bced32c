"""One row per fact: ``brain_content_key(text)`` and the index of live thoughts by space and key.

The key is the md5 of the text NFKC-normalised, whitespace runs collapsed to one space, trimmed and
lower-cased. It is an SQL function so that the index, the memory call's lookup and its lock compute
it the same way (``brain.models.content_key``); building the index computes it for the rows already
stored. ``normalize`` needs a UTF8 database (PostgreSQL 13+).
"""

from django.db import migrations, models

CREATE_FUNCTION = r"""
CREATE FUNCTION brain_content_key(content text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN md5(lower(btrim(regexp_replace(normalize(content, NFKC), '\s+', ' ', 'g'))))
"""


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0015_import_receipt_per_agent"),
    ]

    operations = [
        migrations.RunSQL(CREATE_FUNCTION, "DROP FUNCTION brain_content_key(text)"),
        migrations.AddIndex(
            model_name="thought",
            index=models.Index(
                models.F("space"),
                models.Func(models.F("content"), function="brain_content_key", output_field=models.CharField()),
                condition=models.Q(superseded=False),
                name="thought_space_content_key",
            ),
        ),
    ]
