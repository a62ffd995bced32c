"""Reads the humans' pages need that no domain app offers as such. Read-only, scoped to a space."""

from __future__ import annotations

from django.db.models import QuerySet

from brain.choices import ThoughtCategory
from brain.models import Thought
from core.models import Space
from tasks.models import HumanConfirmation, Task, TransitionLog
from tasks.selectors import IN_FLIGHT_STATUSES

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


# --- tasks ----------------------------------------------------------------------------------------
def transition_history(*, task: Task) -> QuerySet[TransitionLog]:
    """Every transition of ``task``, newest first, with who did it and the confirmation it consumed."""
    return (
        TransitionLog.objects.filter(task=task)
        .select_related("agent", "user", "confirmation__user", "marker")
        .defer("marker__embedding", "marker__corrected_fact_embedding", "marker__search_vector")
        .order_by("-created_at", "-id")
    )


def confirmation_list_open(*, task: Task) -> QuerySet[HumanConfirmation]:
    """Confirmations given for the state ``task`` is in now and not yet used by a transition."""
    return (
        HumanConfirmation.objects.filter(
            task=task,
            from_status=task.status,
            consumed_at__isnull=True,
            confirmed_at__gte=task.status_changed_at,
        )
        .select_related("user")
        .order_by("confirmed_at")
    )


def task_list_in_flight(*, space: Space, limit: int = 20) -> QuerySet[Task]:
    """Tasks someone is working on or that are stuck (active, blocked), most recently changed first."""
    return (
        Task.objects.filter(space=space, status__in=IN_FLIGHT_STATUSES)
        .select_related("project")
        .only("id", "slug", "title", "status", "role", "type", "dna", "status_changed_at", "project__slug")
        .order_by("-status_changed_at")[:limit]
    )
