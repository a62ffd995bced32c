"""The admin's "Confirm next step" confirms only the DNA it showed (SPEC 3.4, as the board does).

The attack: an agent changes a task's abstract and test counts while a human is about to confirm it.
The board binds its confirmation to the digest of the DNA it showed (409 ``STALE_PAGE``); the admin's
bulk action confirms through an intermediate page that shows each task's DNA and sends its digest back.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from tasks.models import HumanConfirmation, dna_digest
from tasks.services.tasks import task_update_dna
from tests.security import support
from tests.tasks_helpers import make_agent, make_project, make_task

pytestmark = pytest.mark.django_db

boss = support.boss  # a fixture: a superuser, member of the space, logged in on ``client``

CHANGELIST = "admin:tasks_task_changelist"


def _approval_task(space, slug="gated", dna=None):
    return make_task(
        make_project(space, f"p-{slug}"),
        slug=slug,
        status="approval",
        role="liaison",
        dna=dna if dna is not None else {"abstract": "Ship the tokenizer", "test_pass_count": 5},
    )


def test_choosing_the_action_shows_the_dna_and_confirms_nothing(space, client, boss):
    task = _approval_task(space, dna={"abstract": "Ship <b>the</b> tokenizer", "test_pass_count": 5})
    response = client.post(reverse(CHANGELIST), {"action": "confirm_approved", "_selected_action": [str(task.pk)]})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Ship &lt;b&gt;the&lt;/b&gt; tokenizer" in page  # the DNA the human confirms, escaped
    assert dna_digest(task.dna) in page
    assert "Yes, confirm" in page
    assert not HumanConfirmation.objects.exists()


def test_the_yes_confirms_the_dna_that_was_shown(space, client, boss):
    task = _approval_task(space)
    response = client.post(
        reverse(CHANGELIST),
        {
            "action": "confirm_approved",
            "_selected_action": [str(task.pk)],
            "post": "yes",
            f"dna_digest_{task.pk}": dna_digest(task.dna),
        },
        follow=True,
    )
    assert "Confirmed the step to &#x27;approved&#x27; for 1 task(s)." in response.content.decode()
    confirmation = HumanConfirmation.objects.get()
    assert (confirmation.task_id, confirmation.user, confirmation.dna_digest) == (task.pk, boss, dna_digest(task.dna))


def test_dna_changed_after_the_page_was_shown_confirms_nothing(space, client, boss):
    task = _approval_task(space)
    shown = dna_digest(task.dna)
    task_update_dna(task=task, patch={"abstract": "Ship the tokenizer and drop the audit log"})
    response = client.post(
        reverse(CHANGELIST),
        {
            "action": "confirm_approved",
            "_selected_action": [str(task.pk)],
            "post": "yes",
            f"dna_digest_{task.pk}": shown,
        },
        follow=True,
    )
    assert not HumanConfirmation.objects.exists()
    page = response.content.decode()
    assert "changed after this page was loaded" in page
    assert "Confirmed the step" not in page


def test_a_yes_without_the_shown_digest_confirms_nothing(space, client, boss):
    """A hand-made POST (or an old form) that skips the page names no DNA: nothing is confirmed."""
    task = _approval_task(space)
    response = client.post(
        reverse(CHANGELIST),
        {"action": "confirm_approved", "_selected_action": [str(task.pk)], "post": "yes"},
        follow=True,
    )
    assert not HumanConfirmation.objects.exists()
    assert "was not shown" in response.content.decode()


def test_one_task_changed_leaves_the_others_confirmed(space, client, boss):
    kept = _approval_task(space, slug="kept")
    moved = _approval_task(space, slug="moved")
    digests = {f"dna_digest_{t.pk}": dna_digest(t.dna) for t in (kept, moved)}
    task_update_dna(task=moved, patch={"test_pass_count": 1})
    client.post(
        reverse(CHANGELIST),
        {"action": "confirm_approved", "_selected_action": [str(kept.pk), str(moved.pk)], "post": "yes", **digests},
        follow=True,
    )
    assert list(HumanConfirmation.objects.values_list("task_id", flat=True)) == [kept.pk]


def test_too_many_tasks_at_once_are_refused_before_any_work(space, client, boss, settings):
    from tasks import admin as tasks_admin

    tasks = [_approval_task(space, slug=f"t{i}") for i in range(tasks_admin.CONFIRM_AT_ONCE_MAX + 1)]
    response = client.post(
        reverse(CHANGELIST),
        {"action": "confirm_approved", "_selected_action": [str(t.pk) for t in tasks]},
        follow=True,
    )
    assert f"at most {tasks_admin.CONFIRM_AT_ONCE_MAX} tasks" in response.content.decode()
    assert not HumanConfirmation.objects.exists()


def test_the_confirmed_step_opens_the_gate(space, client, boss):
    from tasks.services.transitions import task_transition

    task = _approval_task(space)
    client.post(
        reverse(CHANGELIST),
        {
            "action": "confirm_approved",
            "_selected_action": [str(task.pk)],
            "post": "yes",
            f"dna_digest_{task.pk}": dna_digest(task.dna),
        },
    )
    task_transition(task=task, to="approved", agent=make_agent(space, "liaison"))
    task.refresh_from_db()
    assert task.status == "approved"
