"""task_transition beyond the table: lookup order, the brain marker's atomicity, memory gates,
blocked/restore, rework clearing, dependencies, bugs' parents, identity."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from api.errors import ApplicationError
from brain.models import Thought
from brain.services.retraction import thought_retract
from tasks import workflow
from tasks.models import Task, TransitionLog
from tasks.services import transitions as transition_services
from tasks.services.tasks import task_create, task_update_dna
from tasks.services.transitions import task_transition
from tests.tasks_helpers import (
    contribute,
    make_agent,
    make_member,
    make_project,
    make_task,
    marker_count,
    query_brain,
)

pytestmark = pytest.mark.django_db


def refused(code: str, **kwargs) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        task_transition(**kwargs)
    assert info.value.code == code, info.value.message
    return info.value


# --- lookup order -------------------------------------------------------------------------------


def test_lookup_order_role_specific_then_generic_then_any_actor_then_any(monkeypatch):
    r = {name: workflow.Rule(actors=("dev",), note=name) for name in ("a->b:qa", "a->b", "any->b:dev", "any->b")}
    monkeypatch.setitem(workflow.WORKFLOW, "task", dict(r))

    def found(role, actor):
        hit = workflow.rule_lookup(task_type="task", from_status="a", to="b", role=role, actor=actor)
        return hit.key if hit else None

    assert found("qa", "dev") == "a->b:qa"
    assert found("pdsa", "dev") == "a->b"
    del workflow.WORKFLOW["task"]["a->b"]
    assert found("pdsa", "dev") == "any->b:dev"
    assert found("pdsa", "qa") == "any->b"
    del workflow.WORKFLOW["task"]["any->b"]
    assert found("pdsa", "qa") is None


def test_real_table_lookups():
    def key(task_type, from_status, to, role, actor):
        hit = workflow.rule_lookup(task_type=task_type, from_status=from_status, to=to, role=role, actor=actor)
        return hit.key if hit else None

    assert key("task", "ready", "active", "dev", "dev") == "ready->active:dev"
    assert key("task", "ready", "active", "orchestrator", "dev") == "ready->active"
    assert key("task", "ready", "cancelled", "dev", "liaison") == "any->cancelled:liaison"
    assert key("task", "ready", "cancelled", "dev", "system") == "any->cancelled:system"
    assert key("task", "ready", "cancelled", "dev", "dev") is None
    assert key("task", "complete", "blocked", "dev", "dev") is None  # terminal states are outside "any"
    assert key("task", "cancelled", "blocked", "dev", "liaison") is None
    assert key("task", "blocked", "blocked", "dev", "liaison") is None
    assert key("task", "blocked", "cancelled", "dev", "system") == "any->cancelled:system"
    assert key("task", "active", "restore", "dev", "liaison") is None
    assert key("bug", "ready", "active", "dev", "dev") == "ready->active"
    assert key("task", "backlog", "complete", "liaison", "liaison") is None


def test_a_role_specific_refusal_is_not_bypassed_by_the_generic_rule(space):
    task = make_task(make_project(space), status="ready", role="pdsa", dna={"pdsa_ref": "x"})
    dev = make_agent(space, "dev")
    task_update_dna(task=task, patch={"memory_query_session": query_brain(dev)})
    error = refused("ACTOR_NOT_ALLOWED", task=task, to="active", agent=dev)
    assert "ready->active:pdsa" in error.message
    assert error.status_code == 403


def test_no_rule_is_refused_with_the_keys_looked_up(space):
    task = make_task(make_project(space), status="backlog", role="liaison")
    error = refused("TRANSITION_NOT_ALLOWED", task=task, to="complete", agent=make_agent(space, "liaison"))
    assert "backlog->complete" in error.message and "any->complete" in error.message


def test_unknown_target_is_a_validation_error(space):
    task = make_task(make_project(space))
    refused("UNKNOWN_STATUS", task=task, to="done", as_system=True)


# --- the marker commits with the transition ------------------------------------------------------


def test_marker_log_and_change_commit_together_and_the_marker_is_embedded_after_commit(
    space, monkeypatch, django_capture_on_commit_callbacks
):
    enqueued = []
    from brain import jobs

    monkeypatch.setattr(jobs.embed_thought, "delay", lambda thought_id: enqueued.append(thought_id))
    task = make_task(make_project(space, "colony"), slug="fix-parser", status="backlog", dna={"k": 1})
    liaison = make_agent(space, "liaison")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        log = task_transition(task=task, to="pending", summary="scheduled for this week", agent=liaison)
        assert enqueued == []  # nothing is sent before the commit
    for callback in callbacks:
        callback()
    marker = Thought.objects.get(pk=log.marker_id)
    assert marker.content == "TASK backlog→pending: LIAISON fix-parser (colony) — scheduled for this week"
    assert marker.agent == liaison and marker.embedding is None
    assert marker.source_ref == {"type": "task", "value": "fix-parser", "project": "colony"}
    assert marker.context_metadata["task_id"] == str(task.id)
    assert enqueued == [str(marker.id)]
    assert TransitionLog.objects.get(task=task).marker_id == marker.id


def test_empty_summary_gets_a_default_in_the_marker(space):
    task = make_task(make_project(space, "colony"), slug="t1")
    log = task_transition(task=task, to="pending", as_system=True)
    assert log.marker.content == "TASK backlog→pending: SYSTEM t1 (colony) — backlog->pending by system"


@pytest.mark.parametrize("failure", [RuntimeError("brain down"), "database"])
def test_when_the_marker_cannot_be_written_nothing_changes(space, monkeypatch, failure):
    task = make_task(
        make_project(space), status="review", role="dev", dna={"qa_review": "bad", "memory_query_session": "s"}
    )
    qa = make_agent(space, "qa")

    def broken_marker(**kwargs):
        if failure == "database":
            # A statement that fails inside the transaction, as a broken INSERT would.
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 / 0")
        raise failure

    monkeypatch.setattr(transition_services, "marker_write", broken_marker)
    task = Task.objects.get(pk=task.pk)
    task.role = "qa"
    task.save(update_fields=["role"])
    before = (task.status, task.role, dict(task.dna), task.status_changed_at)
    error = refused("MARKER_FAILED", task=task, to="rework", summary="tests fail", agent=qa)
    assert error.status_code == 503
    fresh = Task.objects.get(pk=task.pk)
    assert (fresh.status, fresh.role, fresh.dna, fresh.status_changed_at) == before
    assert not TransitionLog.objects.exists()
    assert marker_count() == 0


# --- verified memory gates -----------------------------------------------------------------------


@pytest.fixture
def ready_dev_task(space):
    return make_task(make_project(space), status="ready", role="dev", dna={"pdsa_ref": "docs/design.md"})


def test_memory_query_session_must_be_a_real_session_of_this_agent(space, ready_dev_task):
    dev, other = make_agent(space, "dev"), make_agent(space, "dev")
    task_update_dna(task=ready_dev_task, patch={"memory_query_session": "i-totally-queried"})
    error = refused("MEMORY_NOT_VERIFIED", task=ready_dev_task, to="active", agent=dev)
    assert "not a session in which" in error.message and "POST /api/v1/memory" in error.message

    task_update_dna(task=ready_dev_task, patch={"memory_query_session": query_brain(other)})
    refused("MEMORY_NOT_VERIFIED", task=ready_dev_task, to="active", agent=dev)

    task_update_dna(task=ready_dev_task, patch={"memory_query_session": query_brain(dev)})
    task_transition(task=ready_dev_task, to="active", agent=dev)
    assert Task.objects.get(pk=ready_dev_task.pk).status == "active"


def test_memory_query_session_must_postdate_entering_the_current_state(space, ready_dev_task):
    dev = make_agent(space, "dev")
    session = query_brain(dev)
    Task.objects.filter(pk=ready_dev_task.pk).update(status_changed_at=timezone.now() + timedelta(seconds=1))
    ready_dev_task.refresh_from_db()
    task_update_dna(task=ready_dev_task, patch={"memory_query_session": session})
    error = refused("MEMORY_NOT_VERIFIED", task=ready_dev_task, to="active", agent=dev)
    assert "before this task entered 'ready'" in error.message


def test_memory_query_in_another_space_does_not_count(space, other_space, ready_dev_task):
    dev = make_agent(space, "dev")
    from brain.models import QueryLog

    QueryLog.objects.create(space=other_space, agent=dev, agent_ref="x", session_id="cross", query_text="q")
    task_update_dna(task=ready_dev_task, patch={"memory_query_session": "cross"})
    refused("MEMORY_NOT_VERIFIED", task=ready_dev_task, to="active", agent=dev)


def test_memory_contribution_must_be_this_agents_contribution_in_this_phase(space):
    dev, other = make_agent(space, "dev"), make_agent(space, "dev")
    earlier = contribute(dev)
    # The active phase began just after ``earlier`` was contributed.
    phase_start = Thought.objects.get(pk=earlier).created_at + timedelta(microseconds=1)
    task = make_task(make_project(space), status="active", role="dev", status_changed_at=phase_start)

    cases = [
        ("not-a-uuid", "is not a thought id"),
        ("8d3c5b38-0d70-4f0e-b2c4-5d9d1c1e2f00", "is not a thought in this space"),
        (earlier, "before the current 'active' phase"),
    ]
    cases.append((contribute(other), "was not contributed by"))
    marker = task_transition(
        task=make_task(task.project, status="backlog"), to="pending", agent=make_agent(space, "pdsa")
    )
    Thought.objects.filter(pk=marker.marker_id).update(agent=dev)
    cases.append((str(marker.marker_id), "is a transition marker"))
    # A contribution the agent retracted (before: it passed the gate, so junk stored and withdrawn did).
    withdrawn = contribute(dev)
    thought_retract(space=space, thought_id=withdrawn, reason="stored by mistake", agent=dev)
    cases.append((withdrawn, "was retracted"))
    for value, message in cases:
        task_update_dna(task=task, patch={"memory_contribution_id": value})
        error = refused("MEMORY_NOT_VERIFIED", task=task, to="review", agent=dev)
        assert message in error.message, (value, error.message)

    task_update_dna(task=task, patch={"memory_contribution_id": contribute(dev)})
    task_transition(task=task, to="review", agent=dev)
    assert (Task.objects.get(pk=task.pk).status, Task.objects.get(pk=task.pk).role) == ("review", "qa")


def test_rework_clears_memory_and_verdicts_so_the_next_claim_needs_a_fresh_query(space):
    dev, qa = make_agent(space, "dev"), make_agent(space, "qa")
    old_session = query_brain(dev)
    task = make_task(
        make_project(space),
        status="review",
        role="qa",
        dna={
            "memory_query_session": old_session,
            "memory_contribution_id": contribute(dev),
            "qa_review": "fail",
            "review_verdict": "reject",
            "pdsa_ref": "docs/d.md",
        },
    )
    log = task_transition(task=task, to="rework", summary="two tests fail", agent=qa)
    task.refresh_from_db()
    assert (task.status, task.role) == ("rework", "dev")
    assert task.dna == {"pdsa_ref": "docs/d.md"}
    assert set(log.dna_diff["removed"]) == {
        "memory_query_session",
        "memory_contribution_id",
        "qa_review",
        "review_verdict",
    }
    # Putting the old session back does not help: it predates the rework.
    task_update_dna(task=task, patch={"memory_query_session": old_session})
    refused("MEMORY_NOT_VERIFIED", task=task, to="active", agent=dev)
    task_update_dna(task=task, patch={"memory_query_session": query_brain(dev)})
    task_transition(task=task, to="active", agent=dev)


# --- blocked and restore -------------------------------------------------------------------------


def test_blocked_needs_a_reason_and_restore_returns_exactly(space):
    dev, liaison = make_agent(space, "dev"), make_agent(space, "liaison")
    task = make_task(make_project(space), status="active", role="dev", dna={"pdsa_ref": "d"})
    entered_active = task.status_changed_at
    contribution = contribute(dev)

    refused("MISSING_DNA", task=task, to="blocked", agent=dev)
    task_update_dna(
        task=task, patch={"blocked_reason": "waiting for credentials", "memory_contribution_id": contribution}
    )
    task_transition(task=task, to="blocked", summary="need credentials", agent=dev)
    task.refresh_from_db()
    assert (task.status, task.role, task.blocked_from_status, task.blocked_from_role) == (
        "blocked",
        "dev",
        "active",
        "dev",
    )
    refused("ALREADY_IN_STATUS", task=task, to="blocked", agent=liaison)  # already blocked
    refused("ACTOR_NOT_ALLOWED", task=task, to="restore", agent=dev)  # only liaison or system restore

    log = task_transition(task=task, to="restore", summary="credentials arrived", agent=liaison)
    task.refresh_from_db()
    assert (task.status, task.role) == ("active", "dev")
    assert task.status_changed_at == entered_active  # the active phase goes on
    assert (task.blocked_from_status, task.blocked_from_role, task.blocked_from_changed_at) == ("", "", None)
    assert not any(key.startswith("blocked_") for key in task.dna)
    assert (log.rule_key, log.from_status, log.to_status) == ("blocked->restore", "blocked", "active")
    assert log.marker.content.startswith("TASK blocked→active: LIAISON")
    # The contribution made before the block still counts for this active phase.
    task_transition(task=task, to="review", agent=dev)


def test_restore_only_from_blocked_and_cancel_is_terminal(space):
    liaison = make_agent(space, "liaison")
    task = make_task(make_project(space), status="ready", role="dev", dna={"abstract_ref": "a"})
    refused("TRANSITION_NOT_ALLOWED", task=task, to="restore", agent=liaison)
    task_transition(task=task, to="cancelled", agent=liaison)
    task.refresh_from_db()
    assert (task.status, task.role) == ("cancelled", "liaison")
    for to in ("ready", "blocked", "restore", "backlog"):
        refused("TRANSITION_NOT_ALLOWED", task=task, to=to, as_system=True)


def test_a_blocked_task_can_be_cancelled_and_forgets_its_blocked_state(space):
    task = make_task(make_project(space), status="active", role="dev", dna={"blocked_reason": "r"})
    task_transition(task=task, to="blocked", as_system=True)
    task_transition(task=task, to="cancelled", as_system=True)
    task.refresh_from_db()
    assert (task.status, task.blocked_from_status) == ("cancelled", "")


# --- dependencies, bugs, complete->rework --------------------------------------------------------


def test_dependency_gate(space):
    project = make_project(space)
    dep = make_task(project, slug="schema", status="active")
    task = task_create(
        space=space, project=project.slug, slug="api", title="API", status="pending", depends_on=["schema"]
    )
    error = refused("DEPENDENCIES_INCOMPLETE", task=task, to="ready", as_system=True)
    assert "schema (active)" in error.message
    Task.objects.filter(pk=dep.pk).update(status="complete")
    task_transition(task=task, to="ready", as_system=True)
    assert Task.objects.get(pk=task.pk).role == "pdsa"


def test_bugs_need_parent_ids(space):
    project = make_project(space)
    parent = make_task(project, slug="feature-x", status="complete")
    with pytest.raises(ApplicationError) as info:
        task_create(space=space, project=project.slug, slug="bug-1", title="Crash", type="bug")
    assert info.value.code == "MISSING_PARENT"
    with pytest.raises(ApplicationError) as info:
        task_create(space=space, project=project.slug, slug="bug-1", title="Crash", type="bug", parent_ids=["nope"])
    assert info.value.code == "UNKNOWN_TASK_REFERENCE"
    bug = task_create(
        space=space,
        project=project.slug,
        slug="bug-1",
        title="Crash",
        type="bug",
        status="pending",
        parent_ids=[str(parent.id)],
    )
    assert list(bug.parents.all()) == [parent]
    bug.parents.clear()  # e.g. the parent was deleted by an admin: the gate still holds
    refused("MISSING_PARENT", task=bug, to="ready", as_system=True)
    bug.parents.add(parent)
    task_transition(task=bug, to="ready", as_system=True)
    assert Task.objects.get(pk=bug.pk).role == "dev"


def test_complete_to_rework_goes_to_the_named_role_and_complete_dna_is_otherwise_closed(space):
    liaison = make_agent(space, "liaison")
    task = make_task(make_project(space), status="complete", role="liaison", dna={"abstract_ref": "a"})
    with pytest.raises(ApplicationError) as info:
        task_update_dna(task=task, patch={"notes": "late idea"})
    assert (info.value.code, info.value.status_code) == ("TASK_CLOSED", 409)
    refused("MISSING_DNA", task=task, to="rework", agent=liaison)
    with pytest.raises(ApplicationError) as info:
        task_update_dna(task=task, patch={"rework_target_role": "boss"})
    assert info.value.code == "INVALID_DNA"
    task_update_dna(task=task, patch={"rework_target_role": "qa"})
    task_transition(task=task, to="rework", agent=liaison)
    task.refresh_from_db()
    assert (task.status, task.role) == ("rework", "qa")


# --- identity ------------------------------------------------------------------------------------


def test_an_agent_of_another_space_cannot_act(space, other_space):
    task = make_task(make_project(space), status="backlog")
    refused("WRONG_SPACE", task=task, to="pending", agent=make_agent(other_space, "liaison"))


def test_a_human_must_belong_to_the_space(space, other_space):
    from django.contrib.auth import get_user_model

    outsider = get_user_model().objects.create_user("outsider")
    other_space.members.add(outsider)
    task = make_task(make_project(space), status="approval", role="liaison")
    refused("HUMAN_NOT_MEMBER", task=task, to="approved", actor_user=outsider)
    member = make_member(space)
    log = task_transition(task=task, to="approved", actor_user=member, summary="looks right")
    assert (log.actor, log.user, log.agent) == ("human", member, None)
    assert log.marker.content.startswith("TASK approval→approved: HUMAN")


def test_the_role_comes_from_the_agent_not_from_the_caller(space):
    """An orchestrator agent can't use the rules of other roles, whatever it asks for."""
    task = make_task(make_project(space), status="backlog")
    refused("ACTOR_NOT_ALLOWED", task=task, to="pending", agent=make_agent(space, "orchestrator"))
    with pytest.raises(ValueError):
        task_transition(task=task, to="pending", agent=make_agent(space, "liaison"), as_system=True)
