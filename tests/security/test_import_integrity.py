"""``POST /api/v1/thoughts/import`` restores the caller's own thoughts and nothing more (SPEC 6: "who
wrote a thought and when come from the token and the clock, never from the body; every counter,
weight and score stays within the range its formula allows; only the operator's CLI restores other
agents' thoughts, dates and markers from an export"). Each test is an attack by an agent through its
own token: a date, a lineage pointer, a copy of a corrected fact, an unbounded field or another
agent's access written through the import, and the rule that stops it.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid

import pytest
from django.utils import timezone

from brain.models import Thought
from brain.services.suggestions import suggestion_create
from brain.transfer import serializers as transfer
from tests.security.support import import_post as post
from tests.security.support import import_refusal
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db


def imported(response) -> list[str]:
    assert response.status_code == 201, response.content[:2000]
    return response.json()["ids"]


#: The 400 IMPORT_INVALID message for the first line whose field starts with the one given.
refused = functools.partial(import_refusal, field_prefix=True)


def search(client, prompt: str) -> dict:
    response = client.get("/api/v1/memory", {"prompt": prompt, "contribute": "false", "limit": 10})
    assert response.status_code == 200, response.content[:2000]
    return response.json()["result"]


# --- dates ------------------------------------------------------------------------------------------


def test_import_cannot_date_when_another_agents_thought_was_superseded(
    agent_factory, dev, thought_factory, fake_embedder
):
    """Attack: import a refinement of another agent's live thought, dated 2001. Refining it is allowed
    (as a live ``refines`` is), but the time it was superseded is a date of the *other* agent's
    thought, and the quality loop's discovery rate reads it ("superseded before the contradiction"
    counts as resolved).

    Rule: the thoughts an import supersedes get the server's clock as ``superseded_at``, as a live
    refinement's ``Coalesce(superseded_at, Now())``. SPEC 6: when comes from the clock, never the body."""
    lead = agent_factory("liaison", name="lead-1")
    theirs = thought_factory("The staging cluster runs three web workers behind the proxy.", agent=lead.agent)
    before = timezone.now()
    imported(
        post(
            dev,
            [
                {
                    "content": "The staging cluster runs four web workers behind the proxy since the resize.",
                    "thought_type": "refinement",
                    "source_ids": [str(theirs.pk)],
                    "created_at": "2001-01-01T00:00:00Z",
                }
            ],
        )
    )
    theirs.refresh_from_db()
    assert theirs.superseded
    assert theirs.superseded_at >= before - dt.timedelta(seconds=5), theirs.superseded_at


def test_a_future_dated_import_does_not_count_as_a_contribution_of_a_later_phase(
    agent_factory, dev, space, fake_embedder
):
    """Attack: before claiming a task, import a one-word note dated a few minutes ahead (inside the
    clock skew an import tolerates). Claim the task (ready->active), name the note in DNA as
    memory_contribution_id and hand off (active->review). The gate compares the thought's
    ``created_at`` with the phase start, so a note dated after its storing would pass as a
    contribution "during the active phase".

    Rule: an import never dates a thought after the moment it is stored (a time within the clock skew
    is stored as now), so the gate refuses it: 409 MEMORY_NOT_VERIFIED. SPEC 3.2: "memory_contribution_id
    must name a thought this agent contributed during the active phase"; SPEC 6."""
    task = make_task(make_project(space, "gates"), slug="gate-1", status="ready", role="dev", dna={"pdsa_ref": "d.md"})
    ahead = (timezone.now() + transfer.CLOCK_SKEW - dt.timedelta(seconds=30)).isoformat()
    [note] = imported(post(dev, [{"content": "ok", "created_at": ahead}]))
    assert Thought.objects.get(pk=note).created_at <= timezone.now()

    query = dev.get("/api/v1/memory", {"prompt": "what do we know about gate-1", "contribute": "false"})
    session = query.json()["trace"]["session_id"]
    assert (
        dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"memory_query_session": session}, format="json").status_code == 200
    )
    claimed = dev.post(f"/api/v1/tasks/{task.slug}/transition", {"to": "active", "summary": "claim"}, format="json")
    assert claimed.status_code == 200, claimed.json()
    assert (
        dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"memory_contribution_id": note}, format="json").status_code == 200
    )

    handed = dev.post(f"/api/v1/tasks/{task.slug}/transition", {"to": "review", "summary": "done"}, format="json")
    assert handed.status_code == 409, handed.json()
    assert handed.json()["error"]["code"] == "MEMORY_NOT_VERIFIED"


