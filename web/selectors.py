"""Reads the humans' pages need that no domain app offers as such. Read-only, scoped to a space."""

from __future__ import annotations

from django.db.models import QuerySet

from brain.choices import ThoughtCategory
from brain.models import Thought
from core.models import Space

# Columns a list of thoughts shows; the 384-float embedding and the search vector stay in the database.
THOUGHT_LIST_FIELDS = (
    "id",
    "space_id",
    "content",
    "contributor_name",
    "created_at",
    "thought_category",
    "topic",
    "source_ref",
    "quality_flags",
    "superseded",
)


def marker_list_recent(*, space: Space, limit: int = 10) -> QuerySet[Thought]:
    """The newest transition markers of ``space``: what moved lately, newest first."""
    return (
        Thought.objects.filter(space=space, thought_category=ThoughtCategory.TRANSITION_MARKER)
        .only(*THOUGHT_LIST_FIELDS)
        .order_by("-created_at")[:limit]
    )
