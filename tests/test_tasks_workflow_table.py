"""Every rule of the transition table, allowed and refused, through ``task_transition`` (CONVENTIONS)."""

from __future__ import annotations

import pytest

from api.errors import ApplicationError
from brain.models import Thought
from tasks import workflow
from tasks.choices import HUMAN, RESTORE, SYSTEM
from tasks.models import HumanConfirmation, TransitionLog
from tasks.services.confirmations import task_confirm_human
from tasks.services.transitions import task_transition
from tests.tasks_helpers import (
    actor_kwargs,
    expected_target,
    make_member,
    marker_count,
    satisfy,
    target_of,
    task_for_rule,
)

ALL_ACTORS = ("dev", "qa", "pdsa", "liaison", "orchestrator", SYSTEM, HUMAN)


def _allowed_cases():
    for task_type, rules in workflow.WORKFLOW.items():
        for key, rule in rules.items():
            for actor in rule.actors:
                yield pytest.param(task_type, key, actor, id=f"{task_type}:{key}:by-{actor}")


def _refusal_cases():
    for task_type, rules in workflow.WORKFLOW.items():
        for key, rule in rules.items():
            outsider = next(a for a in ALL_ACTORS if a not in rule.actors)
            yield pytest.param(task_type, key, "actor", outsider, id=f"{task_type}:{key}:actor-{outsider}")
            agent_actor = next((a for a in rule.actors if a not in (SYSTEM, HUMAN)), rule.actors[0])
            for name in rule.requires_dna:
                yield pytest.param(task_type, key, f"dna:{name}", agent_actor, id=f"{task_type}:{key}:no-{name}")
                if name in workflow.MEMORY_FIELDS:
                    yield pytest.param(task_type, key, f"fake:{name}", agent_actor, id=f"{task_type}:{key}:fake-{name}")
            is_qualified = ":" in key.split("->", 1)[1]
            if rule.require_role and not is_qualified:
                yield pytest.param(task_type, key, "role", agent_actor, id=f"{task_type}:{key}:wrong-role")
            non_human = next((a for a in rule.actors if a != HUMAN), None)
            if rule.human_confirmation and non_human:
                yield pytest.param(task_type, key, "human", non_human, id=f"{task_type}:{key}:unconfirmed")
            if rule.requires_dependencies_complete:
                yield pytest.param(task_type, key, "deps", agent_actor, id=f"{task_type}:{key}:open-deps")
            if rule.requires_parents:
                yield pytest.param(task_type, key, "parents", agent_actor, id=f"{task_type}:{key}:no-parents")
            if rule.requires_passing_tests:
                yield pytest.param(task_type, key, "tests", agent_actor, id=f"{task_type}:{key}:failing-tests")


@pytest.mark.django_db
@pytest.mark.parametrize(("task_type", "key", "actor"), list(_allowed_cases()))
def test_rule_allows_its_actors(space, task_type, key, actor):
    rule = workflow.WORKFLOW[task_type][key]
    task = task_for_rule(space, task_type, key, rule)
    found = workflow.rule_lookup(
        task_type=task_type, from_status=task.status, to=target_of(key), role=task.role, actor=actor
    )
    assert found is not None and found.key == key  # the setup really exercises this rule
    kwargs = actor_kwargs(space, actor)
    satisfy(task, rule, kwargs.get("agent"))
    task.dna.update({name: "left over" for name in rule.clears_dna if name not in task.dna})
    task.save(update_fields=["dna"])
    if workflow.human_confirmation_needed(rule_key=key, rule=rule, approval_mode="manual") and actor != HUMAN:
        task_confirm_human(task=task, to_status=target_of(key), user=make_member(space))
    from_status, role_before, target = task.status, task.role, expected_target(key, task)

    log = task_transition(task=task, to=target_of(key), summary="table test", **kwargs)

    task.refresh_from_db()
    assert task.status == target
    if target_of(key) == RESTORE:
        expected_role = "dev"
    elif rule.new_role == workflow.ACTOR_ROLE:
        expected_role = actor
    elif rule.new_role == workflow.DNA_REWORK_TARGET:
        expected_role = "dev"
    else:
        expected_role = rule.new_role or role_before
    assert task.role == expected_role
    for name in rule.clears_dna:
        assert name not in task.dna
    assert set(log.dna_diff["removed"]) == set(rule.clears_dna) | (
        {k for k in log.dna_diff["removed"] if k.startswith("blocked_")} if target_of(key) == RESTORE else set()
    )
    assert (log.rule_key, log.from_status, log.to_status, log.actor) == (key, from_status, target, actor)
    assert (log.role_before, log.role_after) == (role_before, expected_role)
    marker = Thought.objects.get(pk=log.marker_id)
    assert marker.content == (
        f"TASK {from_status}→{target}: {actor.upper()} {task.slug} ({task.project.slug}) — table test"
    )
    assert marker.thought_category == "transition_marker"
    assert marker.source_ref == {"type": "task", "value": task.slug, "project": task.project.slug}
    if rule.human_confirmation and actor != HUMAN:
        assert HumanConfirmation.objects.get(task=task).consumed_by_id == log.id


