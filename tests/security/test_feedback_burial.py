"""No one agent can bury shared knowledge (SPEC 6, 4.4, 4.5): ``POST /api/v1/turns`` feedback counts
only for what a memory call of the caller's own session returned, a session belongs to the agent that
used it first, one agent's contradictions can't take a thought below ``SINGLE_AGENT_FLOOR`` and its uses
can't lift it above ``SINGLE_AGENT_CEILING``; a contradiction still raises a pending correction, and
accepting it supersedes."""

from __future__ import annotations

import pytest

from brain.choices import SuggestionStatus
from brain.models import CorrectionSuggestion, Thought
from quality import formulas, selectors
from quality.models import ConfidenceChange, TurnItem, TurnLog
from quality.selectors import JudgeTrust
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, make_query_log, make_thought, new_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enqueued")]  # scoring jobs only enqueued

FACT = "Staging deploys run the database migrations before the web workers restart."


def turn(client, session_id: str, turn_id: str, **feedback):
    return client.post(
        "/api/v1/turns",
        {
            "session_id": session_id,
            "turn_id": turn_id,
            "user_prompt": "Deploy staging.",
            "assistant_response": "Staging deploys do not run the migrations first; I restarted the workers.",
            **feedback,
        },
        format="json",
    )


def scored_turn(client, session_id: str, turn_id: str, **feedback) -> None:
    response = turn(client, session_id, turn_id, **feedback)
    assert response.status_code == 202, response.json()
    turn_score(turn_log_id=response.json()["turn_log_id"], judge=ScriptedJudge())


