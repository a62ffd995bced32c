"""Thought categories and the structured fields each one requires (SPEC 2.5, seeds/000 sections 2a, 2c).

The table below is the whole rule; :func:`category_validate` only applies it. Uncategorized
contributions (the seed brain's wire format) require nothing, so old callers keep working.

Choices where the seed is ambiguous, and why:

- ``state_snapshot``: 2a lists ``supersedes``, but the very first snapshot of a topic has nothing
  to supersede, and the seed's own lifecycle (3a) updates a snapshot by *refining* it, not by a new
  snapshot with ``supersedes``. Requiring it would force agents to invent ids or reject every first
  snapshot, so ``supersedes`` is optional here; retrieval orders a topic's snapshots newest
  ``temporal_scope`` first, which is what keeps the current state on top. 2c makes ``source_ref``
  mandatory for state snapshots, so it is required.
- ``decision_record``: 2a (topic, alternatives) plus ``source_ref`` from 2c and 4b ("Source
  reference: Yes").
- ``operational_learning``: only ``topic``; 2c says it "may omit source_ref if the learning is
  general", which wins over the 2a column.
- ``task_outcome`` and ``transition_marker``: ``source_ref`` (the task slug).
- ``correction``: everything 7b needs to supersede: topic, supersedes, corrected_fact, correct_fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.errors import ValidationFailed
from brain.choices import ThoughtCategory

REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    ThoughtCategory.STATE_SNAPSHOT: ("topic", "temporal_scope", "source_ref"),
    ThoughtCategory.DECISION_RECORD: ("topic", "alternatives_considered", "source_ref"),
    ThoughtCategory.OPERATIONAL_LEARNING: ("topic",),
    ThoughtCategory.TASK_OUTCOME: ("source_ref",),
    ThoughtCategory.CORRECTION: ("topic", "supersedes", "corrected_fact", "correct_fact"),
    ThoughtCategory.TRANSITION_MARKER: ("source_ref",),
    ThoughtCategory.UNCATEGORIZED: (),
}
"""Per category, the structured fields a contribution must carry (all others stay optional)."""

STRUCTURED_FIELDS: tuple[str, ...] = (
    "topic",
    "temporal_scope",
    "source_ref",
    "alternatives_considered",
    "corrected_fact",
    "correct_fact",
    "supersedes",
    "related_thoughts",
)
"""The structured fields of SPEC 2.1 accepted on the memory endpoint, in wire order."""


def _is_present(name: str, value: Any) -> bool:
    """A field counts as given when it carries something: blank strings and empty lists do not."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if name == "source_ref" and isinstance(value, Mapping):
        # {type, value, project}: without a value it points nowhere.
        ref = value.get("value")
        return isinstance(ref, str) and bool(ref.strip())
    if isinstance(value, (list, tuple, set, dict)):
        return bool(value)
    return True


def category_required_fields(category: str | None) -> tuple[str, ...]:
    """The required fields of ``category`` (None means uncategorized)."""
    key = category or ThoughtCategory.UNCATEGORIZED
    if key not in REQUIRED_FIELDS:
        allowed = ", ".join(REQUIRED_FIELDS)
        raise ValidationFailed(f"Unknown thought_category {key!r}. Use one of: {allowed}.")
    return REQUIRED_FIELDS[key]


def category_missing_fields(*, category: str | None, fields: Mapping[str, Any]) -> list[str]:
    """The required fields of ``category`` that ``fields`` lacks, in table order."""
    return [name for name in category_required_fields(category) if not _is_present(name, fields.get(name))]


def category_validate(*, category: str | None, fields: Mapping[str, Any]) -> None:
    """Refuse a categorized contribution that lacks its required fields (400 MISSING_CATEGORY_FIELDS).

    ``fields`` is the request's structured fields by wire name; the error lists every missing one
    at once, so an agent fixes its call in one round trip.
    """
    missing = category_missing_fields(category=category, fields=fields)
    if missing:
        raise ValidationFailed(
            f"thought_category {category!r} requires {', '.join(REQUIRED_FIELDS[category])}; "
            f"missing: {', '.join(missing)}.",
            code="MISSING_CATEGORY_FIELDS",
            extra={"missing": missing},
        )