@pytest.mark.django_db
@pytest.mark.parametrize(("task_type", "key", "refusal", "actor"), list(_refusal_cases()))
def test_rule_refuses(space, task_type, key, refusal, actor):
    rule = workflow.WORKFLOW[task_type][key]
    task = task_for_rule(space, task_type, key, rule, role="orchestrator" if refusal == "role" else None)
    kwargs = actor_kwargs(space, actor)
    omit = refusal.split(":", 1)[1] if refusal.startswith(("dna:", "fake:")) else refusal
    satisfy(task, rule, kwargs.get("agent"), omit=omit)
    if refusal.startswith("fake:"):
        name = omit
        task.dna[name] = "made-up-session" if name == workflow.MQS else "5b1f3a52-3c4b-4f7e-9a43-1c1d6f0e2a11"
        task.save(update_fields=["dna"])
    needs_human = workflow.human_confirmation_needed(rule_key=key, rule=rule, approval_mode="manual")
    if needs_human and refusal != "human" and actor != HUMAN:
        task_confirm_human(task=task, to_status=target_of(key), user=make_member(space))
    before = (task.status, task.role, dict(task.dna))

    with pytest.raises(ApplicationError) as refused:
        task_transition(task=task, to=target_of(key), summary="must not happen", **kwargs)

    expected_codes = {
        "actor": {"ACTOR_NOT_ALLOWED", "TRANSITION_NOT_ALLOWED"},
        "role": {"ROLE_MISMATCH"},
        "human": {"HUMAN_CONFIRMATION_REQUIRED"},
        "deps": {"DEPENDENCIES_INCOMPLETE"},
        "parents": {"MISSING_PARENT"},
        "tests": {"TESTS_NOT_PASSING"},
    }.get(refusal, {"MISSING_DNA"} if refusal.startswith("dna:") else {"MEMORY_NOT_VERIFIED"})
    assert refused.value.code in expected_codes, refused.value.message
    assert 400 <= refused.value.status_code < 500
    task.refresh_from_db()
    assert (task.status, task.role, task.dna) == before
    assert not TransitionLog.objects.filter(task=task).exists()
    assert marker_count(task) == 0


@pytest.mark.parametrize("task_type", list(workflow.WORKFLOW))
def test_every_way_into_rework_clears_the_memory_gates(task_type):
    into_rework = {key: rule for key, rule in workflow.WORKFLOW[task_type].items() if target_of(key) == "rework"}
    assert into_rework
    for key, rule in into_rework.items():
        assert set(workflow.MEMORY_FIELDS) <= set(rule.clears_dna), key


@pytest.mark.parametrize("task_type", list(workflow.WORKFLOW))
def test_every_claim_of_active_needs_a_verified_brain_query(task_type):
    for key, rule in workflow.WORKFLOW[task_type].items():
        if target_of(key) == "active":
            assert workflow.MQS in rule.requires_dna, key
        if key.startswith("active->") and target_of(key) not in ("blocked", "cancelled"):
            assert workflow.MCI in rule.requires_dna, key
