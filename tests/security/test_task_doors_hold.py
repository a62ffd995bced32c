"""The task workflow holds through each of its doors (REST, the humans' pages and admin): a number too long
to read is a form error, a human confirms only the DNA their page showed, and no agent creates a task
past a step its role may not make. Each test states the attack and what happens instead, with the SPEC
section it rests on."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from tasks.models import HumanConfirmation, Task
from tests.tasks_helpers import make_project, make_task
from tests.web_support import ada, admin_form_data  # noqa: F401 - ada: a fixture (pytest finds it by name)

pytestmark = pytest.mark.django_db

PASSING = {"abstract_ref": "docs/abstract.md", "test_pass_count": 5, "test_total_count": 5}

#: One more digit than Python's int-from-text limit (sys.get_int_max_str_digits(), 4300 by default):
#: json.loads raises a plain ValueError for it, not a JSONDecodeError.
HUGE_INT = "1" + "0" * 4300


# --- 1. the human's DNA form: an integer too long to parse is a 500 -------------------------------
@pytest.mark.parametrize("field", ["dna", "original"])
def test_web_dna_form_with_an_overlong_integer_is_refused_not_a_500(client, ada, space, field):  # noqa: F811
    """Attack: on the task page's "Edit DNA" form, post a JSON number of 4,301 digits (in the DNA or in
    the hidden ``original``). Python's json raises a bare ValueError for it ("Exceeds the limit (4300
    digits) for integer string conversion"), not a JSONDecodeError. SPEC 6: bad input gets a 4xx (here:
    the form's refusal as a message), never a 500, and changes nothing."""
    task = make_task(make_project(space), slug="big-int", status="active", role="dev", dna={"note": "x"})
    client.raise_request_exception = False
    body = {"dna": '{"note": "x"}', "original": '{"note": "x"}'}
    body[field] = '{"note": ' + HUGE_INT + "}"
    response = client.post(f"/tasks/{task.slug}/dna/", body)
    assert response.status_code < 500, response.status_code
    assert Task.objects.get(pk=task.pk).dna == {"note": "x"}


def test_admin_task_dna_with_an_overlong_integer_is_a_form_error_not_a_500(client, space):
    """Attack: the same 4,301-digit number in the DNA field of the task's admin change form, whose
    Django JSONField catches only JSONDecodeError. SPEC 5/6: admin for every model; bad input is the
    form again with its error, never a 500, and changes nothing."""
    boss = get_user_model().objects.create_superuser("boss", "boss@example.com")
    task = make_task(make_project(space), slug="admin-big-int", status="backlog", dna={"note": "x"})
    client.force_login(boss)
    client.raise_request_exception = False
    url = f"/admin/tasks/task/{task.id}/change/"
    data = admin_form_data(client.get(url))
    data["dna"] = '{"note": ' + HUGE_INT + "}"
    response = client.post(url, data)
    assert response.status_code < 500, response.status_code
    assert Task.objects.get(pk=task.pk).dna == {"note": "x"}


# --- 2. the human confirms DNA they never saw -------------------------------------------------------
def test_a_confirmation_binds_to_the_dna_the_human_was_shown_not_to_what_an_agent_wrote_since(
    client,
    ada,  # noqa: F811
    space,
    agent_factory,
):
    """Attack: Ada opens the task page of ``ship-it`` (review, abstract docs/abstract.md, 5 of 5 tests)
    and reads it. While the page is open the liaison agent swaps the abstract and the test counts
    (PATCH /dna: 1 of 1, unreviewed.md). Ada clicks "Confirm review → complete" on the page she read.
    Recorded for the DNA in the database at the click, the confirmation would cover the agent's swapped
    DNA, and the liaison would complete the task on it.

    The confirmation's contract (tasks.models.HumanConfirmation: "while its DNA is what the human saw")
    and SPEC 3.4 (a human's confirmation, which an agent can't set): the page sends the digest of the DNA
    it showed, the confirm post is refused as stale and says so, the liaison's transition is 403
    HUMAN_CONFIRMATION_REQUIRED and the task stays in review. (test_task_gates_and_bounds covers a DNA
    change after the click.)"""
    liaison = agent_factory("liaison")
    task = make_task(make_project(space), slug="ship-it", status="review", role="liaison", dna=dict(PASSING))
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert "docs/abstract.md" in page
    form = re.search(r'<form method="post" action="/tasks/ship-it/confirm/".*?</form>', page, re.S).group(0)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    fields.pop("csrfmiddlewaretoken", None)

    swapped = liaison.patch(
        "/api/v1/tasks/ship-it/dna",
        {"abstract_ref": "unreviewed.md", "test_pass_count": 1, "test_total_count": 1},
        format="json",
    )
    assert swapped.status_code == 200, swapped.content
    refused = client.post(f"/tasks/{task.slug}/confirm/", fields, follow=True)  # what the page Ada read posts
    assert "changed after this page was loaded; nothing was confirmed" in refused.content.decode()
    assert not HumanConfirmation.objects.filter(task=task).exists()

    moved = liaison.post("/api/v1/tasks/ship-it/transition", {"to": "complete"}, format="json")
    assert moved.status_code == 403, moved.content
    assert moved.json()["error"]["code"] == "HUMAN_CONFIRMATION_REQUIRED"
    assert Task.objects.get(pk=task.pk).status == "review"


