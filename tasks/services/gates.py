"""The memory gates (seeds/003), verified against the brain, not trusted.

A ``memory_query_session`` must be a session in which the acting agent queried the brain after the
task entered its current state, a ``memory_contribution_id`` a thought the agent contributed since
then (markers don't count) that no other hand-off was given on: the marker of a hand-off names its
contribution (``context_metadata[memory_contribution_id]``), and one contribution records what was
learned in one task. :func:`~tasks.services.evaluation.task_transition_evaluate` calls them for a
rule that requires those DNA keys.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from brain.choices import IMPORTED_KEY, QualityFlag, ThoughtCategory
from brain.models import Thought
from brain.selectors.activity import agent_session_query_times, thought_contribution_get
from tasks.models import Task
from tasks.services.actors import Actor
from tasks.workflow import MCI, MQS


class Refusals(Protocol):
    def refuse(self, code: str, message: str, status: int = 409) -> None: ...


def _when(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def memory_query_check(ev: Refusals, *, task: Task, actor: Actor, value) -> None:
    since = task.status_changed_at
    if actor.agent is None:
        ev.refuse("MEMORY_NOT_VERIFIED", f"{MQS} can only be verified for an agent's own brain queries.")
        return
    session = str(value)
    queried, latest = agent_session_query_times(space_id=task.space_id, agent=actor.agent, session_id=session)
    if queried and latest >= since:
        return
    if queried:
        ev.refuse(
            "MEMORY_NOT_VERIFIED",
            f"{MQS} {session!r}: your queries in that session were made before this task entered "
            f"'{task.status}' ({_when(since)}). Query the brain again (POST /api/v1/memory) and put the new "
            f"trace.session_id into DNA.",
        )
    else:
        ev.refuse(
            "MEMORY_NOT_VERIFIED",
            f"{MQS} {session!r} is not a session in which {actor.name} queried the brain. Query the brain "
            "(POST /api/v1/memory) about this task and put trace.session_id into DNA.",
        )


def _handed_off_on(*, space_id: int, thought: Thought) -> str | None:
    """The slug of a task whose hand-off marker names ``thought`` as its contribution, or None. Only the
    markers written since the thought are read (a hand-off comes after its contribution)."""
    marker = (
        Thought.objects.filter(
            space_id=space_id,
            thought_category=ThoughtCategory.TRANSITION_MARKER,
            created_at__gte=thought.created_at,
            context_metadata__contains={MCI: str(thought.id)},
        )
        .values_list("source_ref")
        .first()
    )
    if marker is None:
        return None
    return str((marker[0] or {}).get("value") or "another task")


def memory_contribution_check(ev: Refusals, *, task: Task, actor: Actor, value, lock: bool = False) -> uuid.UUID | None:
    """Refuse ``value`` unless it is a contribution that opens this task's hand-off; returns its id when
    it does. ``lock`` (inside the transition's transaction): the thought's row is locked before it is
    looked for among the hand-offs, so of two hand-offs on it at once the second waits and sees the first."""
    since = task.status_changed_at
    if actor.agent is None:
        ev.refuse("MEMORY_NOT_VERIFIED", f"{MCI} can only be verified for an agent's own contributions.")
        return None
    try:
        thought_id = uuid.UUID(str(value))
    except ValueError:
        ev.refuse(
            "MEMORY_NOT_VERIFIED",
            f"{MCI} {value!r} is not a thought id. Contribute what you learned (POST /api/v1/memory) and put "
            "trace.thought_id into DNA.",
        )
        return None
    if lock:
        list(Thought.objects.select_for_update(no_key=True).filter(pk=thought_id, space_id=task.space_id).values("pk"))
    thought = thought_contribution_get(space_id=task.space_id, thought_id=thought_id)
    if thought is None:
        problem = f"{MCI} {value!r} is not a thought in this space."
    elif thought.agent_id != actor.agent.id:
        problem = f"{MCI} {value!r} was not contributed by {actor.name}."
    elif thought.thought_category == ThoughtCategory.TRANSITION_MARKER:
        problem = f"{MCI} {value!r} is a transition marker, not a contribution."
    elif IMPORTED_KEY in (thought.context_metadata or {}):
        problem = f"{MCI} {value!r} was imported: an import restores notes, it records nothing learned in this phase."
    elif QualityFlag.RETRACTED in thought.quality_flags:
        problem = f"{MCI} {value!r} was retracted: a withdrawn contribution records nothing learned."
    elif thought.created_at < since:
        problem = f"{MCI} {value!r} was contributed before the current '{task.status}' phase began ({_when(since)})."
    elif (other := _handed_off_on(space_id=task.space_id, thought=thought)) is not None:
        problem = (
            f"{MCI} {value!r} is already what task {other} was handed off on: one contribution records what "
            "was learned in one task."
        )
    else:
        return thought.id
    ev.refuse(
        "MEMORY_NOT_VERIFIED",
        f"{problem} Contribute what you learned in this phase (POST /api/v1/memory) and put trace.thought_id into DNA.",
    )
    return None
