"""Reads the humans' pages need that no domain app offers as such. Read-only, scoped to a space."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from django.db.models import Count, F, Max, QuerySet, Sum, TextField, Value, Window
from django.db.models.functions import Cast, Coalesce, Concat, RowNumber
from django.utils import timezone

from api.paging import Newest, newest
from brain.choices import SuggestionStatus, ThoughtCategory
from brain.models import CorrectionSuggestion, Thought, thought_defer_bulky
from core.models import Agent, Space
from quality import formulas
from quality.models import QualityRollup, TurnItem
from quality.selectors import metric_values
from quality.services.rollups import COUNT_FIELDS
from tasks.models import Project, Task, TransitionLog
from tasks.selectors import IN_FLIGHT_STATUSES, with_dna_diff_shown
from web.board import blocked_reason_shown

#: Rows of one kind a page lists at most, newest first (agents can add rows without end: links,
#: suggestions, corrections, a task's transitions); the rest are counted.
PAGE_LIST_MAX = 50


# Columns a list of thoughts shows; the 384-float embedding and the search vector stay in the database.
THOUGHT_LIST_FIELDS = (
    "id",
    "space_id",
    "content",
    "contributor_name",
    "agent_id",
    "created_at",
    "thought_category",
    "topic",
    "source_ref",
    "quality_flags",
    "superseded",
)


def _listed(rows: QuerySet[Thought], *extra: str) -> QuerySet[Thought]:
    """The columns a list of thoughts shows, with each one's agent's name now (``Thought.contributor``)."""
    return rows.only(*THOUGHT_LIST_FIELDS, *extra).annotate(agent_name=F("agent__name"))


def project_list_for_filter(*, space: Space, limit: int, selected: str = "") -> tuple[list[Project], int]:
    """The projects a filter offers, by slug: at most ``limit`` of ``space``'s, those with the latest task
    change first (any agent may create projects, so there can be thousands), plus the one ``selected``
    names when it exists (a filter the URL chose); and how many projects the space has."""
    projects = Project.objects.filter(space=space)
    offered = list(
        projects.annotate(last_change=Max("tasks__updated_at")).order_by(
            F("last_change").desc(nulls_last=True), "slug"
        )[:limit]
    )
    if len(offered) < limit:  # all of them: no other project to count or to look up
        return sorted(offered, key=lambda project: project.slug), len(offered)
    if selected and all(project.slug != selected for project in offered):
        offered += list(projects.filter(slug=selected))
    return sorted(offered, key=lambda project: project.slug), projects.count()


def marker_list_recent(*, space: Space, limit: int = 10) -> QuerySet[Thought]:
    """The newest transition markers of ``space``: what moved lately, newest first."""
    return _listed(Thought.objects.filter(space=space, thought_category=ThoughtCategory.TRANSITION_MARKER)).order_by(
        "-created_at"
    )[:limit]


def thought_list_by_ids(*, space: Space, ids) -> list[Thought]:
    """Thoughts of ``space`` among ``ids`` (another space's ids are simply not found), oldest first."""
    if not ids:
        return []
    return list(_listed(Thought.objects.filter(space=space, id__in=list(ids))).order_by("created_at"))


def thought_corrections_of(*, space: Space, thought: Thought) -> Newest:
    """The corrections that supersede ``thought``, newest first (``superseded_by`` keeps only one)."""
    return newest(
        _listed(
            Thought.objects.filter(
                space=space, thought_category=ThoughtCategory.CORRECTION, supersedes__contains=[thought.id]
            ),
            "correct_fact",
        ).order_by("-created_at", "-id"),
        PAGE_LIST_MAX,
    )


def thought_related_of(*, space: Space, thought: Thought) -> Newest:
    """The thoughts linked to ``thought`` as related, newest first; links are followed within the space only:
    a link to another space's thought shows nothing of it."""
    return newest(
        thought.related_thoughts.filter(space=space)
        .only("id", "content", "thought_category", "superseded")
        .order_by("-created_at", "-id"),
        PAGE_LIST_MAX,
    )


def topic_list(*, space: Space, limit: int = 200) -> list[str]:
    """The topics used in ``space``, for the explorer's topic filter."""
    return list(
        Thought.objects.filter(space=space)
        .exclude(topic="")
        .order_by("topic")
        .values_list("topic", flat=True)
        .distinct()[:limit]
    )


def suggestion_list_for_thought(*, thought: Thought) -> Newest:
    return newest(
        CorrectionSuggestion.objects.filter(thought=thought, status=SuggestionStatus.PENDING)
        .select_related("agent")
        .order_by("-created_at", "-id"),
        PAGE_LIST_MAX,
    )


#: The dashboard's pending suggestions hold at most this many of one raising agent's (its newest), so
#: one agent's twenty contradicting notes can't push every teammate's suggestion off the list.
PENDING_SHOWN_PER_AGENT = 5


def suggestion_list_pending(*, space: Space, limit: int = 20) -> list[CorrectionSuggestion]:
    """The newest pending suggestions of ``space``, at most :data:`PENDING_SHOWN_PER_AGENT` of one agent's."""
    newest_of_each = (
        CorrectionSuggestion.objects.filter(space=space, status=SuggestionStatus.PENDING)
        .annotate(nth=Window(RowNumber(), partition_by=[F("agent_id")], order_by=[F("created_at").desc(), "id"]))
        .filter(nth__lte=PENDING_SHOWN_PER_AGENT)
    )
    return list(
        newest_of_each.select_related("thought")
        .only("id", "statement", "created_at", "thought_id", "thought__id", "thought__content")
        .order_by("-created_at")[:limit]
    )


# --- tasks ----------------------------------------------------------------------------------------
def transition_history(*, task: Task) -> Newest:
    """The transitions of ``task``, newest first, with who did it and the confirmation it consumed."""
    return newest(
        with_dna_diff_shown(TransitionLog.objects.filter(task=task))
        .select_related("agent", "user", "confirmation__user", "marker")
        .defer(*thought_defer_bulky("marker"))
        .order_by("-created_at", "-id"),
        PAGE_LIST_MAX,
    )


def task_list_in_flight(*, space: Space, limit: int = 20) -> QuerySet[Task]:
    """Tasks someone is working on or that are stuck (active, blocked), most recently changed first."""
    return (
        Task.objects.filter(space=space, status__in=IN_FLIGHT_STATUSES)
        .select_related("project")
        .only("id", "slug", "title", "status", "role", "type", "status_changed_at", "project__slug")
        .annotate(blocked_reason=blocked_reason_shown())
        .order_by("-status_changed_at")[:limit]
    )


# --- quality --------------------------------------------------------------------------------------
def agent_names_with_quality(*, space: Space) -> list[str]:
    """Agents of ``space`` (for the dashboard's agent filter)."""
    return list(Agent.objects.filter(space=space).order_by("name").values_list("name", flat=True))


def quality_per_agent(*, space: Space, now=None) -> list[dict]:
    """Each agent's rates over the current rolling window, from the rollups: an agent is its identity
    (``agent_id``: a renamed agent is one row, under its name now; a deleted agent's rows stay apart from a
    newcomer given its name), rows whose agent was gone before they were written by the name they carry."""
    today = (now or timezone.now()).date()
    first = today - dt.timedelta(days=formulas.WINDOW_DAYS - 1)
    rows = list(
        QualityRollup.objects.filter(space=space, day__gte=first, day__lte=today)
        .exclude(agent_name="")
        .annotate(
            who=Coalesce(
                Cast("agent_id", TextField()),
                Concat(Value("name:"), "agent_name", output_field=TextField()),
                output_field=TextField(),
            )
        )
        .values("who")
        .annotate(written_as=Max("agent_name"), **{f: Sum(f) for f in COUNT_FIELDS})
    )
    ids = [row["who"] for row in rows if not row["who"].startswith("name:")]
    names = {str(pk): name for pk, name in Agent.objects.filter(pk__in=ids).values_list("pk", "name")}
    agents = sorted(((names.get(row["who"], row["written_as"]), row) for row in rows), key=lambda pair: pair[0])
    return [
        {"agent": name, "rates": metric_values(Counter({f: row[f] or 0 for f in COUNT_FIELDS}))} for name, row in agents
    ]


def thought_list_most_contradicted(*, space: Space, days: int = 30, limit: int = 10) -> list[Thought]:
    """Thoughts of ``space`` most often contradicted when injected in turns of the last ``days`` days.

    Each thought carries ``times_contradicted``; ties go to the higher contradiction EMA.
    """
    since = timezone.now() - dt.timedelta(days=days)
    counts = dict(
        TurnItem.objects.filter(turn__space=space, turn__created_at__gte=since, contradicted=True)
        .values("thought_id")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("thought_id", "n")[: limit * 3]
    )
    thoughts = list(_listed(Thought.objects.filter(space=space, id__in=counts), "contradiction_score"))
    for thought in thoughts:
        thought.times_contradicted = counts[thought.id]
    thoughts.sort(key=lambda t: (-t.times_contradicted, -(t.contradiction_score or 0.0), str(t.id)))
    return thoughts[:limit]
