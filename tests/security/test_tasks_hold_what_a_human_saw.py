"""Attacks on what a human sees of a task before acting on it: the DNA shown on the task page, the board
and the admin (SPEC 3.4: a human confirms the task as they saw it). Each test is an attack and the
rule that holds instead."""

from __future__ import annotations

import re

import pytest

from tasks.models import Task, TransitionLog
from tests.security import support
from tests.security.support import shown as _shown
from tests.security.test_web_pages_hold import admin_form
from tests.tasks_helpers import make_project, make_task
from tests.web_support import ada  # noqa: F401 - a fixture (pytest finds it by name)

pytestmark = pytest.mark.django_db

boss = support.boss  # a fixture: a superuser, member of the space, logged in on ``client``

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE


def _post_fields(page: str, action: str, to: str) -> dict:
    """The fields the page's form for the move (or confirmation) to ``to`` posts, as a browser sends them."""
    for form in re.findall(rf'<form method="post" action="{re.escape(action)}".*?</form>', page, re.S):
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
        if to in (fields.get("to"), fields.get("to_status")):
            fields.pop("csrfmiddlewaretoken", None)
            return fields
    raise AssertionError(f"the page has no form posting {to!r} to {action}")


# --- 1. the human's "Move to approved" button approves DNA the human never saw ------------------------
def test_a_humans_move_to_approved_binds_to_the_dna_the_page_showed(client, ada, space, agent_factory):  # noqa: F811
    """Attack: Ada opens the task page of ``design-x`` (approval, manual project, ``pdsa_ref``
    docs/design.md) and reads the design. While the page is open the liaison agent swaps the design
    (PATCH /dna: ``pdsa_ref`` docs/unreviewed.md). Ada clicks "Move to approved" (approval->approved,
    a human-gated rule whose actors include the human: her move *is* the confirmation). The move's form
    carries no digest of the DNA the page showed, so the task is approved, with a TransitionLog and a
    marker naming Ada, on a design she never saw.

    Rule: SPEC 3.4 and docs/api.md "Human gates": "A confirmation counts for the task as the human saw
    it ... a DNA changed since the page was loaded confirms nothing (the page says to reload)". The
    Confirm button already holds this (test_task_doors_hold); the human's own move through the same
    gate must too: refused as stale, the task stays in approval, no transition is logged."""
    liaison = agent_factory("liaison")
    task = make_task(
        make_project(space), slug="design-x", status="approval", role="liaison", dna={"pdsa_ref": "docs/design.md"}
    )
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "docs/design.md" in page
    fields = _post_fields(page, f"/tasks/{task.slug}/transition/", "approved")

    swapped = liaison.patch(f"/api/v1/tasks/{task.slug}/dna", {"pdsa_ref": "docs/unreviewed.md"}, format="json")
    assert swapped.status_code == 200, swapped.content
    client.post(f"/tasks/{task.slug}/transition/", fields, follow=True)  # what the page Ada read posts

    assert Task.objects.get(pk=task.pk).status == "approval"
    assert not TransitionLog.objects.filter(task=task).exists()