# --- lineage ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("pointer", ["refined_by", "superseded_by"])
def test_an_imported_lineage_pointer_cannot_pull_an_unrelated_thought_into_answers(
    agent_factory, dev, thought_factory, fake_embedder, pointer
):
    """Attack: import a decoy whose text matches a common question, marked ``superseded`` with
    ``refined_by`` (or ``superseded_by``) naming someone else's unrelated live thought. Retrieval
    follows the pointer: every search that hits the decoy would fetch the named thought as its "live
    replacement" at the decoy's score, making any thought of the space, under its author's name, the
    answer to any question.

    Rule: an import's ``refined_by`` may only name a refinement or consolidation of the batch whose
    ``source_ids`` list the item, and ``superseded_by`` a correction of the batch whose ``supersedes``
    list it (the pointer the import derives anyway); anything else is a 400 naming the field, nothing
    stored. SPEC 6 (an agent's import restores its own thoughts), SPEC 2.4 (refined_by is the thought
    that refines it)."""
    lead = agent_factory("liaison", name="lead-1")
    unrelated = thought_factory(
        "The office coffee machine on the third floor is descaled every Friday afternoon.", agent=lead.agent
    )
    question = "how do deploys run the database migrations before restarting the web workers"
    refused(post(dev, [{"content": question, "superseded": True, pointer: str(unrelated.pk)}]), pointer)
    assert not Thought.objects.filter(content=question).exists()

    # The pointer an item of the batch earns by superseding the decoy is accepted.
    decoy, newer = uuid.uuid4(), uuid.uuid4()
    if pointer == "refined_by":
        superseding = {"thought_type": "refinement", "source_ids": [str(decoy)]}
    else:
        superseding = {"thought_category": "correction", "topic": "deploy", "corrected_fact": "a", "correct_fact": "b"}
        superseding["supersedes"] = [str(decoy)]
    response = post(
        dev,
        [
            {"id": str(decoy), "content": question, "superseded": True, pointer: str(newer)},
            {"id": str(newer), "content": "Deploys run the migrations first, then restart the workers.", **superseding},
        ],
    )
    assert response.status_code == 201, response.content[:2000]
    stored = response.json()["id_map"]
    assert str(getattr(Thought.objects.get(pk=stored[str(decoy)]), f"{pointer}_id")) == stored[str(newer)]
    assert Thought.objects.get(pk=unrelated.pk).superseded is False


# --- corrections through the import ---------------------------------------------------------------


def correct(client, thought_id, wrong: str, right: str) -> dict:
    response = client.post(
        f"/api/v1/thoughts/{thought_id}/correct",
        {"correct_fact": right, "corrected_fact": wrong, "topic": "billing"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()["correction"]


def test_an_imported_copy_of_a_corrected_fact_is_flagged_like_a_contribution(
    agent_factory, dev, thought_factory, fake_embedder
):
    """Attack: a fact was corrected; an agent steered to re-assert it imports the wrong fact word for
    word, unflagged, ranked like any live thought, so the corrected fact creeps back.

    Rule: an imported thought that repeats a correction's corrected fact (by the server's vector of its
    content, whatever vector the item carries) is flagged ``contradicts_correction`` with
    ``contradicted_by`` the correction, as a memory contribution is. SPEC 2.5: "When any later
    contribution is similar (> 0.85) to a correction's corrected_fact, it is flagged
    contradicts_correction"."""
    from tests.conftest import fake_vector

    qa = agent_factory("qa", name="qa-1")
    wrong = "Invoices are generated by the nightly billing cron at midnight UTC every day."
    old = thought_factory(wrong, topic="billing")
    correction = correct(qa, old.pk, wrong, "Invoices are generated by the billing worker when an order ships.")

    far = fake_vector("something else entirely, far from the wrong fact")
    ids = imported(post(dev, [{"content": wrong, "topic": "billing"}, {"content": wrong, "embedding": far}]))
    for thought in Thought.objects.filter(pk__in=ids):
        assert "contradicts_correction" in thought.quality_flags, thought.quality_flags
        assert str(thought.contradicted_by_id) == correction["thought_id"]


def test_an_imported_correction_of_a_corrected_thought_leaves_one_live_correction(
    agent_factory, dev, thought_factory, fake_embedder
):
    """Attack: a thought was corrected (C1). An agent imports another correction naming the same
    thought. Repointing only the thought's ``superseded_by`` would leave C1 live: two live corrections
    of one fact answering with different facts, one unreachable from the thought it corrects.

    Rule: as a live correction (``thought_correct``), the imported one supersedes the live correction
    it replaces and lists it in its ``supersedes``: one correction per fact stays live. SPEC 2.5."""
    qa = agent_factory("qa", name="qa-1")
    wrong = "The public API rate limit is 100 requests per minute per token."
    old = thought_factory(wrong, topic="billing")
    first = correct(qa, old.pk, wrong, "The public API rate limit is 300 requests per minute per token.")
    [second] = imported(
        post(
            dev,
            [
                {
                    "content": "CORRECTION: the public API rate limit is 50 requests per minute per token.",
                    "thought_category": "correction",
                    "topic": "billing",
                    "corrected_fact": wrong,
                    "correct_fact": "The public API rate limit is 50 requests per minute per token.",
                    "supersedes": [str(old.pk)],
                }
            ],
        )
    )
    c1 = Thought.objects.get(pk=first["thought_id"])
    assert c1.superseded and str(c1.superseded_by_id) == second, (c1.superseded, c1.superseded_by_id)
    assert c1.pk in Thought.objects.get(pk=second).supersedes


def test_an_imported_supersession_closes_the_thoughts_pending_suggestions(
    agent_factory, dev, thought_factory, fake_embedder
):
    """Attack: import a refinement of a thought that has a pending correction suggestion. Left pending,
    the suggestion keeps being pushed in every ``pending_corrections`` and can still be accepted,
    correcting a thought nobody is served any more over the thought that replaced it.

    Rule: an import that supersedes a thought closes its pending suggestions (status ``superseded``), as
    a live refinement or correction does (``suggestions_close_superseded``). SPEC 4.5."""
    qa = agent_factory("qa", name="qa-1")
    old = thought_factory("The search index is rebuilt every night at 03:00 UTC.")
    statement = thought_factory("The search index is rebuilt every hour now.", agent=qa.agent)
    suggestion, _ = suggestion_create(
        thought=old, statement=statement.content, origin="contradiction_detector", contradicting_thought=statement
    )
    imported(
        post(
            dev,
            [
                {
                    "content": "The search index is rebuilt every hour since the November change.",
                    "thought_type": "refinement",
                    "source_ids": [str(old.pk)],
                }
            ],
        )
    )
    suggestion.refresh_from_db()
    assert suggestion.status == "superseded", suggestion.status


# --- bounds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("corrected_fact", "w" * 5001),
        ("correct_fact", "r" * 5001),
        ("alternatives_considered", "a" * 5001),
        ("tags", [f"t{n}" for n in range(21)]),
        ("source_ref", {"type": "url", "value": "v" * 501}),
        ("source_ref", {"type": "anything", "value": "x"}),
        ("source_ref", {"type": "task", "value": {"nested": ["not", "a", "string"]}}),
    ],
)
def test_import_bounds_every_field_as_a_memory_call_does(dev, space, fake_embedder, field, value):
    """Attack: a ``corrected_fact``, ``correct_fact`` or ``alternatives_considered`` as long as the body
    limit allows (megabytes), any number of tags, a ``source_ref`` of any shape and size. A correction
    imported with a megabyte ``correct_fact`` would be quoted whole in the warning of every later
    contribution that repeats its wrong fact.

    Rule: the memory endpoint's bounds (``brain.inputs.MemoryInputSerializer``: its length of the three
    texts, MAX_TAGS tags, ``SourceRefSerializer``); beyond them a 400 IMPORT_INVALID naming the field,
    nothing stored. SPEC 6: "every number and string is bounded"."""
    item = {"content": "bounded like a memory call", field: value}
    if field in ("corrected_fact", "correct_fact"):
        item |= {"thought_category": "correction", "topic": "t"}
    refused(post(dev, [item]), field)
    assert not Thought.objects.filter(space=space).exists()


