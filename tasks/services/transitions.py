"""The one code path that changes a task's status, and the human confirmations it consumes.

``task_transition`` is brain-gated (SPEC 3.3, seeds/002): in one database transaction it locks the
task row, checks the rule of ``tasks.workflow``, applies the DNA and role changes, writes the
TransitionLog row and the brain marker thought. If the marker can't be written, nothing of the
transition is kept: acting without documenting would be amnesia disguised as availability.

The memory gates (seeds/003) are verified against the brain, not trusted: a ``memory_query_session``
must be a session in which the acting agent queried the brain after the task entered its current
state, a ``memory_contribution_id`` a thought the agent contributed since then.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError, transaction
from django.utils import timezone

from brain.choices import ThoughtCategory
from brain.models import QueryLog, Thought
from brain.services.pipeline import thought_schedule_followups
from brain.services.thoughts import thought_create
from core.errors import ApplicationError, Conflict, Forbidden, ValidationFailed
from core.models import Agent
from tasks import workflow
from tasks.choices import HUMAN, RESTORE, SYSTEM, TaskStatus
from tasks.models import HumanConfirmation, Task, TransitionLog
from tasks.workflow import MCI, MQS, Rule

logger = logging.getLogger("colony.tasks")

LOCK_NOT_AVAILABLE = "55P03"


class TransitionRefused(ApplicationError):
    """A rule refused the transition. The HTTP status depends on why (see ``Problem``)."""

    def __init__(self, message: str, *, code: str, status: int, extra: dict | None = None):
        super().__init__(message, code=code, extra=extra)
        self.status_code = status


class MarkerFailed(ApplicationError):
    """The brain marker could not be written, so the transition was rolled back (server side, retryable)."""

    status_code = 503
    default_code = "MARKER_FAILED"


@dataclass(frozen=True)
class Actor:
    """Who performs a transition: an agent (acting as its role), the system, or a human user."""

    kind: str  # an agent role, "system" or "human"
    agent: Agent | None = None
    user: AbstractBaseUser | None = None

    @property
    def name(self) -> str:
        if self.agent is not None:
            return self.agent.name
        if self.user is not None:
            return self.user.get_username()
        return SYSTEM

    @property
    def contributor(self) -> tuple[str, str]:
        """(contributor_id, contributor_name) of the marker thought."""
        if self.agent is not None:
            return f"agent-{self.agent.name}", self.agent.name
        if self.user is not None:
            return f"human-{self.user.get_username()}", self.user.get_full_name() or self.user.get_username()
        return SYSTEM, "System"


def actor_resolve(
    *, space_id: int, agent: Agent | None = None, actor_user: AbstractBaseUser | None = None, as_system: bool = False
) -> Actor:
    """The actor of a call. Agents act as their token's role only; humans must belong to the space."""
    if sum([agent is not None, actor_user is not None, as_system]) != 1:
        raise ValueError("Give exactly one of agent=, actor_user=, as_system=True.")
    if agent is not None:
        if agent.space_id != space_id:
            raise Forbidden("This agent belongs to another space.", code="WRONG_SPACE")
        return Actor(kind=agent.role, agent=agent)
    if actor_user is not None:
        if not human_may_act(user=actor_user, space_id=space_id):
            raise Forbidden(
                f"User {actor_user.get_username()!r} is not a member of this task's space; only its members "
                "act as humans on its tasks.",
                code="HUMAN_NOT_MEMBER",
            )
        return Actor(kind=HUMAN, user=actor_user)
    return Actor(kind=SYSTEM)


def human_may_act(*, user: AbstractBaseUser, space_id: int) -> bool:
    """Active, logged-in users who are members of the space (superusers count as members everywhere)."""
    if not (user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser) or user.colony_spaces.filter(pk=space_id).exists()


@dataclass
class Problem:
    code: str
    message: str
    status: int


@dataclass
class Evaluation:
    """The verdict on one requested transition, with every reason it is refused (empty = allowed)."""

    to: str
    rule_key: str | None = None
    rule: Rule | None = None
    target_status: str = ""
    new_role: str = ""
    human_confirmation_needed: bool = False
    confirmation: HumanConfirmation | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems

    def refuse(self, code: str, message: str, status: int = 400) -> None:
        self.problems.append(Problem(code=code, message=message, status=status))

    def as_error(self) -> TransitionRefused:
        first = self.problems[0]
        message = " ".join(p.message for p in self.problems)
        reasons = [{"code": p.code, "message": p.message} for p in self.problems]
        return TransitionRefused(message, code=first.code, status=first.status, extra={"reasons": reasons})


