"""Human gates (SPEC 3.4): confirmations by logged-in members, approval modes, no faking through DNA."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from api.errors import ApplicationError
from tasks.models import HumanConfirmation, Task
from tasks.services.confirmations import task_confirm_human
from tasks.services.tasks import task_update_dna
from tasks.services.transitions import task_transition
from tests.tasks_helpers import contribute, make_agent, make_member, make_project, make_task, query_brain

pytestmark = pytest.mark.django_db

# Hand-written from the documented semantics (tasks/workflow.py HUMAN_CONFIRMATION_WAIVED), not
# derived from the code: True = the liaison needs a human's confirmation.
MODE_EXPECTATIONS = {
    "approval->approved": {"manual": True, "semi": True, "auto-approval": False, "autonomous": False},
    "approval->complete": {"manual": True, "semi": True, "auto-approval": True, "autonomous": False},
    "approval->rework": {"manual": True, "semi": False, "auto-approval": False, "autonomous": False},
    "review->complete": {"manual": True, "semi": True, "auto-approval": True, "autonomous": False},
}
PASSING = {"abstract_ref": "docs/abstract.md", "test_pass_count": 5, "test_total_count": 5}


def _cases():
    for key, modes in MODE_EXPECTATIONS.items():
        for mode, needs_human in modes.items():
            yield pytest.param(key, mode, needs_human, id=f"{key}:{mode}")


@pytest.mark.parametrize(("key", "mode", "needs_human"), list(_cases()))
def test_approval_modes(space, key, mode, needs_human):
    from_status, to = key.split("->")
    task = make_task(
        make_project(space, f"p-{mode}", approval_mode=mode), status=from_status, role="liaison", dna=dict(PASSING)
    )
    liaison = make_agent(space, "liaison")
    human = make_member(space)
    if needs_human:
        with pytest.raises(ApplicationError) as info:
            task_transition(task=task, to=to, agent=liaison)
        assert (info.value.code, info.value.status_code) == ("HUMAN_CONFIRMATION_REQUIRED", 403)
        assert mode in info.value.message
        confirmation = task_confirm_human(task=task, to_status=to, user=human)
        log = task_transition(task=task, to=to, agent=liaison)
        confirmation.refresh_from_db()
        assert confirmation.consumed_by == log and confirmation.consumed_at is not None
    else:
        with pytest.raises(ApplicationError) as info:
            task_confirm_human(task=task, to_status=to, user=human)
        assert info.value.code == "CONFIRMATION_NOT_NEEDED"
        task_transition(task=task, to=to, agent=liaison)
    assert Task.objects.get(pk=task.pk).status == to


def test_a_confirmation_counts_once_and_only_for_the_round_it_was_given_in(space):
    project = make_project(space)
    liaison, pdsa = make_agent(space, "liaison"), make_agent(space, "pdsa")
    human = make_member(space)
    task = make_task(project, status="approval", role="liaison", dna={"pdsa_ref": "docs/d.md"})
    stale = task_confirm_human(task=task, to_status="approved", user=human)
    assert task_confirm_human(task=task, to_status="approved", user=human) == stale  # idempotent
    task_confirm_human(task=task, to_status="rework", user=human)
    task_transition(task=task, to="rework", agent=liaison)
    # Round two: pdsa reworks and resubmits; the old "approved" confirmation no longer counts.
    task_update_dna(task=task, patch={"memory_query_session": query_brain(pdsa)})
    task_transition(task=task, to="active", agent=pdsa)
    task_update_dna(task=task, patch={"memory_contribution_id": contribute(pdsa)})
    task_transition(task=task, to="approval", agent=pdsa)
    with pytest.raises(ApplicationError) as info:
        task_transition(task=task, to="approved", agent=liaison)
    assert info.value.code == "HUMAN_CONFIRMATION_REQUIRED"
    fresh = task_confirm_human(task=task, to_status="approved", user=human)
    assert fresh != stale
    task_transition(task=task, to="approved", agent=liaison)
    stale.refresh_from_db()
    assert stale.consumed_at is None


def test_only_members_confirm_and_only_human_gated_steps(space, other_space):
    task = make_task(make_project(space), status="approval", role="liaison")
    outsider = get_user_model().objects.create_user("outsider")
    with pytest.raises(ApplicationError) as info:
        task_confirm_human(task=task, to_status="approved", user=outsider)
    assert info.value.code == "HUMAN_NOT_MEMBER"
    inactive = make_member(space)
    inactive.is_active = False
    inactive.save()
    with pytest.raises(ApplicationError):
        task_confirm_human(task=task, to_status="approved", user=inactive)
    with pytest.raises(ApplicationError) as info:
        task_confirm_human(task=task, to_status="testing", user=make_member(space))
    assert info.value.code == "NO_HUMAN_GATE"
    assert not HumanConfirmation.objects.exists()


@pytest.mark.parametrize(
    "key", ["human_confirmed", "human_confirmed_by", "human_confirmation_via", "blocked_from_state", "parent_ids"]
)
def test_agents_cannot_fake_gates_through_dna(space, key):
    task = make_task(make_project(space), status="approval", role="liaison", dna={"a": 1})
    with pytest.raises(ApplicationError) as info:
        task_update_dna(task=task, patch={key: True, "b": 2})
    assert info.value.code == "PROTECTED_DNA_KEY"
    assert Task.objects.get(pk=task.pk).dna == {"a": 1}


def test_dna_human_confirmed_set_by_the_orm_still_does_not_open_the_gate(space):
    """Even if such a key got into DNA (admin edit, import), the engine only trusts confirmation rows."""
    task = make_task(make_project(space), status="approval", role="liaison", dna={"human_confirmed": True})
    with pytest.raises(ApplicationError) as info:
        task_transition(task=task, to="approved", agent=make_agent(space, "liaison"))
    assert info.value.code == "HUMAN_CONFIRMATION_REQUIRED"


def test_admin_action_records_the_confirmation_of_the_logged_in_user(space, client):
    admin_user = get_user_model().objects.create_superuser("boss", "boss@example.com")
    space.members.add(admin_user)
    task = make_task(make_project(space), status="approval", role="liaison")
    not_gated = make_task(make_project(space), status="ready", role="dev")
    client.force_login(admin_user)
    selected = {"action": "confirm_approved", "_selected_action": [str(task.pk), str(not_gated.pk)]}
    shown = client.post(reverse("admin:tasks_task_changelist"), selected)
    assert not HumanConfirmation.objects.exists()
    digests = dict(re.findall(r'name="(dna_digest_[^"]+)" value="([0-9a-f]{64})"', shown.content.decode()))
    assert len(digests) == 2
    response = client.post(reverse("admin:tasks_task_changelist"), {**selected, "post": "yes", **digests}, follow=True)
    assert response.status_code == 200
    confirmation = HumanConfirmation.objects.get()
    assert (confirmation.task, confirmation.user, confirmation.from_status, confirmation.to_status) == (
        task,
        admin_user,
        "approval",
        "approved",
    )
    assert b"is not a human-gated step" in response.content
    task_transition(task=task, to="approved", agent=make_agent(space, "liaison"))


def test_admin_pages_render(space, client):
    admin_user = get_user_model().objects.create_superuser("boss", "boss@example.com")
    task = make_task(make_project(space), status="backlog")
    task_transition(task=task, to="pending", as_system=True)
    client.force_login(admin_user)
    for url in (
        reverse("admin:tasks_task_changelist") + "?q=task",
        reverse("admin:tasks_task_change", args=[task.pk]),
        reverse("admin:tasks_project_changelist"),
        reverse("admin:tasks_transitionlog_changelist"),
        reverse("admin:tasks_humanconfirmation_changelist"),
    ):
        assert client.get(url).status_code == 200, url
