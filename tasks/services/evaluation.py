"""Evaluating a requested transition against the table of ``tasks.workflow``: every gate, no writes.

:func:`task_transition_evaluate` returns an :class:`Evaluation` listing every reason a transition
is refused (empty = allowed); ``task_transition`` and the "what may I do" options both use it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from api.errors import ApplicationError
from tasks import workflow
from tasks.choices import HUMAN, RESTORE, TaskStatus
from tasks.models import HumanConfirmation, Task
from tasks.services.actors import Actor
from tasks.services.confirmations import confirmation_valid
from tasks.services.gates import memory_contribution_check, memory_query_check
from tasks.workflow import MCI, MQS, Rule


class TransitionRefused(ApplicationError):
    """A rule refused the transition. The HTTP status depends on why (see ``Problem``): 403 when the
    caller may not make it (actor, task role, a human's confirmation), 409 when the task's current
    state refuses it (no rule from its status, DNA it lacks, open dependencies...). The request
    itself is well formed either way, so never 400: that is for a malformed request (an unknown
    ``to`` is 400 ``UNKNOWN_STATUS`` before any rule is looked at)."""

    def __init__(self, message: str, *, code: str, status: int, extra: dict | None = None):
        super().__init__(message, code=code, extra=extra)
        self.status_code = status


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
    contribution_id: uuid.UUID | None = None  # the verified memory_contribution_id of a hand-off
    problems: list[Problem] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems

    def refuse(self, code: str, message: str, status: int = 409) -> None:
        self.problems.append(Problem(code=code, message=message, status=status))

    def as_error(self) -> TransitionRefused:
        first = self.problems[0]
        message = " ".join(p.message for p in self.problems)
        reasons = [{"code": p.code, "message": p.message} for p in self.problems]
        return TransitionRefused(message, code=first.code, status=first.status, extra={"reasons": reasons})


def _already_there(task: Task, actor: Actor) -> str:
    """A move to the status the task is in: say who moved it there and when. The usual cause is a retry
    of a move whose answer was lost (a timeout): "No rule lets a task go from 'active' to 'active'" would
    leave the agent unsure whether its own claim had worked."""
    last = task.transitions.filter(to_status=task.status).select_related("agent", "user").first()
    if last is None:
        return f"The task is already '{task.status}' (it was created so); nothing changed."
    who = last.agent.name if last.agent else last.user.get_username() if last.user else last.actor
    mine = (last.agent_id is not None and actor.agent is not None and last.agent_id == actor.agent.pk) or (
        last.user_id is not None and actor.user is not None and last.user_id == actor.user.pk
    )
    when = last.created_at.isoformat(timespec="seconds")
    if mine:
        return (
            f"The task is already '{task.status}': you moved it there at {when}. "
            "Nothing changed; if that answer was lost, your move did take effect."
        )
    return f"The task is already '{task.status}': {who} moved it there at {when}. Nothing changed."


def task_transition_evaluate(*, task: Task, to: str, actor: Actor, lock_evidence: bool = False) -> Evaluation:
    """Check every gate of ``task -> to`` for ``actor`` without changing anything.

    ``lock_evidence``: the caller's transaction acts on the verdict (``task_transition``), so the
    contribution a hand-off names is locked until it commits: two tasks handing off on one thought at
    once are checked one after the other, and the second sees the first's hand-off."""
    ev = Evaluation(to=to)
    resolved = workflow.rule_lookup(
        task_type=task.type, from_status=task.status, to=to, role=task.role, actor=actor.kind
    )
    if resolved is None and to == task.status:
        ev.refuse("ALREADY_IN_STATUS", _already_there(task, actor))
        return ev
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
            ev.refuse("RESTORE_UNKNOWN", "This task has no remembered state to restore.")
    else:
        ev.target_status = to
        ev.new_role = task.role
        if rule.new_role == workflow.ACTOR_ROLE:
            ev.new_role = actor.kind
        elif rule.new_role == workflow.DNA_REWORK_TARGET:
            target = dna.get("rework_target_role")
            if workflow.dna_reference_present(target) and target not in workflow.AGENT_ROLES:
                ev.refuse(
                    "INVALID_DNA",
                    f"rework_target_role must be one of {', '.join(workflow.AGENT_ROLES)}, not {target!r}.",
                )
            ev.new_role = target if target in workflow.AGENT_ROLES else task.role
        elif rule.new_role:
            ev.new_role = rule.new_role

    present = workflow.dna_reference_present
    missing = [name for name in rule.requires_dna if not present(dna.get(name))]
    if missing:
        unreadable = ", ".join(name for name in missing if dna.get(name) is not None)
        why = f" {unreadable}: set, but with no visible text." if unreadable else ""
        ev.refuse(
            "MISSING_DNA",
            f"Rule {resolved.key} needs DNA {', '.join(missing)} (a text each: a path, an id, a reason).{why} "
            f"Set them with PATCH /api/v1/tasks/{task.slug}/dna.",
        )
    if MQS in rule.requires_dna and present(dna.get(MQS)):
        memory_query_check(ev, task=task, actor=actor, value=dna[MQS])
    if MCI in rule.requires_dna and present(dna.get(MCI)):
        ev.contribution_id = memory_contribution_check(ev, task=task, actor=actor, value=dna[MCI], lock=lock_evidence)

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
        ev.confirmation = confirmation_valid(task=task, to_status=ev.target_status)
        if ev.confirmation is None:
            ev.refuse(
                "HUMAN_CONFIRMATION_REQUIRED",
                f"'{task.status}' -> '{ev.target_status}' needs a human's confirmation (project "
                f"{task.project.slug} is in {task.project.approval_mode} mode); a member of the space confirms it "
                "on the board or in the admin. DNA can't stand in for it.",
                403,
            )
    return ev