def test_boundary_a_confirmation_of_the_dna_the_page_showed_still_opens_the_gate(client, ada, space, agent_factory):  # noqa: F811
    """Boundary of the test above: with no change between reading and clicking, the same confirm post
    opens the gate and the liaison completes the task."""
    liaison = agent_factory("liaison")
    task = make_task(make_project(space), slug="ship-it", status="review", role="liaison", dna=dict(PASSING))
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    form = re.search(r'<form method="post" action="/tasks/ship-it/confirm/".*?</form>', page, re.S).group(0)
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    fields.pop("csrfmiddlewaretoken", None)
    client.post(f"/tasks/{task.slug}/confirm/", fields)
    assert HumanConfirmation.objects.filter(task=task).count() == 1
    moved = liaison.post("/api/v1/tasks/ship-it/transition", {"to": "complete"}, format="json")
    assert moved.status_code == 200, moved.content


# --- 3. an agent skips a transition its role may not make, by creating the task past it ------------
def test_a_dev_cannot_create_a_task_already_past_backlog_to_pending(agent_factory, space):
    """Attack: SPEC 3.2 lets only liaison, system and pdsa move a task backlog->pending (and every
    transition leaves a marker, SPEC 3.3). A dev agent POSTs /api/v1/tasks with ``"status": "pending"``
    (a field SPEC 5's create does not list): a task in pending would be the step its role may not make,
    done with no marker and no TransitionLog. It is refused (403 ACTOR_NOT_ALLOWED, nothing stored); a
    pdsa agent, an actor of backlog->pending, may create it in pending."""
    dev = agent_factory("dev")
    make_project(space)
    response = dev.post(
        "/api/v1/tasks", {"project": "proj", "slug": "sneaky", "title": "t", "status": "pending"}, format="json"
    )
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "ACTOR_NOT_ALLOWED"
    assert "backlog->pending is for liaison, system, pdsa" in response.json()["error"]["message"]
    assert not Task.objects.filter(slug="sneaky").exists()
    pdsa = agent_factory("pdsa")
    allowed = pdsa.post(
        "/api/v1/tasks", {"project": "proj", "slug": "planned", "title": "t", "status": "pending"}, format="json"
    )
    assert allowed.status_code == 201, allowed.content
    assert Task.objects.get(slug="planned").status == "pending"


def test_a_confirm_post_without_the_pages_dna_digest_confirms_nothing(client, ada, space):  # noqa: F811
    """A confirm post that names no DNA (a hand-made form, a page of before the digest) is a form error
    shown to the human; nothing is confirmed."""
    task = make_task(make_project(space), slug="ship-it", status="review", role="liaison", dna=dict(PASSING))
    response = client.post(f"/tasks/{task.slug}/confirm/", {"to_status": "complete"}, follow=True)
    assert "Confirmation refused" in response.content.decode()
    assert not HumanConfirmation.objects.filter(task=task).exists()


def test_an_import_with_an_overlong_integer_is_a_parse_error(dev, space, fake_embedder):
    """The import's body parser meets the same number: 400 PARSE_ERROR (JSON array) or a bad line (JSON
    Lines), never a 500."""
    body = '[{"content": "a note long enough to keep", "access_count": ' + HUGE_INT + "}]"
    response = dev.post("/api/v1/thoughts/import", data=body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "PARSE_ERROR"
    lines = '{"content": "a note long enough to keep", "access_count": ' + HUGE_INT + "}\n"
    response = dev.post("/api/v1/thoughts/import", data=lines, content_type="application/x-ndjson")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "IMPORT_INVALID"
