"""``Thought.accessed_by`` names its agents by id: a renamed agent is one agent (highways count distinct
agents, and one agent renamed once must not make a highway of its own traffic).

Each name of a thought's ``accessed_by`` that is the name of an agent of the thought's space now becomes
that agent's id (as text), in place; a name no agent of the space has now (an agent deleted or renamed
before this migration, an import's history) stays as it is. Reversing it gives each id the agent's
name now. Every thought with accesses is rewritten once (its row's other columns unchanged).
"""

from django.db import migrations

_MAPPED = """
UPDATE brain_thought t SET accessed_by = ARRAY(
    SELECT m.entry FROM (
        SELECT COALESCE({mapped}, x.entry)::varchar AS entry, x.ord
        FROM unnest(t.accessed_by) WITH ORDINALITY AS x(entry, ord)
        LEFT JOIN core_agent a ON a.space_id = t.space_id AND {match}
    ) AS m
    GROUP BY m.entry ORDER BY min(m.ord))
WHERE cardinality(t.accessed_by) > 0
  AND EXISTS (
      SELECT 1 FROM unnest(t.accessed_by) AS x(entry)
      JOIN core_agent a ON a.space_id = t.space_id AND {match})
"""
NAMES_TO_IDS = _MAPPED.format(mapped="a.id::text", match="a.name = x.entry")
IDS_TO_NAMES = _MAPPED.format(mapped="a.name", match="a.id::text = x.entry")


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0019_close_suggestions_of_superseded_statements"),
        ("core", "0006_url_token_maker"),
    ]

    operations = [migrations.RunSQL(NAMES_TO_IDS, IDS_TO_NAMES)]