# --- 2. DNA text keeps the bidi override the API strips from every other text -------------------------
def test_dna_text_loses_bidi_controls_before_a_human_confirms_it(client, boss, space, agent_factory):
    """Attack: the liaison agent writes the abstract a human is about to confirm as
    ``"docs/" + U+202E + "dm.desiver"`` (and a DNA key ending in U+202E). Stored as sent, the task page
    and the admin's "Confirm next step" page draw it reversed: the human reads ``docs/revised.md`` and
    confirms review->complete of a task whose abstract_ref names another file (``dm.desiver``). Titles,
    descriptions, summaries and thoughts lose these characters (test_invisible_controls_hold); DNA, the
    text a human gate is given on, does not (PATCH /dna and POST /tasks ``dna`` alike).

    Rule: docs/api.md "Every text field is stored without the characters that only reorder or hide what a
    reader sees (U+202A-U+202E, U+2066-U+2069, ...)"; SPEC 6 "Text shown in the UI is escaped" and
    3.4 (a human confirms what was shown). Expected: stored without them, so no page shows one."""
    liaison = agent_factory("liaison")
    task = make_task(
        make_project(space),
        slug="ship-it",
        status="review",
        role="liaison",
        dna={"test_pass_count": 5, "test_total_count": 5},
    )
    patched = liaison.patch(
        f"/api/v1/tasks/{task.slug}/dna",
        {"abstract_ref": "docs/" + RLO + "dm.desiver", "reviewed" + RLO: "yes"},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    created = liaison.post(
        "/api/v1/tasks",
        {"project": "proj", "slug": "other", "title": "t", "dna": {"abstract_ref": "a" + RLO + "b"}},
        format="json",
    )
    assert created.status_code == 201, created.content

    for slug in ("ship-it", "other"):
        dna = Task.objects.get(slug=slug).dna
        assert not any(RLO in key or RLO in str(value) for key, value in dna.items()), dna
    assert not _shown(client.get(f"/tasks/{task.slug}/").content.decode(), RLO)
    confirm_page = client.post(
        "/admin/tasks/task/", {"action": "confirm_complete", "_selected_action": [str(task.pk)]}
    ).content.decode()
    assert "Yes, confirm" in confirm_page
    assert not _shown(confirm_page, RLO)


# --- 3. the admin stores a DNA that is not an object, and every door of the task 500s ----------------
@pytest.mark.parametrize("value", ["[1, 2]", '"ship it"', "42", "null"])
def test_the_admin_refuses_a_task_dna_that_is_not_a_json_object(client, boss, space, agent_factory, value):
    """Attack: in the task's admin change form a staff user types ``[1, 2]`` (or a string, a number,
    ``null``) into the DNA field and saves. The admin's JSON field takes any JSON value: a list, string
    or number is saved, and from then on the task's transitions list, its DNA PATCH and every transition
    (the agents' API and MCP) and its page and move panel (the board) are 500s; ``null`` is a 500 of the
    admin itself (the column is NOT NULL).

    Rule: SPEC 6 "Bad input gets a 4xx with the error envelope, never a 500, and changes nothing"; SPEC
    3.1 (DNA is the task's JSON object: every other door refuses anything else, 400 INVALID_DNA "DNA
    must be a JSON object"). Expected: the admin form again with an error on DNA; the DNA is unchanged
    and the task's doors keep answering."""
    liaison = agent_factory("liaison")
    task = make_task(make_project(space), slug="adm", status="review", role="liaison", dna={"pdsa_ref": "d.md"})
    client.raise_request_exception = False
    url = f"/admin/tasks/task/{task.id}/change/"
    data = admin_form(client, url)
    data["dna"] = [value]

    response = client.post(url, data)

    assert response.status_code < 500, response.status_code
    assert Task.objects.get(pk=task.pk).dna == {"pdsa_ref": "d.md"}
    assert liaison.get(f"/api/v1/tasks/{task.slug}/transitions").status_code == 200
    assert client.get(f"/tasks/{task.slug}/").status_code == 200


# --- 4. saving a task in the admin undoes the DNA an agent wrote meanwhile ---------------------------
def test_an_admin_save_does_not_undo_dna_an_agent_wrote_since_the_page_loaded(client, boss, space, agent_factory):
    """Attack (a race the agent only has to wait for): a staff user opens task ``adm`` in the admin to
    fix its title. Meanwhile the dev agent records its gate evidence and notes (PATCH /dna:
    ``memory_query_session``, ``notes``; 200). The staff user saves the title. The admin writes back the
    whole DNA the page was loaded with: the agent's keys are gone without anyone removing them (the
    agent's next claim fails MISSING_DNA; a test count or abstract swapped back the same way).

    Rule: SPEC 3.3 (concurrent changes of one task: one wins and the other gets a clear conflict, never
    a silent overwrite); the task page's DNA form already merges only what the human changed ("a key an
    agent wrote meanwhile is neither removed nor overwritten", web.forms.DnaForm). Expected: the save
    keeps the agent's keys, or is refused as stale (the form again) and changes nothing."""
    dev = agent_factory("dev")
    task = make_task(make_project(space), slug="adm", status="ready", role="dev", dna={"pdsa_ref": "d.md"})
    url = f"/admin/tasks/task/{task.id}/change/"
    data = admin_form(client, url)

    written = dev.patch(
        f"/api/v1/tasks/{task.slug}/dna", {"memory_query_session": "s-1", "notes": "lock the cache"}, format="json"
    )
    assert written.status_code == 200, written.content
    data["title"] = ["A better title"]
    response = client.post(url, data)

    stored = Task.objects.get(pk=task.pk)
    if response.status_code == 200:  # refused as stale: nothing changed
        assert stored.title != "A better title"
    assert stored.dna.get("memory_query_session") == "s-1" and stored.dna.get("notes") == "lock the cache", stored.dna


def test_an_admin_edit_of_dna_an_agent_changed_since_is_refused(client, boss, space, agent_factory):
    """The same race when the human edited the DNA too: neither version silently wins. The save is
    refused with a message on the DNA field (reload and edit again), and the agent's DNA stays."""
    dev = agent_factory("dev")
    task = make_task(make_project(space), slug="adm", status="ready", role="dev", dna={"pdsa_ref": "d.md"})
    url = f"/admin/tasks/task/{task.id}/change/"
    data = admin_form(client, url)
    assert dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"notes": "lock the cache"}, format="json").status_code == 200
    data["dna"] = ['{"pdsa_ref": "docs/other.md"}']
    data["title"] = ["A better title"]

    response = client.post(url, data)

    assert response.status_code == 200
    assert "An agent changed this task&#x27;s DNA after the page was loaded" in response.content.decode()
    stored = Task.objects.get(pk=task.pk)
    assert stored.dna == {"pdsa_ref": "d.md", "notes": "lock the cache"} and stored.title != "A better title"
