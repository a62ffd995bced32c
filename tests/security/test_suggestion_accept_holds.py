"""Attacks on accepting correction suggestions (SPEC 2.5 corrections, 4.5 suggestions, 6 integrity):
what accepting one stores must be what a correction through ``POST /api/v1/thoughts/{id}/correct``
would store, and only while the contradicting statement still stands.

Each test names the attack and the rule that holds.
"""

from __future__ import annotations

import pytest

from brain.choices import SuggestionOrigin, SuggestionStatus
from brain.inputs import PROMPT_MAX_CHARS
from brain.models import CorrectionSuggestion, Thought
from brain.services.suggestions import suggestion_create
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, make_query_log, make_thought, new_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enqueued")]  # scoring jobs only enqueued


def _raised_against_the_fact(space, author, attacker, *, confidence: float = 0.0):
    """The right fact F (``author``'s), the wrong statement S (``attacker``'s) and the suggestion S raised
    against F, as the contradiction detector raises one."""
    fact = make_thought(space, "Staging deploys run migrations before the web workers restart.", agent=author.agent)
    statement = make_thought(
        space, "Staging deploys never run migrations; workers migrate lazily.", agent=attacker.agent
    )
    suggestion, _ = suggestion_create(
        thought=fact,
        statement=statement.content,
        origin=SuggestionOrigin.CONTRADICTION_DETECTOR,
        confidence=confidence,
        agent=attacker.agent,
        contradicting_thought=statement,
    )
    return fact, statement, suggestion


def test_accepting_a_suggestion_with_a_longest_correct_fact_stores_no_thought_past_the_bound(
    agent_factory, space, fake_embedder
):
    """Attack: POST /api/v1/corrections/{id}/accept {"correct_fact": <PROMPT_MAX_CHARS characters>} (the
    longest the body takes), hoping the accepted correction is worded "CORRECTION: " + correct_fact and
    stored PROMPT_MAX_CHARS + 12 characters long, past what every other write path accepts.
    Rule: accept words a correction as /correct does (``correction_default_content``): at most
    PROMPT_MAX_CHARS, the facts cut to fit in the text and kept whole in their own fields."""
    author = agent_factory("dev", name="author")
    other = agent_factory("qa", name="other")
    thought = make_thought(space, "The staging cluster is rebuilt every Sunday night.", agent=author.agent)
    suggestion, _ = suggestion_create(
        thought=thought,
        statement="It is rebuilt on Saturdays.",
        origin=SuggestionOrigin.QUALITY_JUDGE,
        agent=other.agent,
    )
    response = other.post(
        f"/api/v1/corrections/{suggestion.id}/accept", {"correct_fact": "y" * PROMPT_MAX_CHARS}, format="json"
    )
    assert response.status_code in (201, 400), response.content
    assert max((len(t.content) for t in Thought.objects.all()), default=0) <= PROMPT_MAX_CHARS


def test_accepting_a_detector_suggestion_of_a_longest_thought_stores_no_thought_past_the_bound(
    agent_factory, space, fake_embedder
):
    """Attack: the detector raises a suggestion whose statement is a contradicting thought of
    PROMPT_MAX_CHARS characters; POST /api/v1/corrections/{id}/accept {} hopes to store its draft's text,
    "CORRECTION: " + that statement, past the bound.
    Rule: the draft and the accepted correction are worded by ``correction_default_content``, within
    PROMPT_MAX_CHARS."""
    author = agent_factory("dev", name="author")
    other = agent_factory("qa", name="other")
    thought = make_thought(space, "The staging cluster is rebuilt every Sunday night.", agent=author.agent)
    long = make_thought(space, "z" * PROMPT_MAX_CHARS, agent=other.agent)
    suggestion, _ = suggestion_create(
        thought=thought,
        statement=long.content,
        origin=SuggestionOrigin.CONTRADICTION_DETECTOR,
        agent=other.agent,
        contradicting_thought=long,
    )
    response = author.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert response.status_code in (201, 400), response.content
    assert max(len(t.content) for t in Thought.objects.all()) <= PROMPT_MAX_CHARS


