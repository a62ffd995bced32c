"""Correction suggestions and corrections across their whole life (SPEC 2.5, 4.5, 6): who resolves a
suggestion and what that resolves, how the author of a contradicted thought can make its reviewers' queue
go quiet, what a correction may say, what accepting stores, and how far the corrections list reaches.

Not repeated here: accept bounds, stale statements and markers (test_suggestion_accept_holds.py,
test_marker_integrity.py), the OWN_THOUGHT dismissal and the floor with the unverified flag
(test_feedback_burial.py), concurrent resolution (test_suggestions_and_highways_hold.py,
test_concurrent_evolution_holds.py), corrections of corrections (test_correction_authority_holds.py).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.management import call_command
from django.utils import timezone

from brain.choices import SuggestionOrigin, SuggestionStatus
from brain.judging.base import Verdict
from brain.models import CorrectionSuggestion, Thought
from brain.services.contradictions import thought_detect_contradictions
from brain.services.suggestions import suggestion_create
from quality.services.rollups import thoughts_flag_unverified
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, make_query_log, make_thought, new_session
from tests.security.support import remember

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enqueued")]  # scoring jobs only enqueued

FACT = "Staging deploys run the database migrations before the web workers restart."
LATER = dt.timedelta(days=15)  # past the 14 days after which a contradiction left pending flags unverified


def reported(client, thought: Thought, *, turn_id: str = "t1", response: str = "Staging deploys do not migrate."):
    """``client``'s session is shown ``thought`` (a memory call's query-log row), then its turn reports it
    contradicted (explicit feedback), scored: what raises a quality-loop suggestion."""
    session = new_session()
    make_query_log(thought.space, session, [thought], agent=client.agent)
    answer = client.post(
        "/api/v1/turns",
        {
            "session_id": session,
            "turn_id": turn_id,
            "user_prompt": "Deploy staging.",
            "assistant_response": response,
            "contradicted_ids": [str(thought.id)],
        },
        format="json",
    )
    assert answer.status_code == 202, answer.content
    turn_score(turn_log_id=answer.json()["turn_log_id"], judge=ScriptedJudge())


def pending_of(thought_id, agent=None):
    found = CorrectionSuggestion.objects.filter(thought_id=thought_id, status=SuggestionStatus.PENDING)
    return found.filter(agent=agent) if agent is not None else found


def refused(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    return response.json()["error"]


# --- what a dismissal resolves ------------------------------------------------------------------------
def test_dismissing_ones_own_suggestion_does_not_resolve_another_agents_pending_one(agent_factory, space):
    """Attack: qa reports the author's thought T contradicted; its suggestion S_qa waits for a reviewer and,
    left unresolved 14 days, would flag T ``unverified``. Mallory (any agent but the author) is shown T,
    reports it contradicted too (raising her own suggestion S_m), and dismisses S_m at once: 200.
    ``quality.services.rollups.thoughts_flag_unverified`` counts a contradiction as resolved when ANY
    suggestion of the thought was dismissed after it, so qa's contradiction is resolved by Mallory's
    dismissal of her own report although S_qa is still pending, unanswered.

    Without the rule: 15 days on, S_qa still pending and T not flagged (0 thoughts flagged); without Mallory's
    round trip, 1 (T). One agent took back its own report and cancelled another's with it.

    Rule (SPEC 4.5 "unresolved after 14 days, the original gets the unverified flag"; docs/agents.md
    "neither superseded nor ITS suggestion dismissed"): a dismissal resolves the contradictions its
    suggestion stands for, not those of another agent's suggestion still pending: T is flagged.
    """
    author = agent_factory("dev", name="author")
    qa, mallory = agent_factory("qa", name="qa-1"), agent_factory("dev", name="mallory")
    target = make_thought(space, FACT, agent=author.agent)
    reported(qa, target)
    reported(mallory, target, turn_id="m1", response="Staging deploys skip the migrations now.")
    (hers,) = pending_of(target.id, mallory.agent)
    response = mallory.post(f"/api/v1/corrections/{hers.id}/dismiss", {"reason": "mine, withdrawn"}, format="json")
    assert response.status_code == 200, response.content

    assert pending_of(target.id, qa.agent).count() == 1  # qa's contradiction is still unanswered
    flagged = thoughts_flag_unverified(now=timezone.now() + LATER)
    assert flagged == 1 and "unverified" in Thought.objects.get(pk=target.pk).quality_flags, (
        "qa's suggestion is pending 15 days on, yet its contradiction counts as resolved"
    )


# --- the author's way around OWN_THOUGHT -----------------------------------------------------------------
@pytest.mark.usefixtures("fake_embedder")
def test_the_author_cannot_close_the_contradictions_of_its_thought_by_refining_it(agent_factory, space):
    """Attack: qa reports mallory's thought L contradicted; its suggestion waits for a reviewer. Mallory may
    not dismiss it (403 OWN_THOUGHT), so she refines L with one word changed (``refines``, her own thought).

    Without the rule: ``lineage_supersede`` closes every pending suggestion of L as ``superseded`` (resolved by
    "colony"): 0 pending suggestions on L or its new version. The reviewers' queue goes quiet at the author's
    word, the one word OWN_THOUGHT refuses.

    Rule (SPEC 4.5, docs/agents.md: "only a correction starts a fact afresh"): the author's refinement of its
    own contradicted thought keeps the contradiction open: its pending suggestion moves to the new version
    and stays pending for a reviewer (the new version also keeps L's scores: test_one_agent_cannot_bury_hold).
    """
    mallory, qa = agent_factory("dev", name="mallory"), agent_factory("qa", name="qa-1")
    claim = remember(mallory, FACT)
    reported(qa, Thought.objects.get(pk=claim))
    (suggestion,) = pending_of(claim)
    assert refused(mallory.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {}, format="json"), 403)["code"] == (
        "OWN_THOUGHT"
    )

    again = remember(mallory, FACT.replace("restart", "come back"), refines=claim)

    suggestion.refresh_from_db()
    assert suggestion.status == SuggestionStatus.PENDING and str(suggestion.thought_id) == again, (
        f"qa's suggestion was closed as {suggestion.status} by the author storing its claim again"
    )
    assert refused(mallory.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {}, format="json"), 403)["code"] == (
        "OWN_THOUGHT"
    )


@pytest.mark.usefixtures("fake_embedder")
@pytest.mark.parametrize("when", ["before", "after"])
def test_the_author_cannot_escape_the_unverified_flag_by_restating_its_claim(agent_factory, space, when):
    """Attack: qa reports mallory's claim L contradicted and nobody answers qa's suggestion. Mallory
    refines L with one word changed, either before the 14 days are up (``before``) or after L was flagged
    ``unverified`` (``after``).

    Without the rule: the new version carries the suggestion but not the flag. The daily job looks for
    unresolved contradictions on the thought itself, and qa's contradiction names L, now superseded:
    15 days on, the new version is never flagged (``before``), or sheds the flag L had (``after``).

    Rule (SPEC 4.5, "unresolved after 14 days, the original gets the unverified flag"): the author's own
    restatement is the claim qa contradicted. It keeps L's flag, and the contradictions raised on L count
    for it until a reviewer dismisses the suggestion that moved to it.
    """
    mallory, qa = agent_factory("dev", name="mallory"), agent_factory("qa", name="qa-1")
    claim = remember(mallory, FACT)
    reported(qa, Thought.objects.get(pk=claim))
    if when == "after":
        assert thoughts_flag_unverified(now=timezone.now() + LATER) == 1
    again = remember(mallory, FACT.replace("restart", "come back"), refines=claim)
    if when == "before":
        assert "unverified" not in Thought.objects.get(pk=again).quality_flags  # the 14 days aren't up yet
        thoughts_flag_unverified(now=timezone.now() + LATER)
    assert "unverified" in Thought.objects.get(pk=again).quality_flags, (
        "the author's restatement of a claim contradicted for 15 days is not flagged unverified"
    )

    (suggestion,) = pending_of(again)
    Thought.objects.filter(pk=again).update(quality_flags=[])
    reviewer = agent_factory("pdsa", name="reviewer")
    response = reviewer.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {"reason": "checked"}, format="json")
    assert response.status_code == 200, response.content
    assert thoughts_flag_unverified(now=timezone.now() + LATER + LATER) == 0  # the reviewer's answer resolves it


# --- what a correction may say ---------------------------------------------------------------------------
@pytest.mark.usefixtures("fake_embedder")
@pytest.mark.parametrize("how", ["correct", "memory", "accept"])
def test_a_correction_that_declares_the_wrong_fact_correct_is_refused(agent_factory, space, how):
    """Attack: mallory "corrects" honest's fact F with ``correct_fact`` equal to F itself (through
    ``POST /thoughts/{id}/correct``, a memory correction, or accepting a suggestion with ``correct_fact`` F).
    Nothing checks the two facts differ (``brain.services.corrections.thought_correct``): F is superseded
    (×0.5, by a correction that says nothing), the guard then treats F's own text as the wrong fact: a copy of
    F another agent stored is flagged ``contradicts_correction`` in the same transaction, and every later
    contribution stating F is flagged and told "this repeats a fact that was corrected ... (wrong: F)".

    Without the rule: 201 (200 for memory), F superseded, the teammate's copy flagged, the correction reading
    "CORRECTION: It is wrong that F Correct: F".

    Rule (SPEC 2.5, SPEC 6 "bad input gets a clear 4xx and changes nothing"): a correction whose
    ``correct_fact`` is its ``corrected_fact`` (spacing and case aside) is a 400 VALIDATION_ERROR naming
    ``correct_fact``; nothing is stored or superseded, nothing flagged.
    """
    honest, mallory = agent_factory("dev", name="honest"), agent_factory("dev", name="mallory")
    fact = remember(honest, FACT)
    copy = remember(agent_factory("qa", name="qa-1"), FACT + " Checked on the last release.")
    same = "  " + FACT.upper() + " "
    if how == "correct":
        response = mallory.post(f"/api/v1/thoughts/{fact}/correct", {"correct_fact": same}, format="json")
    elif how == "memory":
        response = mallory.post(
            "/api/v1/memory",
            {
                "prompt": f"Correction: {FACT}",
                "thought_category": "correction",
                "topic": "deploy",
                "corrected_fact": FACT,
                "correct_fact": same,
                "supersedes": [fact],
            },
            format="json",
        )
    else:
        suggestion, _ = suggestion_create(
            thought=Thought.objects.get(pk=fact),
            statement="Staging deploys never migrate.",
            origin=SuggestionOrigin.QUALITY_JUDGE,
            agent=mallory.agent,
        )
        response = mallory.post(f"/api/v1/corrections/{suggestion.id}/accept", {"correct_fact": same}, format="json")
    error = refused(response, 400)
    assert error["code"] == "VALIDATION_ERROR" and "correct_fact" in error["message"], error
    assert not Thought.objects.filter(thought_category="correction").exists()
    assert not Thought.objects.get(pk=fact).superseded
    assert "contradicts_correction" not in Thought.objects.get(pk=copy).quality_flags


# --- a suggestion with no statement -----------------------------------------------------------------------
@pytest.mark.usefixtures("fake_embedder")
def test_a_suggestion_without_a_statement_is_not_accepted_with_colonys_note_as_the_fact(agent_factory, space):
    """Attack: mallory's session is shown honest's fact F; her turn reports F contradicted with an empty
    ``assistant_response`` (allowed). ``quality.services.scoring._raise_suggestion`` has no sentence to quote
    and writes Colony's note "mallory marked this thought as contradicted in turn t1 without a statement."
    as the suggestion's statement AND as its draft's ``correct_fact``. The memory answer asks agents to
    "accept or dismiss" it; one accept with an empty body (the API's, or a human's Accept button with the
    correct-fact box left empty) stores a live correction whose correct fact is that note, superseding F.

    Without the rule: accept {} is 201; F superseded; the correction reads "CORRECTION: It is wrong that <F> Correct:
    mallory marked this thought as contradicted in turn t1 without a statement."

    Rule (SPEC 4.5: the suggestion carries "the contradicting statement, draft correction payload"; SPEC 6):
    a suggestion without a statement has no correct fact to store: accepting it without a ``correct_fact``
    is a 400 VALIDATION_ERROR naming ``correct_fact`` and changes nothing; its draft offers no such fact.
    """
    honest, mallory, reviewer = (agent_factory(role, name=name) for role, name in
                                 (("dev", "honest"), ("dev", "mallory"), ("qa", "reviewer")))  # fmt: skip
    fact = Thought.objects.get(pk=remember(honest, FACT))
    reported(mallory, fact, response="")
    (suggestion,) = pending_of(fact.id)
    assert "without a statement" in suggestion.statement

    response = reviewer.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    error = refused(response, 400)
    assert "correct_fact" in error["message"], error
    fact.refresh_from_db()
    assert not fact.superseded
    assert "without a statement" not in json.dumps(suggestion.draft.get("correct_fact", ""))


# --- a pending suggestion on a thought already corrected --------------------------------------------------
def test_accepting_a_restored_pending_suggestion_of_a_corrected_thought_keeps_the_live_correction(
    agent_factory, space, tmp_path
):
    """Attack: a Colony export handed to the operator (``manage.py brain import``) carries a ``pending``
    correction suggestion on thought T, which a live correction C already superseded (the export may predate
    the correction's import, or be written by hand). ``suggestions_import`` stores it pending as it is, and
    ``suggestion_accept`` checks only that the suggestion is pending and that its contradicting statement
    stands, not the thought it corrects: one accept ({}), by any agent, stores the stale statement as the
    correct fact and, through ``corrections_replaced``, supersedes C, the live correction of the fact.

    Without the rule: accept is 201; C superseded by the new correction, whose correct_fact is the old statement.

    Rule (SPEC 2.5: one live correction per fact; SPEC 4.5: a suggestion whose thought was superseded is
    closed): accepting a suggestion of a superseded thought is a 409 CONFLICT and changes nothing (and an
    import closes such a suggestion as ``superseded``, as ``suggestions_close_superseded`` does live).
    """
    dev = agent_factory("dev", name="dev-1")
    target = make_thought(space, FACT)
    response = dev.post(
        f"/api/v1/thoughts/{target.id}/correct",
        {"correct_fact": "Staging deploys restart the workers first and migrate afterwards."},
        format="json",
    )
    assert response.status_code == 201, response.content
    live = response.json()["correction"]["thought_id"]
    row = {
        "kind": "correction_suggestion",
        "thought": str(target.id),
        "status": "pending",
        "statement": "Staging deploys never run migrations.",
        "origin": "quality_judge",
        "confidence": 0.9,
    }
    path = tmp_path / "suggestion.jsonl"
    header = {"kind": "header", "format": "colony-export", "version": 1}
    path.write_text(json.dumps(header) + "\n" + json.dumps(row) + "\n")
    call_command("brain", "import", str(path), "--no-progress")

    for suggestion in CorrectionSuggestion.objects.filter(status=SuggestionStatus.PENDING):
        accepted = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
        assert refused(accepted, 409)["code"] == "CONFLICT"
    assert not Thought.objects.get(pk=live).superseded, "the live correction was replaced by a stale statement"
    assert Thought.objects.filter(thought_category="correction").count() == 1


# --- how many pending suggestions one agent raises against one thought --------------------------------------
class _AlwaysContradicts:
    name = "always"

    def contradicts(self, a, b):
        return Verdict(verdict=True, confidence=0.9, reason="contradiction")


def test_one_agents_contradictions_of_one_thought_hold_one_pending_suggestion(agent_factory, space, thought_factory):
    """Attack: mallory stores 20 notes that each contradict honest's thought T in other words. The detector
    (``brain.services.contradictions.thought_detect_contradictions``) raises one pending suggestion per
    contradicting statement (``suggestion_create`` dedups only an identical statement), so T carries 20
    pending suggestions, all mallory's. The quality loop bounds the same thing to one pending suggestion per
    agent and thought (``scoring._raise_suggestion``); the detector has no bound. The humans' quality
    dashboard lists the 20 newest pending suggestions of the space and the thought page 50: mallory's notes
    push every teammate's pending suggestion off the dashboard.

    Without the rule: 20 pending suggestions on T from one agent; the dashboard's 20 are all mallory's.

    Rule (SPEC 4.5; SPEC 6 "no one agent can bury", "every number is bounded"): one agent holds at most one
    pending suggestion per thought, whichever loop raised it (a later contradiction of the same agent
    updates it or is dropped), so the teammate's suggestion stays on the dashboard.
    """
    from web.selectors import suggestion_list_pending

    honest, mallory, qa = (agent_factory(role, name=name) for role, name in
                           (("dev", "honest"), ("dev", "mallory"), ("qa", "qa-1")))  # fmt: skip
    target = thought_factory(FACT, topic="deploy", agent=honest.agent)
    other = thought_factory("The CI runs the linters before the tests.", topic="ci", agent=honest.agent)
    suggestion_create(thought=other, statement="The CI runs the tests first.", origin="quality_judge", agent=qa.agent)
    for n in range(20):
        note = thought_factory(f"Staging deploys never migrate first, note {n}.", topic="deploy", agent=mallory.agent)
        thought_detect_contradictions(thought_id=str(note.id), judge=_AlwaysContradicts())

    raised = pending_of(target.id, mallory.agent).count()
    assert raised <= 1, f"one agent holds {raised} pending suggestions against one thought"
    shown = suggestion_list_pending(space=space, limit=20)
    assert any(s.thought_id == other.id for s in shown), "the teammate's suggestion is off the dashboard"


# --- the corrections list ---------------------------------------------------------------------------------
def test_the_corrections_list_pages_past_its_limit(agent_factory, space):
    """Attack (or just a busy space): more pending suggestions than ``GET /api/v1/corrections`` serves in
    one page (``limit`` at most 200). The list (``brain.apis.corrections.CorrectionListApi``) answers the
    newest 200 with ``count`` = the page's length and no ``next_cursor``, and refuses ``cursor``: the older
    ones are out of every agent's reach (and of the MCP tool ``corrections_pending``), so one agent's 200
    fresh suggestions hide every other pending one from the API for good.

    Without the rule: 205 pending suggestions; the page holds 200, ``count`` 200, no ``next_cursor``; the 5 oldest
    are never listed.

    Rule (docs/api.md "Paging": every list answers one page, ``count`` says how many rows match,
    ``next_cursor`` goes back as ``cursor``): the list pages with a cursor, and every pending suggestion is
    reachable.
    """
    dev = agent_factory("dev", name="dev-1")
    target = make_thought(space, FACT)
    now = timezone.now()
    CorrectionSuggestion.objects.bulk_create(
        CorrectionSuggestion(
            space=space,
            thought=target,
            statement=f"Statement {n}.",
            origin=SuggestionOrigin.QUALITY_JUDGE,
            created_at=now - dt.timedelta(minutes=n),
        )
        for n in range(205)
    )
    oldest = str(CorrectionSuggestion.objects.order_by("created_at").first().id)
    body = dev.get("/api/v1/corrections", {"limit": 200}).json()
    assert len(body["results"]) == 200
    assert body["count"] == 205, f"count is {body['count']}, the page's length"
    cursor = body.get("next_cursor")
    assert cursor, f"no next_cursor: {sorted(body)}"
    rest = dev.get("/api/v1/corrections", {"limit": 200, "cursor": cursor})
    assert rest.status_code == 200, rest.content[:300]
    assert oldest in {r["suggestion_id"] for r in rest.json()["results"]}