def _present(value) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _when(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _check_memory_query(ev: Evaluation, *, task: Task, actor: Actor, value) -> None:
    since = task.status_changed_at
    if actor.agent is None:
        ev.refuse("MEMORY_NOT_VERIFIED", f"{MQS} can only be verified for an agent's own brain queries.")
        return
    session = str(value)
    queries = QueryLog.objects.filter(space_id=task.space_id, agent=actor.agent, session_id=session)
    if queries.filter(created_at__gte=since).exists():
        return
    if queries.exists():
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


def _check_memory_contribution(ev: Evaluation, *, task: Task, actor: Actor, value) -> None:
    since = task.status_changed_at
    if actor.agent is None:
        ev.refuse("MEMORY_NOT_VERIFIED", f"{MCI} can only be verified for an agent's own contributions.")
        return
    try:
        thought_id = uuid.UUID(str(value))
    except ValueError:
        ev.refuse(
            "MEMORY_NOT_VERIFIED",
            f"{MCI} {value!r} is not a thought id. Contribute what you learned (POST /api/v1/memory) and put "
            "trace.thought_id into DNA.",
        )
        return
    thought = (
        Thought.objects.filter(pk=thought_id, space_id=task.space_id)
        .only("id", "agent_id", "created_at", "thought_category")
        .first()
    )
    if thought is None:
        problem = f"{MCI} {value!r} is not a thought in this space."
    elif thought.agent_id != actor.agent.id:
        problem = f"{MCI} {value!r} was not contributed by {actor.name}."
    elif thought.thought_category == ThoughtCategory.TRANSITION_MARKER:
        problem = f"{MCI} {value!r} is a transition marker, not a contribution."
    elif thought.created_at < since:
        problem = f"{MCI} {value!r} was contributed before the current '{task.status}' phase began ({_when(since)})."
    else:
        return
    ev.refuse(
        "MEMORY_NOT_VERIFIED",
        f"{problem} Contribute what you learned in this phase (POST /api/v1/memory) and put trace.thought_id into DNA.",
    )


def _valid_confirmation(*, task: Task, to_status: str) -> HumanConfirmation | None:
    return (
        HumanConfirmation.objects.filter(
            task=task,
            from_status=task.status,
            to_status=to_status,
            consumed_at__isnull=True,
            confirmed_at__gte=task.status_changed_at,
        )
        .select_related("user")
        .order_by("confirmed_at")
        .first()
    )


def task_transition_evaluate(*, task: Task, to: str, actor: Actor) -> Evaluation:
    """Check every gate of ``task -> to`` for ``actor`` without changing anything."""
    ev = Evaluation(to=to)
    resolved = workflow.rule_lookup(
        task_type=task.type, from_status=task.status, to=to, role=task.role, actor=actor.kind
    )
    if resolved is None:
        keys = ", ".join(workflow.rule_keys(from_status=task.status, to=to, role=task.role, actor=actor.kind))
        ev.refuse(
            "TRANSITION_NOT_ALLOWED",
            f"No rule lets a {task.type} go from '{task.status}' to '{to}' (looked up {keys}); "
            "see GET /api/v1/workflow.",
        )
        return ev
    rule = resolved.rule
    ev.rule_key, ev.rule = resolved.key, rule
    dna = task.dna or {}

    if actor.kind not in rule.actors:
        ev.refuse(
            "ACTOR_NOT_ALLOWED",
            f"Rule {resolved.key} is for {', '.join(rule.actors)}; you act as {actor.kind}.",
            403,
        )
    if rule.require_role and task.role != rule.require_role:
        ev.refuse(
            "ROLE_MISMATCH",
            f"Rule {resolved.key} needs the task's role to be {rule.require_role}; it is {task.role or 'unset'}.",
            403,
        )

    # Where the task goes, and with which role.
    if to == RESTORE:
        ev.target_status = task.blocked_from_status
        ev.new_role = task.blocked_from_role
        if not task.blocked_from_status:
            ev.refuse("RESTORE_UNKNOWN", "This task has no remembered state to restore.", 409)
    else:
        ev.target_status = to
        ev.new_role = task.role
        if rule.new_role == workflow.ACTOR_ROLE:
            ev.new_role = actor.kind
        elif rule.new_role == workflow.DNA_REWORK_TARGET:
            target = dna.get("rework_target_role")
            if _present(target) and target not in workflow.AGENT_ROLES:
                ev.refuse(
                    "INVALID_DNA",
                    f"rework_target_role must be one of {', '.join(workflow.AGENT_ROLES)}, not {target!r}.",
                )
            ev.new_role = target if target in workflow.AGENT_ROLES else task.role
        elif rule.new_role:
            ev.new_role = rule.new_role

    missing = [name for name in rule.requires_dna if not _present(dna.get(name))]
    if missing:
        ev.refuse(
            "MISSING_DNA",
            f"Rule {resolved.key} needs DNA {', '.join(missing)}; set them with PATCH /api/v1/tasks/{task.slug}/dna.",
        )
    if MQS in rule.requires_dna and _present(dna.get(MQS)):
        _check_memory_query(ev, task=task, actor=actor, value=dna[MQS])
    if MCI in rule.requires_dna and _present(dna.get(MCI)):
        _check_memory_contribution(ev, task=task, actor=actor, value=dna[MCI])

    if rule.requires_dependencies_complete:
        open_deps = [d for d in task.depends_on.all() if d.status != TaskStatus.COMPLETE]
        if open_deps:
            listing = ", ".join(f"{d.slug} ({d.status})" for d in open_deps)
            ev.refuse("DEPENDENCIES_INCOMPLETE", f"Depends on tasks that are not complete: {listing}.")
    if rule.requires_parents and not task.parents.exists():
        ev.refuse("MISSING_PARENT", "A bug must name the task(s) it was found in (parent_ids).")
    if rule.requires_passing_tests:
        passed, total = dna.get("test_pass_count"), dna.get("test_total_count")
        if not (isinstance(total, int) and isinstance(passed, int) and total > 0 and passed == total):
            ev.refuse(
                "TESTS_NOT_PASSING",
                f"Needs DNA test_pass_count == test_total_count > 0 (now {passed!r} of {total!r}).",
            )

    ev.human_confirmation_needed = workflow.human_confirmation_needed(
        rule_key=resolved.key, rule=rule, approval_mode=task.project.approval_mode
    )
    if ev.human_confirmation_needed and actor.kind != HUMAN:
        ev.confirmation = _valid_confirmation(task=task, to_status=ev.target_status)
        if ev.confirmation is None:
            ev.refuse(
                "HUMAN_CONFIRMATION_REQUIRED",
                f"'{task.status}' -> '{ev.target_status}' needs a human's confirmation (project "
                f"{task.project.slug} is in {task.project.approval_mode} mode); a member of the space confirms it "
                "on the board or in the admin. DNA can't stand in for it.",
                403,
            )
    return ev


def _dna_diff(before: dict, after: dict) -> dict:
    return {
        "added": {k: after[k] for k in after.keys() - before.keys()},
        "removed": {k: before[k] for k in before.keys() - after.keys()},
        "changed": {k: [before[k], after[k]] for k in before.keys() & after.keys() if before[k] != after[k]},
    }


def marker_content(*, from_status: str, to_status: str, actor: Actor, task: Task, summary: str) -> str:
    return f"TASK {from_status}→{to_status}: {actor.kind.upper()} {task.slug} ({task.project.slug}) — {summary}"


def marker_write(*, task: Task, actor: Actor, content: str, rule_key: str, from_status: str, to_status: str) -> Thought:
    """The brain marker of a transition. Its embedding is computed by Celery after the commit."""
    contributor_id, contributor_name = actor.contributor
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
        },
    )
    thought_schedule_followups(thought=marker)
    return marker


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


