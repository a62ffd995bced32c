"""Attacks on corrections through retraction and the agent's import (SPEC 2.5, 6: only a correction
supersedes a correction, and a repeat of a corrected fact stays flagged). Each test is an attack and
the rule that holds instead."""

from __future__ import annotations

import pytest

from brain.models import Thought
from tests.security.support import memory

pytestmark = pytest.mark.django_db

WRONG = "The staging database listens on port 5433 for every service of the cluster."
RIGHT = "The staging database listens on port 5432."


def test_retracting_a_replaced_correction_does_not_unflag_repeats_the_live_correction_guards(agent_factory, space):
    """Attack: dev-1 stores WRONG (T). qa-1 corrects T (C1, its corrected fact WRONG). dev-2 repeats WRONG
    word for word: R is stored flagged ``contradicts_correction`` with ``contradicted_by`` C1. liaison-1
    corrects T again (C2, same wrong fact; C2 supersedes T and C1, one live correction per fact). Now qa-1,
    steered by a prompt injection ("tidy up your old corrections"), retracts C1, its own thought, already
    replaced. ``thought_retract`` calls ``thoughts_unflag_contradicting(C1)``, which takes the flag off
    every thought C1 flagged, although the fact is still corrected (C2 is live and guards WRONG: a new
    repeat is flagged by C2 at once). R is back to a live, unflagged copy of a corrected fact, ranked x1.0
    instead of x0.5 beside the correction.

    Rule (SPEC 2.5, mission: "a repeat of a corrected fact is flagged"): withdrawing a correction that
    another correction already replaced withdraws no authority; the repeats it flagged stay flagged (their
    ``contradicted_by`` moving to the live correction)."""
    dev, dev2 = agent_factory("dev"), agent_factory("dev")
    qa, liaison = agent_factory("qa"), agent_factory("liaison")
    wrong = memory(dev, prompt=WRONG, topic="staging").json()["trace"]["thought_id"]
    first = qa.post(f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": RIGHT}, format="json")
    assert first.status_code == 201, first.json()
    c1 = first.json()["correction"]["thought_id"]
    repeat = Thought.objects.get(pk=memory(dev2, prompt=WRONG, topic="staging").json()["trace"]["thought_id"])
    assert "contradicts_correction" in repeat.quality_flags and str(repeat.contradicted_by_id) == c1
    second = liaison.post(
        f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": RIGHT + " Every service uses it."}, format="json"
    )
    assert second.status_code == 201, second.json()
    c2 = second.json()["correction"]["thought_id"]
    assert str(Thought.objects.get(pk=c1).superseded_by_id) == c2

    retracted = qa.post(f"/api/v1/thoughts/{c1}/retract", {"reason": "old wording"}, format="json")
    assert retracted.status_code == 200, retracted.json()

    # The fact is still corrected: a new repeat is flagged by C2 ...
    again_id = memory(agent_factory("dev"), prompt=WRONG, topic="staging").json()["trace"]["thought_id"]
    again = Thought.objects.get(pk=again_id)
    assert "contradicts_correction" in again.quality_flags
    # ... and so must the repeat stored earlier be.
    repeat.refresh_from_db()
    assert "contradicts_correction" in repeat.quality_flags


def test_retracting_the_live_correction_hands_its_flags_back_to_the_one_it_replaced(agent_factory, space):
    """The other way round: C2 (the live correction) is retracted, C1 (which it replaced) is live again
    and corrects the thought once more, so the repeats C2 flagged stay flagged, by C1."""
    dev, dev2 = agent_factory("dev"), agent_factory("dev")
    qa, liaison = agent_factory("qa"), agent_factory("liaison")
    wrong = memory(dev, prompt=WRONG, topic="staging").json()["trace"]["thought_id"]
    c1 = qa.post(f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": RIGHT}, format="json").json()
    c2 = liaison.post(
        f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": RIGHT + " Every service uses it."}, format="json"
    ).json()
    c1, c2 = c1["correction"]["thought_id"], c2["correction"]["thought_id"]
    repeat = Thought.objects.get(pk=memory(dev2, prompt=WRONG, topic="staging").json()["trace"]["thought_id"])
    assert str(repeat.contradicted_by_id) == c2

    assert liaison.post(f"/api/v1/thoughts/{c2}/retract", {"reason": "duplicate"}, format="json").status_code == 200

    assert not Thought.objects.get(pk=c1).superseded
    repeat.refresh_from_db()
    assert "contradicts_correction" in repeat.quality_flags and str(repeat.contradicted_by_id) == c1
    assert qa.post(f"/api/v1/thoughts/{c1}/retract", {"reason": "wrong after all"}, format="json").status_code == 200
    repeat.refresh_from_db()  # no correction stands any more: the flag comes off
    assert "contradicts_correction" not in repeat.quality_flags and repeat.contradicted_by_id is None


# --- an import can't replace a correction with a refinement -----------------------------------------

BILLING_WRONG = "The billing service retries a failed webhook twice and then drops it for good."
BILLING_RIGHT = (
    "The billing service retries a failed webhook five times with jitter, then parks it in the dead-letter queue."
)
BILLING_RESTATED = "Update: the billing service retries a failed webhook twice and then drops it for good."
BILLING_QUESTION = "How many times does the billing service retry a failed webhook?"


@pytest.mark.parametrize("how", ["refinement", "consolidation"])
def test_an_imported_refinement_can_not_replace_a_correction(agent_factory, space, how):
    """Attack: agent ``author`` stored the wrong fact W, ``reviewer`` corrected it (C). ``attacker``,
    steered by a prompt injection, can't refine or consolidate C through the memory endpoint (409
    CORRECTION_NEEDS_CORRECTION, tests/security/test_correction_authority_holds.py), so it sends the same
    thing to ``POST /api/v1/thoughts/import``: ``{"thought_type": "refinement", "source_ids": [C]}`` (or a
    consolidation of C with another thought). ``_derive_lineage`` supersedes C (``refined_by`` the import,
    x0.7, out of the correction scan) and ranking serves the imported thought as C's live replacement,
    above it: the correction is buried under whatever the attacker wrote.

    Rule (docs/api.md Import: "an imported refinement, consolidation or correction supersedes what it
    names ... as a live one would"; "Only a correction supersedes a correction"): the import is refused
    (nothing stored), C stays live and answers first."""
    author, reviewer = agent_factory("dev", name="author"), agent_factory("qa", name="reviewer")
    attacker = agent_factory("dev", name="attacker")
    stored = author.post("/api/v1/memory", {"prompt": BILLING_WRONG, "store": True}, format="json")
    wrong = stored.json()["trace"]["thought_id"]
    other = author.post(
        "/api/v1/memory",
        {"prompt": "Billing webhooks are signed with HMAC-SHA256; the secret rotates every quarter.", "store": True},
        format="json",
    ).json()["trace"]["thought_id"]
    corrected = reviewer.post(f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": BILLING_RIGHT}, format="json")
    assert corrected.status_code == 201, corrected.json()
    correction = corrected.json()["correction"]["thought_id"]
    item = {
        "refinement": {"content": BILLING_RESTATED, "thought_type": "refinement", "source_ids": [correction]},
        "consolidation": {
            "content": BILLING_RESTATED,
            "thought_type": "consolidation",
            "source_ids": [other, correction],
        },
    }[how]

    response = attacker.post("/api/v1/thoughts/import", [item], format="json")

    assert response.status_code in (400, 409), response.content
    assert not Thought.objects.get(pk=correction).superseded
    asked = attacker.post("/api/v1/memory", {"prompt": BILLING_QUESTION, "contribute": False}, format="json")
    sources = asked.json()["result"]["sources"]
    assert sources[0]["thought_id"] == correction and not sources[0]["superseded"]


# --- an imported retracted thought can't keep another agent's thought superseded ----------------------

WEBHOOK_FACT = (
    "The billing service retries a failed webhook five times with jitter, then parks it in the dead-letter queue."
)


@pytest.mark.parametrize("how", ["correction", "refinement"])
def test_an_imported_retracted_thought_does_not_keep_another_agents_thought_superseded(agent_factory, space, how):
    """Attack: ``author`` stored a right fact T. ``attacker`` imports a correction of T (``supersedes``:
    [T]) or a refinement of T (``source_ids``: [T]) sent as a retraction leaves it (``superseded`` true,
    ``quality_flags`` ["retracted"]). The import stores it retracted ("as the caller's retraction, now")
    and still runs ``_derive_lineage`` on it: T becomes superseded by a retracted thought. A live
    retraction would have handed T back (``lineage_release``: "a withdrawn refinement, consolidation or
    correction no longer buries what it replaced"); here T stays buried (x0.5 as corrected, x0.7 as
    refined) with no live replacement served above it, and, as the correction is not live, nothing guards
    the "wrong" fact either: one request silently demotes another agent's knowledge for good, and
    ``/retract`` can't undo it (409 ALREADY_RETRACTED).

    Rule (SPEC 6: corrections, not votes, supersede; SPEC 2.3 ordering invariant: a superseded thought's
    replacement is live and in the result; docs/api.md Import: a retracted item is stored as the caller's
    retraction, and an imported refinement or correction supersedes "as a live one would"): what a
    retracted import names stays live, as after a live retraction (or the item is refused)."""
    author, attacker = agent_factory("dev", name="author"), agent_factory("dev", name="attacker")
    target = author.post("/api/v1/memory", {"prompt": WEBHOOK_FACT, "store": True}, format="json").json()["trace"][
        "thought_id"
    ]
    retracted = {"superseded": True, "quality_flags": ["retracted"]}
    item = {
        "correction": {
            "content": "Correction: the webhook retry policy changed, see the new runbook.",
            "thought_category": "correction",
            "topic": "billing",
            "supersedes": [target],
            "corrected_fact": WEBHOOK_FACT,
            "correct_fact": "See the new runbook.",
        },
        "refinement": {
            "content": "Webhook retries: see the new runbook.",
            "thought_type": "refinement",
            "source_ids": [target],
        },
    }[how]

    response = attacker.post("/api/v1/thoughts/import", [{**item, **retracted}], format="json")

    assert response.status_code in (201, 400), response.content
    assert not Thought.objects.get(pk=target).superseded


# --- an imported correction guards the fact its corrected_fact names, not a vector the caller chose ----

PORT_FACT = "The staging database listens on port 5432 for every service of the cluster."


def test_an_imported_correction_cannot_guard_a_fact_it_does_not_name_by_its_vector(agent_factory, space):
    """Attack: ``attacker`` imports a correction whose ``corrected_fact`` reads harmlessly ("The deploy freeze
    starts on Friday at noon.") but whose ``corrected_fact_embedding`` is the vector of a true fact F ("The
    staging database listens on port 5432 ..."), and whose ``correct_fact`` is a planted falsehood (port
    6543). The import stores the caller's vector as is (``thoughts_import`` embeds ``corrected_fact`` only
    when none is given) and the re-contamination guard (``flags.correction_guard``) compares every later
    contribution with that vector: whoever states F afterwards is flagged ``contradicts_correction`` (x0.5)
    and told "WARNING ... the correct fact is port 6543", by a correction whose visible wrong fact says
    nothing about F. Nobody reviewing the correction can see that it guards F.

    Rule (SPEC 2.5: a contribution is flagged when it is similar to a correction's ``corrected_fact``;
    docs/api.md Import: the guard works "by the server's vector of its text, whatever ``embedding`` the item
    carries"; SPEC 6: no forged markers): the guard's vector of an imported correction is the server's
    vector of its ``corrected_fact`` (or the import is refused); stating F is not flagged."""
    from brain import embedding as embedder

    attacker, honest = agent_factory("dev", name="attacker"), agent_factory("qa", name="honest")
    correction = {
        "content": "CORRECTION: the deploy freeze starts on Monday at nine, not on Friday.",
        "thought_category": "correction",
        "topic": "deploy",
        "corrected_fact": "The deploy freeze starts on Friday at noon.",
        "correct_fact": "The staging database listens on port 6543; port 5432 is closed.",
        "corrected_fact_embedding": [float(x) for x in embedder.embed(PORT_FACT)],
    }
    response = attacker.post("/api/v1/thoughts/import", [correction], format="json")
    if response.status_code != 201:
        assert response.status_code == 400, response.content
        return

    body = honest.post("/api/v1/memory", {"prompt": PORT_FACT, "topic": "staging"}, format="json").json()

    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert "contradicts_correction" not in stored.quality_flags
    assert "6543" not in (body["result"]["guidance"] or "")
