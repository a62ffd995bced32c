"""Who may move a task, and what a move may carry: attacks on the task workflow's authority (SPEC 3.2-3.4).

Each test is an attack by an agent (possibly steered by a prompt injection) or a gap in what a human is
shown before their "yes" counts; it fails while the attack succeeds.
"""

from __future__ import annotations

import pytest

from api.errors import ApplicationError
from tasks.models import Task
from tasks.services.tasks import task_update_dna
from tasks.services.transitions import task_transition
from tests import web_support
from tests.tasks_helpers import contribute, make_agent, make_project, make_task, query_brain

ada = web_support.ada  # the logged-in human fixture, defined once for the web tests

pytestmark = pytest.mark.django_db

#: DNA a human gate is given on, with values an agent chose and the human must read before saying yes.
GATED_DNA = {"abstract_ref": "docs/abstract-ZX81-unreviewed.md", "test_pass_count": 7, "test_total_count": 7}


# --- 1. the board's card confirms a human gate on DNA it never shows --------------------------------
@pytest.mark.parametrize(
    ("status", "role", "gate", "action"),
    [
        ("review", "liaison", "complete", "/confirm/"),  # the confirm button of review -> complete
        ("approval", "liaison", "approved", "/transition/"),  # a human's own move through the gate
    ],
    ids=["confirm-review-complete", "move-approval-approved"],
)
def test_the_boards_move_panel_shows_the_dna_a_human_gate_is_given_on(client, ada, space, status, role, gate, action):
    """Attack: the liaison agent writes the abstract and the test counts it wants approved, then waits for
    a human to open the card's "Move…" panel on the board (GET /tasks/<slug>/moves/). The panel offers
    "Confirm review → complete" (or "Move to approved") with the digest of the DNA as it is now, but the
    card and the panel show none of that DNA: no abstract_ref, no test counts. One click records a
    confirmation bound to DNA the human never saw (without the rule: the panel's HTML holds the confirm form and
    the digest, and neither "docs/abstract-ZX81-unreviewed.md" nor "7"). task_confirm_human's own rule is
    "a human never confirms DNA they have not seen"; the task page keeps it, the board does not.

    Rule: a panel that offers a human-gated step shows the DNA it is given on (at least the keys the rule
    reads), or offers no such button and links to the task page where the DNA is shown."""
    make_task(make_project(space), slug="ship-it", status=status, role=role, dna=dict(GATED_DNA))

    body = client.get("/tasks/ship-it/moves/").content.decode()

    offers_gate = f'action="/tasks/ship-it{action}"' in body and f'value="{gate}"' in body
    if offers_gate:
        assert GATED_DNA["abstract_ref"] in body, "the panel offers the gate without showing the DNA it binds"
        assert "test_pass_count" in body and "test_total_count" in body, body
    else:
        assert 'href="/tasks/ship-it/"' in body, "no gate offered and no way to the task page"


# --- 2. one contribution is the hand-off evidence of every task the agent holds ---------------------
def test_one_contribution_is_the_hand_off_evidence_of_one_task_only(space):
    """Attack: a dev holds three active tasks, contributes one thought (about the first, or about
    nothing in particular) and puts the same id into memory_contribution_id of all three. The gate
    (tasks.services.gates.memory_contribution_check) checks only author, time and category, so all
    three go to review on that one thought (without the rule: 3 of 3 handed off). The seed's protocol is "contribute
    the key learning of this task, then hand off": two tasks leave no trace of what was learned in them.

    Rule: a thought opens the hand-off gate of one task: naming one that already served another task's
    hand-off is refused (409 MEMORY_NOT_VERIFIED) and the task stays active."""
    dev = make_agent(space, "dev")
    project = make_project(space)
    tasks = [make_task(project, status="active", role="dev") for _ in range(3)]
    thought = contribute(dev, "Learned: the importer needs a lock around the manifest cache, else two runs race.")

    handed_off = 0
    for task in tasks:
        task_update_dna(task=task, patch={"memory_contribution_id": thought})
        try:
            task_transition(task=task, to="review", agent=dev)
        except ApplicationError as exc:
            assert exc.code == "MEMORY_NOT_VERIFIED", exc.message
        else:
            handed_off += 1

    assert handed_off == 1, f"{handed_off} tasks handed off on one contribution"
    assert [Task.objects.get(pk=t.pk).status for t in tasks[1:]] == ["active", "active"]


# --- 4. a required reference that is blank or not text opens the gate -------------------------------
@pytest.mark.parametrize("value", ["   ", False, 0], ids=["blank", "false", "zero"])
@pytest.mark.parametrize(
    ("status", "to", "field"),
    [("ready", "active", "pdsa_ref"), ("active", "blocked", "blocked_reason")],
    ids=["claim-needs-pdsa_ref", "block-needs-blocked_reason"],
)
def test_a_required_dna_reference_that_is_blank_or_not_text_does_not_open_the_gate(
    space, agent_factory, value, status, to, field
):
    """Attack: a rule requires a DNA reference (``pdsa_ref`` for a dev's claim: the design it builds;
    ``blocked_reason`` for a block: what the others wait for). The agent sends ``"   "``, ``false`` or
    ``0``: evaluation's ``_present`` counts anything but None, "", [] and {} as present, so the claim is
    made with no design and the block with no reason (without the rule: 200 for all six; the board then shows
    "Blocked: " followed by spaces, and the in-flight list a blocked task nobody can explain).

    Rule: a required reference is a string with visible characters; anything else is refused as
    missing (409 MISSING_DNA, or 400 INVALID_DNA when written) and the task does not move."""
    dev = agent_factory("dev")
    make_task(make_project(space), slug="gated", status=status, role="dev")
    patch = {field: value}
    if to == "active":
        patch["memory_query_session"] = query_brain(dev.agent)
    written = dev.patch("/api/v1/tasks/gated/dna", patch, format="json")
    if written.status_code == 400:  # refused where it is written: fine
        assert written.json()["error"]["code"] == "INVALID_DNA"
        return
    response = dev.post("/api/v1/tasks/gated/transition", {"to": to}, format="json")

    assert response.status_code in (400, 409), response.content
    assert response.json()["error"]["code"] in ("MISSING_DNA", "INVALID_DNA")
    assert Task.objects.get(slug="gated").status == status


# --- 5. a dependency that can never complete --------------------------------------------------------
def test_a_task_cannot_be_created_depending_on_a_cancelled_task(space, agent_factory):
    """Attack: an agent creates a task whose ``depends_on`` names a cancelled task. A cancelled task never
    completes (cancelled is terminal), so pending->ready (all depends_on complete) can never pass, and
    links are set only at creation (depends_on is a protected DNA key): the task is wedged for good and
    only an admin can free it (without the rule: 201, depends_on shows {"slug": "dropped", "status": "cancelled"}).

    Rule: creating a task that depends on a cancelled task is refused (409, naming it) and nothing is
    stored."""
    liaison = agent_factory("liaison")
    make_task(make_project(space), slug="dropped", status="cancelled", role="liaison")
    body = {"project": "proj", "slug": "follow-up", "title": "Follow-up", "depends_on": ["dropped"]}

    response = liaison.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 409, response.content
    assert "dropped" in response.json()["error"]["message"]
    assert not Task.objects.filter(slug="follow-up").exists()