# --- counters ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("readers", [["ghost-a", "ghost-b", "ghost-c"], ["dev-1", "qa-1"], ["qa-1"]])
def test_one_agent_alone_cannot_import_a_highway(agent_factory, dev, space, fake_embedder, readers):
    """Attack: import a note with ``access_count`` 3 and ``accessed_by`` naming agents that never read
    it (names no agent has, or colleagues of the space). At once it is a "highway" (SPEC 2.6:
    access_count >= 3 by >= 2 distinct agents) and every memory answer near it advertises it in
    ``highways_nearby`` as the team's most travelled knowledge.

    Rule: another agent's access is recorded by its own retrievals only, so an import's ``accessed_by``
    is left out or the caller's own name (400 naming the field otherwise, nothing stored); the caller
    alone is one agent, no highway. SPEC 6: who did something comes from the token."""
    agent_factory("qa", name="qa-1")
    text = "Rollbacks of the billing service use the blue green switch in the deploy console."
    message = refused(post(dev, [{"content": text, "access_count": 3, "accessed_by": readers}]), "accessed_by")
    assert "your own agent name" in message
    assert not Thought.objects.filter(space=space).exists()

    imported(post(dev, [{"content": text, "access_count": 3, "accessed_by": ["dev-1"]}]))
    highways = search(dev, "how do rollbacks of the billing service work")["highways_nearby"]
    assert highways == [], highways  # its own accesses: one agent


def test_an_import_dates_no_snapshot_after_today_and_fits_a_lengthening_topic(dev, space, fake_embedder):
    """Attack: an imported state snapshot with ``temporal_scope`` 9999-12-31 would outrank its topic's later
    snapshots for ever (newest scope first), and a ``topic`` of 200 × "İ" lower-cases to 400 characters,
    more than the column holds. Rule: a scope is today or earlier, as on the memory endpoint (400 naming
    the field, nothing stored); a topic is stored lower-cased and cut to its 200 characters."""
    snapshot = {"content": "Release state: frozen.", "thought_category": "state_snapshot", "topic": "release"}
    assert "no later than" in refused(post(dev, [{**snapshot, "temporal_scope": "9999-12-31"}]), "temporal_scope")
    assert not Thought.objects.filter(space=space).exists()

    (thought_id,) = imported(post(dev, [{**snapshot, "topic": "\u0130" * 200}]))
    assert len(Thought.objects.get(pk=thought_id).topic) == 200