def refused(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    return response.json()["error"]["message"]


@pytest.mark.parametrize("field", ["contradicted_ids", "used_ids", "injected_ids"])
def test_feedback_on_a_thought_never_shown_to_the_agent_is_refused(dev, space, field):
    # injected_ids too: a trusted judge's verdicts on an item move its thought's EMAs and may raise a
    # correction suggestion, so naming a never-shown thought as injected was feedback by another door.
    target = make_thought(space, FACT)
    shown = make_thought(space, "The CI runs the linters before the tests.")
    session = new_session()
    make_query_log(space, session, [shown], agent=dev.agent)
    for n in range(3):
        message = refused(turn(dev, session, f"t{n}", **{field: [str(target.id)]}), 400, "VALIDATION_ERROR")
        assert str(target.id) in message and str(shown.id) not in message
    assert not TurnLog.objects.exists()
    target.refresh_from_db()
    assert target.effective_confidence == 1.0 and target.contradiction_score is None


def test_what_a_session_was_shown_is_what_its_newest_memory_calls_returned(dev, space):
    """A thought returned only before the session's newest SESSION_CALLS_READ memory calls is not one the
    turn may name (the check reads those rows, not the whole session); one they returned is."""
    old, recent = make_thought(space, FACT), make_thought(space, "The CI runs the linters before the tests.")
    session = new_session()
    make_query_log(space, session, [old], agent=dev.agent)
    for _ in range(selectors.SESSION_CALLS_READ):
        make_query_log(space, session, [recent], agent=dev.agent)
    message = refused(turn(dev, session, "t1", used_ids=[str(old.id)]), 400, "VALIDATION_ERROR")
    assert str(old.id) in message and f"newest {selectors.SESSION_CALLS_READ}" in message
    assert turn(dev, session, "t2", used_ids=[str(recent.id)]).status_code == 202


def test_feedback_on_a_thought_shown_to_another_agents_session_is_refused(dev, agent_factory, space):
    other = agent_factory("dev", name="dev-2")
    target = make_thought(space, FACT)
    make_query_log(space, new_session(), [target], agent=other.agent)
    own = new_session()
    make_query_log(space, own, [make_thought(space, "Unrelated note about the linters.")], agent=dev.agent)
    refused(turn(dev, own, "t1", contradicted_ids=[str(target.id)]), 400, "VALIDATION_ERROR")
    assert not TurnLog.objects.exists()


def test_a_refusal_names_a_bounded_number_of_ids(dev, space):
    session = new_session()
    make_query_log(space, session, [], agent=dev.agent)
    ids = [str(make_thought(space, f"note {n}").id) for n in range(20)]
    response = turn(dev, session, "t1", contradicted_ids=ids)
    message = refused(response, 400, "VALIDATION_ERROR")
    assert sum(i in message for i in ids) == 5 and "and 15 more" in message
    error = response.json()["error"]
    assert error["ids"] == ids[:10] and error["omitted"] == {"ids": 10}


def test_a_turn_cannot_name_another_agents_session(dev, agent_factory, space):
    other = agent_factory("dev", name="dev-2")
    target = make_thought(space, FACT)
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    message = refused(turn(dev, theirs, "t1"), 403, "SESSION_NOT_YOURS")
    assert theirs in message
    refused(turn(dev, theirs, "t2", contradicted_ids=[str(target.id)]), 403, "SESSION_NOT_YOURS")
    assert not TurnLog.objects.exists()
    # A session first used by another agent's turn (no memory call) is theirs too, and its logged turn
    # is not replayed to the intruder.
    logged = new_session()
    assert turn(other, logged, "t1").status_code == 202
    refused(turn(dev, logged, "t1"), 403, "SESSION_NOT_YOURS")
    assert TurnLog.objects.filter(agent=dev.agent).count() == 0


@pytest.mark.parametrize("field", ["used_ids", "contradicted_ids", "injected_ids"])
def test_one_showing_moves_a_thought_once_however_many_turns_report_it(dev, space, field, monkeypatch):
    # Before: every later turn of the session naming a thought shown once was one more EMA step: one
    # memory call and twelve turns reporting used_ids=[its own thought] raised its usage_score to 0.99.
    # An item named only as injected moves the EMAs when the judge is trusted.
    monkeypatch.setattr(selectors, "judge_trust", lambda judge_name: JudgeTrust(judge_name, True, None))
    target = make_thought(space, FACT)
    session = new_session()
    make_query_log(space, session, [target], agent=dev.agent)
    for n in range(5):
        scored_turn(dev, session, f"t{n}", **{field: [str(target.id)]})
    assert ConfidenceChange.objects.filter(thought_id=target.id).count() == 1
    assert TurnItem.objects.filter(thought_id=target.id, fed_ema=True).count() == 1
    assert TurnItem.objects.filter(thought_id=target.id).count() == 5  # all logged, for the rates
    make_query_log(space, session, [target], agent=dev.agent)  # shown again: one more step
    for n in range(5, 8):
        scored_turn(dev, session, f"t{n}", **{field: [str(target.id)]})
    assert ConfidenceChange.objects.filter(thought_id=target.id).count() == 2


def test_feedback_on_a_transition_marker_moves_nothing_and_suggests_nothing(dev, space):
    # Before: a turn reporting a marker contradicted stepped its EMAs and raised a correction suggestion
    # that could never be accepted (markers can't be corrected); a marker records an event, not a fact.
    from brain.choices import ThoughtCategory

    marker = make_thought(
        space, "TRANSITION: task T-1 active -> review by dev-1", thought_category=ThoughtCategory.TRANSITION_MARKER
    )
    session = new_session()
    make_query_log(space, session, [marker], agent=dev.agent)
    scored_turn(dev, session, "t1", contradicted_ids=[str(marker.id)])
    marker.refresh_from_db()
    assert (marker.contradiction_score, marker.effective_confidence) == (None, 1.0)
    assert not ConfidenceChange.objects.filter(thought_id=marker.id).exists()
    assert not CorrectionSuggestion.objects.filter(thought=marker).exists()
    assert TurnItem.objects.get(thought_id=marker.id).contradicted is True  # logged as reported


def test_one_agent_cannot_contradict_a_thought_below_the_floor(dev, agent_factory, space):
    target = make_thought(space, FACT)
    session = new_session()
    for n in range(6):
        make_query_log(space, session, [target], agent=dev.agent)  # each turn is shown it again
        scored_turn(dev, session, f"t{n}", contradicted_ids=[str(target.id)])
    target.refresh_from_db()
    assert formulas.confidence_formula(None, target.contradiction_score) < formulas.SINGLE_AGENT_FLOOR
    assert target.effective_confidence == formulas.SINGLE_AGENT_FLOOR
    # A second agent's contradictions, from what its own session was shown, can take it lower.
    other = agent_factory("dev", name="dev-2")
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    scored_turn(other, theirs, "t1", contradicted_ids=[str(target.id)])
    target.refresh_from_db()
    assert target.effective_confidence < formulas.SINGLE_AGENT_FLOOR


def test_one_agent_cannot_lift_a_thought_above_the_ceiling(dev, agent_factory, space):
    """Attack: an agent steered by a prompt injection reports another agent's (poisoned) thought
    "used" turn after turn, to lift it to the formula's 1.5 in every agent's ranking.

    Rule, the floor's mirror: while the uses come from one agent, effective confidence stays at or
    below SINGLE_AGENT_CEILING; a second agent's use, from what its own session was shown, lifts it."""
    target = make_thought(space, FACT)
    session = new_session()
    for n in range(8):
        make_query_log(space, session, [target], agent=dev.agent)
        scored_turn(dev, session, f"t{n}", used_ids=[str(target.id)])
    target.refresh_from_db()
    assert formulas.confidence_formula(target.usage_score, None) > formulas.SINGLE_AGENT_CEILING
    assert target.effective_confidence == formulas.SINGLE_AGENT_CEILING
    other = agent_factory("qa", name="qa-2")
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    scored_turn(other, theirs, "t1", used_ids=[str(target.id)])
    target.refresh_from_db()
    assert target.effective_confidence > formulas.SINGLE_AGENT_CEILING


def test_a_contradiction_still_raises_a_correction_and_accepting_it_supersedes(dev, space):
    target = make_thought(space, FACT)
    session = new_session()
    make_query_log(space, session, [target], agent=dev.agent)
    scored_turn(dev, session, "t1", contradicted_ids=[str(target.id)])
    suggestion = CorrectionSuggestion.objects.get(thought=target, status=SuggestionStatus.PENDING)
    response = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert response.status_code == 201, response.json()
    target.refresh_from_db()
    assert target.superseded and str(target.superseded_by_id) == response.json()["correction"]["thought_id"]


def test_an_agent_cannot_dismiss_the_contradictions_of_its_own_thought(dev, agent_factory, space):
    # Before: the author of a contradicted thought dismissed the suggestion another agent's turn raised,
    # and its thought stood unchallenged (the unverified flag lifted with it).
    target = make_thought(space, FACT, agent=dev.agent)
    other = agent_factory("dev", name="dev-2")
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    scored_turn(other, theirs, "t1", contradicted_ids=[str(target.id)])
    suggestion = CorrectionSuggestion.objects.get(thought=target, status=SuggestionStatus.PENDING)
    message = refused(dev.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {}, format="json"), 403, "OWN_THOUGHT")
    assert "accept" in message
    suggestion.refresh_from_db()
    assert suggestion.status == SuggestionStatus.PENDING
    # The author may still accept it (correcting its own thought), and any other agent may dismiss it.
    response = other.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {"reason": "checked"}, format="json")
    assert response.status_code == 200, response.json()


