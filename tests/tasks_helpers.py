"""Builders for the task tests: put tasks straight into any state, give agents verified brain activity.

Placing a task in a state through the ORM is test setup only; every change under test goes through
``task_transition``.
"""

from __future__ import annotations

import itertools

from django.contrib.auth import get_user_model

from brain.choices import ThoughtCategory
from brain.models import QueryLog, Thought
from brain.services.thoughts import thought_create
from core import services as core_services
from core.models import Agent, Space
from tasks import workflow
from tasks.choices import HUMAN, RESTORE, SYSTEM, ApprovalMode, TaskStatus
from tasks.models import Project, Task

_counter = itertools.count(1)


def make_project(space: Space, slug: str = "proj", approval_mode: str = ApprovalMode.MANUAL) -> Project:
    project, _ = Project.objects.get_or_create(
        space=space, slug=slug, defaults={"name": slug, "approval_mode": approval_mode}
    )
    if project.approval_mode != approval_mode:
        project.approval_mode = approval_mode
        project.save(update_fields=["approval_mode"])
    return project


def make_task(
    project: Project,
    *,
    slug: str | None = None,
    type: str = "task",
    status: str = "backlog",
    role: str = "",
    dna: dict | None = None,
    **fields,
) -> Task:
    return Task.objects.create(
        space=project.space,
        project=project,
        slug=slug or f"task-{next(_counter)}",
        title=f"Task {slug or ''}".strip(),
        type=type,
        status=status,
        role=role,
        dna=dna or {},
        **fields,
    )


def make_agent(space: Space, role: str, name: str | None = None) -> Agent:
    agent, _ = core_services.agent_create(name=name or f"{role}-{next(_counter)}", role=role, space=space)
    return agent


def make_member(space: Space, username: str | None = None):
    user = get_user_model().objects.create_user(username=username or f"human-{next(_counter)}")
    space.members.add(user)
    return user


def query_brain(agent: Agent, session_id: str | None = None) -> str:
    """A brain query by ``agent`` (what POST /api/v1/memory logs); returns its session id."""
    session_id = session_id or f"session-{next(_counter)}"
    QueryLog.objects.create(
        space=agent.space, agent=agent, agent_ref=f"agent-{agent.name}", session_id=session_id, query_text="task?"
    )
    return session_id


def contribute(agent: Agent, content: str = "Learned: the parser needs a lock around the cache.") -> str:
    """A contribution by ``agent``; returns its thought id."""
    thought = thought_create(
        space=agent.space,
        content=content,
        contributor_id=f"agent-{agent.name}",
        contributor_name=agent.name,
        agent=agent,
        thought_category=ThoughtCategory.OPERATIONAL_LEARNING,
    )
    return str(thought.id)


def marker_count(task: Task | None = None) -> int:
    qs = Thought.objects.filter(thought_category=ThoughtCategory.TRANSITION_MARKER)
    if task is not None:
        qs = qs.filter(source_ref__value=task.slug)
    return qs.count()


def actor_kwargs(space: Space, actor: str) -> dict:
    """Service keyword arguments to act as ``actor`` (a role, system or human)."""
    if actor == SYSTEM:
        return {"as_system": True}
    if actor == HUMAN:
        return {"actor_user": make_member(space)}
    return {"agent": make_agent(space, actor)}


def from_state(key: str) -> str:
    source = key.split("->", 1)[0]
    if source == workflow.ANY:
        return TaskStatus.ACTIVE if key.startswith("any->blocked") else TaskStatus.READY
    return source


def target_of(key: str) -> str:
    return key.split("->", 1)[1].split(":", 1)[0]


def initial_role(key: str, rule: workflow.Rule) -> str:
    """A task role under which ``key`` is the rule the lookup finds."""
    rest = key.split("->", 1)[1]
    if ":" in rest and not key.startswith(workflow.ANY):
        return rest.split(":", 1)[1]
    if rule.require_role:
        return rule.require_role
    if key.startswith(workflow.ANY):
        return "dev"
    return "orchestrator"  # no rule is qualified by orchestrator, so the generic key decides


def satisfy(task: Task, rule: workflow.Rule, agent: Agent | None, *, omit: str = "") -> None:
    """Give ``task`` everything ``rule`` requires except ``omit`` (a DNA field, deps, parents or tests)."""
    dna = dict(task.dna)
    for name in rule.requires_dna:
        if name == omit:
            continue
        if name == workflow.MQS:
            dna[name] = query_brain(agent) if agent else "no-agent-session"
        elif name == workflow.MCI:
            dna[name] = contribute(agent) if agent else "00000000-0000-0000-0000-000000000000"
        elif name == "rework_target_role":
            dna[name] = "dev"
        else:
            dna[name] = f"docs/{name}.md"
    if rule.requires_passing_tests:
        dna["test_pass_count"], dna["test_total_count"] = (3, 4) if omit == "tests" else (4, 4)
    task.dna = dna
    task.save(update_fields=["dna"])
    if rule.requires_dependencies_complete:
        dep = make_task(task.project, status=TaskStatus.ACTIVE if omit == "deps" else TaskStatus.COMPLETE)
        task.depends_on.add(dep)
    if rule.requires_parents and omit != "parents":
        task.parents.add(make_task(task.project, status=TaskStatus.ACTIVE))


def task_for_rule(space: Space, task_type: str, key: str, rule: workflow.Rule, *, role: str | None = None) -> Task:
    project = make_project(space)
    status = from_state(key)
    extra = {}
    if status == TaskStatus.BLOCKED:
        extra = {"blocked_from_status": TaskStatus.ACTIVE, "blocked_from_role": "dev"}
    task = make_task(
        project,
        type=task_type,
        status=status,
        role=initial_role(key, rule) if role is None else role,
        dna={"blocked_reason": "waiting for the API key"} if status == TaskStatus.BLOCKED else {},
        **extra,
    )
    if extra:
        task.blocked_from_changed_at = task.status_changed_at
        task.save(update_fields=["blocked_from_changed_at"])
    return task


def expected_target(key: str, task: Task) -> str:
    target = target_of(key)
    return task.blocked_from_status if target == RESTORE else target
