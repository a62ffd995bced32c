"""The one code path that changes a task's status.

``task_transition`` is brain-gated (SPEC 3.3, seeds/002): in one database transaction it locks the
task row, checks the rule of ``tasks.workflow``, applies the DNA and role changes, writes the
TransitionLog row and the brain marker thought. If the marker can't be written, nothing of the
transition is kept: acting without documenting would be amnesia disguised as availability.

Its parts, one module each: ``actors`` (who acts), ``evaluation`` (every gate of the rule, no
writes), ``gates`` (the memory gates, verified against the brain), ``confirmations`` (human
confirmations), ``markers`` (the brain marker). The rules themselves are the table in
``tasks/workflow.py``.
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError, transaction
from django.utils import timezone

from api.errors import ApplicationError, Conflict, ValidationFailed, did_you_mean
from api.text import storable
from core.models import Agent
from tasks import workflow
from tasks.choices import RESTORE, TaskStatus
from tasks.models import SUMMARY_MAX_CHARS, HumanConfirmation, Task, TransitionLog, dna_digest
from tasks.services.actors import actor_resolve
from tasks.services.evaluation import task_transition_evaluate
from tasks.services.markers import marker_content, marker_write

logger = logging.getLogger("colony.tasks")

LOCK_NOT_AVAILABLE = "55P03"


class MarkerFailed(ApplicationError):
    """The brain marker could not be written, so the transition was rolled back (server side, retryable)."""

    status_code = 503
    default_code = "MARKER_FAILED"


def _dna_diff(before: dict, after: dict) -> dict:
    return {
        "added": {k: after[k] for k in after.keys() - before.keys()},
        "removed": {k: before[k] for k in before.keys() - after.keys()},
        "changed": {k: [before[k], after[k]] for k in before.keys() & after.keys() if before[k] != after[k]},
    }


def _lock(task_id) -> Task:
    try:
        return (
            Task.objects.select_for_update(nowait=True, of=("self",)).select_related("project", "space").get(pk=task_id)
        )
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise Conflict(
                "Another change of this task is in progress; read it again and retry.", code="CONFLICT"
            ) from exc
        raise


#: What agents call a status in other trackers, for the "did you mean" of an unknown target (never taken
#: in its place: a workflow's statuses mean what its rules say).
STATUS_SYNONYMS = {
    **dict.fromkeys(("done", "finished", "closed", "completed", "resolved", "fixed"), "complete"),
    **dict.fromkeys(("in_progress", "doing", "started", "wip", "working"), "active"),
    **dict.fromkeys(("in_review", "reviewing", "code_review", "pr"), "review"),
    **dict.fromkeys(("qa", "test", "testing_qa", "verify"), "testing"),
    **dict.fromkeys(("todo", "to_do"), "ready"),
}


def task_transition(
    *,
    task: Task,
    to: str,
    summary: str = "",
    agent: Agent | None = None,
    actor_user: AbstractBaseUser | None = None,
    as_system: bool = False,
    shown_dna_digest: str | None = None,
) -> TransitionLog:
    """Move ``task`` to ``to`` (a status, or ``restore``) as one agent, human or the system.

    Everything — status, role, DNA, the log row, the consumed human confirmation and the brain
    marker — commits together or not at all. A concurrent change of the same task gets 409 CONFLICT.
    ``shown_dna_digest`` (a human's move from a page: the digest of the DNA the page showed) must still
    be the task's, else nothing moves (409 ``STALE_PAGE``): a human's move through a human gate is their
    confirmation, given for the task as they saw it (``task_confirm_human`` holds the same rule).
    """
    if to != RESTORE and to not in TaskStatus.values:
        hint = did_you_mean(to, [*TaskStatus.values, RESTORE], synonyms=STATUS_SYNONYMS)
        raise ValidationFailed(
            f"Unknown target {to!r}.{hint} Use one of {', '.join(TaskStatus.values)} or {RESTORE!r}.",
            code="UNKNOWN_STATUS",
        )
    summary = storable(summary or "").strip()  # the log's copy as the marker's: whoever calls
    if len(summary) > SUMMARY_MAX_CHARS:
        raise ValidationFailed(
            f"summary has {len(summary)} characters; at most {SUMMARY_MAX_CHARS} (one sentence: the marker quotes it).",
            extra={"fields": {"summary": [f"At most {SUMMARY_MAX_CHARS} characters."]}},
        )
    actor = actor_resolve(space_id=task.space_id, agent=agent, actor_user=actor_user, as_system=as_system)

    with transaction.atomic():
        locked = _lock(task.pk)
        if shown_dna_digest is not None and shown_dna_digest != dna_digest(locked.dna):
            raise Conflict(
                f"The DNA of {locked.slug} changed after this page was loaded; nothing moved. Reload the page, "
                "read the task again and make the move on what it shows.",
                code="STALE_PAGE",
            )
        ev = task_transition_evaluate(task=locked, to=to, actor=actor, lock_evidence=True)
        if not ev.allowed:
            raise ev.as_error()

        now = timezone.now()
        from_status, role_before = locked.status, locked.role
        dna_before = dict(locked.dna or {})
        dna = dict(dna_before)
        for name in ev.rule.clears_dna:
            dna.pop(name, None)

        if to == RESTORE:
            dna = {k: v for k, v in dna.items() if not k.startswith(workflow.BLOCKED_PREFIX)}
            locked.status_changed_at = locked.blocked_from_changed_at or now
            locked.blocked_from_status = locked.blocked_from_role = ""
            locked.blocked_from_changed_at = None
        elif ev.target_status == TaskStatus.BLOCKED:
            locked.blocked_from_status = from_status
            locked.blocked_from_role = role_before
            locked.blocked_from_changed_at = locked.status_changed_at
            locked.status_changed_at = now
        else:
            locked.status_changed_at = now
            locked.blocked_from_status = locked.blocked_from_role = ""
            locked.blocked_from_changed_at = None

        locked.status = ev.target_status
        locked.role = ev.new_role
        locked.dna = dna
        locked.save(
            update_fields=[
                "status",
                "role",
                "dna",
                "status_changed_at",
                "blocked_from_status",
                "blocked_from_role",
                "blocked_from_changed_at",
                "updated_at",
            ]
        )

        if not summary:
            summary = f"{ev.rule_key} by {actor.name}"
        content = marker_content(
            from_status=from_status, to_status=locked.status, actor=actor, task=locked, summary=summary
        )
        try:
            with transaction.atomic():
                marker = marker_write(
                    task=locked,
                    actor=actor,
                    content=content,
                    rule_key=ev.rule_key,
                    from_status=from_status,
                    to_status=locked.status,
                    contribution_id=ev.contribution_id,
                )
        except Exception as exc:
            logger.exception("Brain marker for %s %s->%s failed; transition rolled back", locked.slug, from_status, to)
            raise MarkerFailed(
                f"The brain marker for this transition could not be written ({type(exc).__name__}), so the "
                "transition did not happen. Nothing changed; retry when the brain is available."
            ) from exc

        log = TransitionLog.objects.create(
            task=locked,
            rule_key=ev.rule_key,
            from_status=from_status,
            to_status=locked.status,
            actor=actor.kind,
            agent=actor.agent,
            user=actor.user,
            role_before=role_before,
            role_after=locked.role,
            dna_diff=_dna_diff(dna_before, dna),
            summary=summary,
            marker=marker,
            created_at=now,
        )
        if ev.confirmation is not None:
            HumanConfirmation.objects.filter(pk=ev.confirmation.pk).update(consumed_at=now, consumed_by=log)
    # Keep the caller's object in step with the committed row.
    for name in ("status", "role", "dna", "status_changed_at", "blocked_from_status", "blocked_from_role"):
        setattr(task, name, getattr(locked, name))
    task.blocked_from_changed_at = locked.blocked_from_changed_at
    task.updated_at = locked.updated_at
    return log


def task_transition_options(
    *, task: Task, agent: Agent | None = None, actor_user: AbstractBaseUser | None = None, as_system: bool = False
) -> list[dict]:
    """Every target a rule covers from the task's current state, whether this actor may go there now, and why not."""
    actor = actor_resolve(space_id=task.space_id, agent=agent, actor_user=actor_user, as_system=as_system)
    options = []
    for to in workflow.targets_from(task_type=task.type, from_status=task.status):
        ev = task_transition_evaluate(task=task, to=to, actor=actor)
        if ev.rule_key is None:
            continue
        options.append(
            {
                "to": to,
                "target_status": ev.target_status,
                "rule": ev.rule_key,
                "allowed": ev.allowed,
                "new_role": ev.new_role,
                "human_confirmation_needed": ev.human_confirmation_needed,
                "human_confirmed_by": ev.confirmation.user.get_username() if ev.confirmation else None,
                "reasons": [{"code": p.code, "message": p.message} for p in ev.problems],
            }
        )
    return options