def test_a_memory_call_naming_another_agents_session_does_not_get_its_pending_corrections(
    dev, agent_factory, space, fake_embedder
):
    """Pending corrections addressed to another agent's session stay that agent's: a memory call that
    names the session gets only what is addressed to the caller (or to the session with no agent)."""
    from brain.choices import SuggestionOrigin
    from brain.services.suggestions import suggestion_create

    statement = "The staging cluster is rebuilt every Sunday night from the base image."
    other = agent_factory("dev", name="dev-2")
    assert other.post("/api/v1/memory", {"prompt": statement, "session_id": "theirs"}, format="json").status_code == 200
    thought = Thought.objects.get()
    suggestion_create(
        thought=thought,
        statement="It is rebuilt on Saturdays now.",
        origin=SuggestionOrigin.QUALITY_JUDGE,
        agent=other.agent,
        session_id="theirs",
    )
    body = dev.post("/api/v1/memory", {"prompt": statement, "session_id": "theirs"}, format="json").json()
    assert body["result"]["pending_corrections"] == []
    assert "rebuilt on Saturdays" not in str(body)
    mine = other.post("/api/v1/memory", {"prompt": statement, "session_id": "theirs"}, format="json").json()
    assert [p["statement"] for p in mine["result"]["pending_corrections"]] == ["It is rebuilt on Saturdays now."]


def test_another_agents_memory_call_in_my_session_is_not_injected_into_my_turn(dev, agent_factory, space):
    """A memory call another agent makes naming my session does not become what my next turn was
    shown (and so what my feedback and the judge score)."""
    mine = make_thought(space, "The CI runs the linters before the tests.")
    planted = make_thought(space, FACT)
    session = new_session()
    make_query_log(space, session, [mine], agent=dev.agent)
    make_query_log(space, session, [planted], agent=agent_factory("dev", name="dev-2").agent)
    response = turn(dev, session, "t1")
    assert response.status_code == 202, response.content
    logged = TurnLog.objects.get(session_id=session)
    assert [str(i.thought_id) for i in logged.items.all()] == [str(mine.id)]


def test_an_unverified_flag_from_one_agents_contradictions_keeps_the_floor(dev, agent_factory, space):
    """Attack: one agent contradicts a thought until its effective confidence sits at the floor (0.5),
    then leaves the suggestion pending. Fourteen days later the thought is flagged ``unverified`` (×0.9),
    and one agent's reports alone have it at 0.45 of its relevance, below the floor SPEC 6 promises.
    Instead: while only one agent contradicted it, confidence and the flag together keep the floor; a
    second agent's contradictions take it lower, flag included."""
    import datetime as dt

    from django.utils import timezone

    from brain import ranking
    from quality.services.rollups import thoughts_flag_unverified

    target = make_thought(space, FACT)
    session = new_session()
    for n in range(6):
        make_query_log(space, session, [target], agent=dev.agent)
        scored_turn(dev, session, f"t{n}", contradicted_ids=[str(target.id)])
    assert thoughts_flag_unverified(now=timezone.now() + dt.timedelta(days=15)) == 1

    def factor() -> float:
        thought = Thought.objects.get(pk=target.pk)
        assert "unverified" in thought.quality_flags and thought.effective_confidence is not None
        (candidate,) = ranking.rank([ranking.Candidate(thought=thought, similarity=0.6)])
        return candidate.score / candidate.relevance

    assert factor() == pytest.approx(formulas.SINGLE_AGENT_FLOOR)
    other = agent_factory("dev", name="dev-2")
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    scored_turn(other, theirs, "t1", contradicted_ids=[str(target.id)])
    confidence = Thought.objects.get(pk=target.pk).effective_confidence
    assert confidence < formulas.SINGLE_AGENT_FLOOR
    assert factor() == pytest.approx(confidence * ranking.QUALITY_FLAG_MULTIPLIERS["unverified"])
