"""The brain marker of a transition: ``TASK {from}→{to}: {ROLE} {slug} ({project}) — {summary}``."""

from __future__ import annotations

import uuid

from api.text import one_line, storable
from brain.choices import ThoughtCategory
from brain.models import Thought
from brain.services.pipeline import thought_schedule_followups
from brain.services.thoughts import thought_create
from tasks.models import Task
from tasks.services.actors import Actor
from tasks.workflow import MCI


def marker_content(*, from_status: str, to_status: str, actor: Actor, task: Task, summary: str) -> str:
    """The marker's one line; the summary's line breaks and control characters become spaces, so a
    summary can't add a line that reads as another marker to the audit trail, nor feedback
    (``api.text.storable``: a summary from the web or the CLI too)."""
    said = one_line(storable(summary))
    return f"TASK {from_status}→{to_status}: {actor.kind.upper()} {task.slug} ({task.project.slug}) — {said}"


def marker_write(
    *,
    task: Task,
    actor: Actor,
    content: str,
    rule_key: str,
    from_status: str,
    to_status: str,
    contribution_id: uuid.UUID | None = None,
) -> Thought:
    """The brain marker of a transition. Its embedding is computed by Celery after the commit. A hand-off's
    marker names the contribution it was given on (``memory_contribution_id``): the memory gate reads it
    there, so no other hand-off is given on the same thought (``tasks.services.gates``)."""
    contributor_id, contributor_name = actor.contributor
    evidence = {MCI: str(contribution_id)} if contribution_id is not None else {}
    marker = thought_create(
        space=task.space,
        content=content,
        contributor_id=contributor_id,
        contributor_name=contributor_name,
        agent=actor.agent,
        thought_category=ThoughtCategory.TRANSITION_MARKER,
        source_ref={"type": "task", "value": task.slug, "project": task.project.slug},
        topic=task.slug,
        context_metadata={
            "task_id": str(task.id),
            "rule": rule_key,
            "from": from_status,
            "to": to_status,
            "actor": actor.kind,
            **evidence,
        },
    )
    thought_schedule_followups(thought=marker)
    return marker