def test_a_suggestion_whose_contradicting_statement_was_corrected_can_no_longer_be_accepted(
    agent_factory, space, fake_embedder
):
    """Attack: agent A contributes a wrong statement S; the detector raises a suggestion against B's
    right fact F with S as the statement. A third agent corrects S. Were the suggestion still pending,
    any agent's one-call accept would store S's corrected, wrong text as a live correction superseding F.
    Rule: superseding S (a correction, refinement or consolidation, as retracting it) closes the
    suggestions S raised, status superseded; accepting one answers 409 and F stays live."""
    author = agent_factory("dev", name="author")
    attacker = agent_factory("dev", name="attacker")
    checker = agent_factory("qa", name="checker")
    innocent = agent_factory("pdsa", name="innocent")
    fact, statement, suggestion = _raised_against_the_fact(space, author, attacker, confidence=0.9)
    r = checker.post(
        f"/api/v1/thoughts/{statement.id}/correct",
        {"correct_fact": "Staging deploys do run migrations, before the web workers restart."},
        format="json",
    )
    assert r.status_code == 201, r.content
    suggestion.refresh_from_db()
    assert suggestion.status != SuggestionStatus.PENDING
    r = innocent.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert r.status_code == 409, r.content
    fact.refresh_from_db()
    assert not fact.superseded


def test_accepting_a_suggestion_on_a_correction_guards_the_fact_it_replaces(agent_factory, space, fake_embedder):
    """Attack: agent A is shown correction C1 ("wrong: X, correct: Y"), reports a turn contradicting C1
    with a response repeating X, and the quality loop raises a suggestion on C1. Accepting it would store
    a correction whose guarded wrong fact is C1's whole text, X and Y alike, so the right fact Y is
    flagged as wrong from then on.
    Rule: as POST /api/v1/thoughts/{C1}/correct (``thought_correct_by_id``): the fact a correction of a
    correction replaces is that correction's correct_fact."""
    author = agent_factory("dev", name="author")
    attacker = agent_factory("dev", name="attacker")
    wrong = make_thought(space, "Staging deploys run migrations after the web workers restart.", agent=author.agent)
    r = author.post(
        f"/api/v1/thoughts/{wrong.id}/correct",
        {"correct_fact": "Staging deploys run migrations before the web workers restart."},
        format="json",
    )
    assert r.status_code == 201, r.content
    c1 = Thought.objects.get(pk=r.json()["correction"]["thought_id"])
    session = new_session()
    make_query_log(space, session, [c1], agent=attacker.agent)
    r = attacker.post(
        "/api/v1/turns",
        {
            "session_id": session,
            "turn_id": "t1",
            "user_prompt": "deploy",
            "assistant_response": "Staging deploys run migrations after the web workers restart, always.",
            "contradicted_ids": [str(c1.id)],
        },
        format="json",
    )
    assert r.status_code == 202, r.content
    turn_score(turn_log_id=r.json()["turn_log_id"], judge=ScriptedJudge())
    suggestion = CorrectionSuggestion.objects.get(thought=c1)
    r = attacker.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert r.status_code == 201, r.content
    c2 = Thought.objects.get(pk=r.json()["correction"]["thought_id"])
    assert c2.corrected_fact == c1.correct_fact


def test_a_suggestion_left_pending_on_a_refined_statement_can_not_be_accepted(agent_factory, space, fake_embedder):
    """Attack: the wrong statement S that raised a suggestion against the right fact F is refined (its
    own suggestions closed with it), and a suggestion of S left pending from before that rule is accepted
    in one call, storing S's replaced text as the correct fact over F.
    Rule: accept re-reads S under its locks; a superseded S is 409 CONFLICT and nothing changes."""
    author = agent_factory("dev", name="author")
    attacker = agent_factory("dev", name="attacker")
    innocent = agent_factory("pdsa", name="innocent")
    fact, statement, suggestion = _raised_against_the_fact(space, author, attacker)
    r = attacker.post(
        "/api/v1/memory",
        {"prompt": "Staging deploys run migrations lazily on each worker.", "refines": str(statement.id)},
        format="json",
    )
    assert r.status_code == 200, r.content
    suggestion.refresh_from_db()
    assert suggestion.status == SuggestionStatus.SUPERSEDED
    CorrectionSuggestion.objects.filter(pk=suggestion.pk).update(status=SuggestionStatus.PENDING, resolved_by="")
    thoughts = Thought.objects.count()
    r = innocent.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert r.status_code == 409, r.content
    assert r.json()["error"]["code"] == "CONFLICT" and "correct" in r.json()["error"]["message"]
    assert Thought.objects.count() == thoughts
    fact.refresh_from_db()
    suggestion.refresh_from_db()
    assert not fact.superseded and suggestion.status == SuggestionStatus.PENDING