def task_transition(
    *,
    task: Task,
    to: str,
    summary: str = "",
    agent: Agent | None = None,
    actor_user: AbstractBaseUser | None = None,
    as_system: bool = False,
) -> TransitionLog:
    """Move ``task`` to ``to`` (a status, or ``restore``) as one agent, human or the system.

    Everything — status, role, DNA, the log row, the consumed human confirmation and the brain
    marker — commits together or not at all. A concurrent change of the same task gets 409 CONFLICT.
    """
    if to != RESTORE and to not in TaskStatus.values:
        raise ValidationFailed(
            f"Unknown target {to!r}; use one of {', '.join(TaskStatus.values)} or {RESTORE!r}.", code="UNKNOWN_STATUS"
        )
    summary = (summary or "").strip()
    actor = actor_resolve(space_id=task.space_id, agent=agent, actor_user=actor_user, as_system=as_system)

    with transaction.atomic():
        locked = _lock(task.pk)
        ev = task_transition_evaluate(task=locked, to=to, actor=actor)
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


def task_confirm_human(*, task: Task, to_status: str, user: AbstractBaseUser) -> HumanConfirmation:
    """Record a logged-in human's confirmation of ``task``'s next step to ``to_status``.

    Called by the admin now and the web board later. The transition that needs it consumes it; a
    confirmation only counts for the state the task is in when it is given.
    """
    if not human_may_act(user=user, space_id=task.space_id):
        raise Forbidden(
            f"User {user.get_username()!r} is not a member of this task's space and can't confirm its steps.",
            code="HUMAN_NOT_MEMBER",
        )
    with transaction.atomic():
        locked = Task.objects.select_for_update(of=("self",)).select_related("project").get(pk=task.pk)
        resolved = workflow.rule_lookup(
            task_type=locked.type, from_status=locked.status, to=to_status, role=locked.role, actor=HUMAN
        )
        if resolved is None or not resolved.rule.human_confirmation:
            raise ValidationFailed(
                f"'{locked.status}' -> '{to_status}' is not a human-gated step of this {locked.type}.",
                code="NO_HUMAN_GATE",
            )
        if not workflow.human_confirmation_needed(
            rule_key=resolved.key, rule=resolved.rule, approval_mode=locked.project.approval_mode
        ):
            raise ValidationFailed(
                f"Project {locked.project.slug} is in {locked.project.approval_mode} mode: "
                f"'{locked.status}' -> '{to_status}' needs no human confirmation.",
                code="CONFIRMATION_NOT_NEEDED",
            )
        existing = _valid_confirmation(task=locked, to_status=to_status)
        if existing is not None:
            return existing
        return HumanConfirmation.objects.create(
            task=locked, from_status=locked.status, to_status=to_status, user=user, confirmed_at=timezone.now()
        )
