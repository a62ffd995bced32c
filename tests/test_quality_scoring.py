"""Scoring a turn: judge vs explicit feedback, trust, EMA updates, suggestions, idempotency, locks."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import override_settings

from brain import ranking
from brain.judging import JudgeUnavailable
from brain.models import CorrectionSuggestion, Thought
from brain.ranking import quality_multiplier
from quality import formulas
from quality.choices import TurnStatus
from quality.models import ConfidenceChange, TurnItem, TurnLog
from quality.selectors import judge_trust
from quality.services.scoring import JudgeRetry, judge_resolve, turn_response_text, turn_score
from quality.services.turns import turn_log_create
from tests.quality_support import LexicalJudge, ScriptedJudge, make_query_log, make_thought, new_session, trust

pytestmark = pytest.mark.django_db


def log_turn(agent, thoughts, *, used=(), contradicted=(), response="I ran the tests.", session=None, turn_id="t"):
    session = session or new_session()
    earlier = [t for t in dict.fromkeys([*used, *contradicted]) if t not in thoughts]
    if earlier:  # feedback counts for what this agent's session was shown, here by an earlier call
        make_query_log(agent.space, session, earlier, agent=agent)
    make_query_log(agent.space, session, list(thoughts), agent=agent)
    return turn_log_create(
        agent=agent,
        session_id=session,
        turn_id=turn_id,
        user_prompt="Fix the flaky migration test",
        assistant_response=response,
        tool_calls=[],
        used_ids=[t.id for t in used],
        contradicted_ids=[t.id for t in contradicted],
    ).turn


def reload(thought: Thought) -> Thought:
    return Thought.objects.get(pk=thought.pk)


def test_explicit_feedback_overrides_the_judge(dev, space):
    a = make_thought(space, "alpha: the migration test needs --create-db")
    b = make_thought(space, "beta: use redis for the broker")
    judge = ScriptedJudge(on_topic={"beta"}, used={"alpha", "beta"}, contradicted=())
    turn = log_turn(dev.agent, [a, b], contradicted=[a])
    result = turn_score(turn_log_id=str(turn.id), judge=judge)

    items = {i.thought_id: i for i in TurnItem.objects.filter(turn=turn)}
    ia, ib = items[a.id], items[b.id]
    # the judge is not even asked about a: explicit feedback would override every answer ...
    assert {item for _, item, _ in judge.calls} == {b.content}
    assert len(judge.calls) == 3
    assert (ia.judge_on_topic, ia.judge_used, ia.judge_contradicted, ia.judge_details) == (None, None, None, {})
    assert (ib.judge_on_topic, ib.judge_used, ib.judge_contradicted) == (True, True, False)
    # ... the agent's word counts: a contradicted, not used, and on topic (it was contradicted)
    assert (ia.on_topic, ia.used, ia.contradicted, ia.verdict_source) == (True, False, True, "explicit")
    assert (ib.on_topic, ib.used, ib.contradicted, ib.verdict_source) == (True, True, False, "judge")
    assert result.items == 2 and result.contradicted == 1
    turn.refresh_from_db()
    assert turn.status == TurnStatus.SCORED and turn.judge_name == "scripted" and turn.scored_at


def test_untrusted_judge_only_explicit_feedback_moves_the_emas(dev, space):
    a = make_thought(space, "alpha fact")
    b = make_thought(space, "beta fact")
    judge = ScriptedJudge(on_topic={"alpha", "beta"}, used={"beta"})  # never validated: untrusted
    assert judge_trust(judge_name="scripted").trusted is False
    turn = log_turn(dev.agent, [a, b], used=[a])
    result = turn_score(turn_log_id=str(turn.id), judge=judge)

    assert result.judge_trusted is False and result.fed_ema == 1
    a, b = reload(a), reload(b)
    assert (a.usage_score, a.contradiction_score, a.effective_confidence) == (
        pytest.approx(0.3),
        pytest.approx(0.0),
        pytest.approx(1.15),
    )
    assert (b.usage_score, b.contradiction_score, b.effective_confidence) == (None, None, 1.0)
    assert TurnItem.objects.get(thought=b).used is True  # still measured
    assert TurnItem.objects.get(thought=b).fed_ema is False


def test_trusted_judge_verdicts_move_the_emas(dev, space):
    trust("scripted")
    a = make_thought(space, "alpha fact")
    b = make_thought(space, "beta fact")
    judge = ScriptedJudge(used={"alpha"}, contradicted={"beta"})
    turn_score(turn_log_id=str(log_turn(dev.agent, [a, b]).id), judge=judge)
    a, b = reload(a), reload(b)
    assert (a.usage_score, a.contradiction_score, a.effective_confidence) == (
        pytest.approx(0.3),
        pytest.approx(0.0),
        pytest.approx(1.15),
    )
    assert (b.usage_score, b.contradiction_score, b.effective_confidence) == (
        pytest.approx(0.0),
        pytest.approx(0.3),
        pytest.approx(0.5),  # the formula's 0.4, held at the single-agent floor
    )


@pytest.mark.parametrize(
    ("validations", "trusted"),
    [
        ([], False),
        ([(0.9, 0.9, 0.9)], True),
        ([(0.85, 0.85, 0.85)], True),
        ([(0.9, 0.849, 0.9)], False),
        ([(0.9, 0.9, 0.84)], False),
        ([(0.9, 0.9, 0.9), (0.8, 0.9, 0.9)], False),  # the latest counts
        ([(0.8, 0.9, 0.9), (0.9, 0.9, 0.9)], True),
    ],
)
def test_judge_trust_is_the_latest_validation_at_85_percent_on_every_metric(validations, trusted):
    for values in validations:
        trust("embedding", *values)
    trust("other-judge", 0.99, 0.99, 0.99)  # another judge's validation does not count
    assert judge_trust(judge_name="embedding").trusted is trusted


def test_repeated_outcomes_follow_the_ema(dev, space):
    a = make_thought(space, "alpha fact")
    for n in range(3):
        turn = log_turn(dev.agent, [a], contradicted=[a], turn_id=f"t{n}")
        turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    a = reload(a)
    assert a.contradiction_score == pytest.approx(0.657)  # 0.3, 0.51, 0.657
    assert a.usage_score == pytest.approx(0.0)
    # 1 - 1.314 would clamp at 0; one agent's contradictions stop at the single-agent floor
    assert a.effective_confidence == formulas.SINGLE_AGENT_FLOOR == 0.5
    changes = list(ConfidenceChange.objects.filter(thought=a).order_by("changed_at", "id"))
    assert [(round(c.old_confidence, 3), round(c.new_confidence, 3)) for c in changes] == [
        (1.0, 0.5),
        (0.5, 0.5),
        (0.5, 0.5),
    ]
    assert all(c.agent_name == "dev-1" and c.contradicted and not c.used for c in changes)


def test_scoring_twice_changes_nothing(dev, space):
    a = make_thought(space, "alpha fact")
    turn = log_turn(dev.agent, [a], used=[a])
    first = turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    second = turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    assert first.already_scored is False and second.already_scored is True
    assert reload(a).usage_score == pytest.approx(0.3)
    assert ConfidenceChange.objects.count() == 1


def test_a_contradiction_raises_one_pending_suggestion_per_agent(dev, space, agent_factory):
    a = make_thought(space, "The staging database runs PostgreSQL 14.", topic="infrastructure")
    response = (
        "I checked the server first. Staging now runs PostgreSQL 18 with pgvector, not PostgreSQL 14. "
        "Then I ran the migrations."
    )
    turn = log_turn(dev.agent, [a], contradicted=[a], response=response, session="sess-1")
    assert turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge()).suggestions == 1
    suggestion = CorrectionSuggestion.objects.get()
    assert suggestion.thought_id == a.id and suggestion.origin == "quality_judge" and suggestion.status == "pending"
    assert suggestion.statement == "Staging now runs PostgreSQL 18 with pgvector, not PostgreSQL 14."
    assert (suggestion.agent, suggestion.session_id, suggestion.confidence) == (dev.agent, "sess-1", 1.0)
    assert suggestion.draft["supersedes"] == [str(a.id)] and suggestion.draft["corrected_fact"] == a.content

    again = log_turn(dev.agent, [a], contradicted=[a], response="Still 18, not 14.", turn_id="t2")
    assert turn_score(turn_log_id=str(again.id), judge=ScriptedJudge()).suggestions == 0
    qa = agent_factory("qa")
    other = log_turn(qa.agent, [a], contradicted=[a], response="QA saw 18, not 14.", turn_id="t3")
    assert turn_score(turn_log_id=str(other.id), judge=ScriptedJudge()).suggestions == 1
    assert CorrectionSuggestion.objects.count() == 2


def test_a_judge_contradiction_raises_a_suggestion_with_the_judges_confidence(dev, space):
    a = make_thought(space, "alpha: deploys happen on Fridays")
    turn = log_turn(dev.agent, [a], response="We never deploy on Fridays.")
    turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge(contradicted={"alpha"}))
    suggestion = CorrectionSuggestion.objects.get()
    assert suggestion.confidence == pytest.approx(0.9) and "scripted contradicted" in suggestion.reason
    assert reload(a).contradiction_score is None  # untrusted judge: measured, suggested, not ranked


def test_judge_sees_tool_calls_as_part_of_the_response(dev, space):
    a = make_thought(space, "alpha: run manage.py reembed after changing the model")
    session = new_session()
    make_query_log(space, session, [a], agent=dev.agent)
    turn = turn_log_create(
        agent=dev.agent,
        session_id=session,
        turn_id="t",
        user_prompt="change the embedding model",
        assistant_response="Done.",
        tool_calls=[{"name": "Bash", "input": {"command": "manage.py reembed --all"}}],
    ).turn
    judge = ScriptedJudge()
    turn_score(turn_log_id=str(turn.id), judge=judge)
    used_call = next(call for call in judge.calls if call[0] == "used")
    assert used_call[2] == 'Done.\n{"input": {"command": "manage.py reembed --all"}, "name": "Bash"}'
    assert turn_response_text(assistant_response="", tool_calls=["ls -la"]) == "ls -la"


def test_an_unavailable_judge_makes_the_job_retry_and_changes_nothing(dev, space):
    class Down(ScriptedJudge):
        def used(self, response, item):
            raise JudgeUnavailable("LLM endpoint timed out")

    a = make_thought(space, "alpha")
    turn = log_turn(dev.agent, [a])  # no explicit feedback: the judge must be asked
    with pytest.raises(JudgeRetry, match="timed out"):
        turn_score(turn_log_id=str(turn.id), judge=Down())
    turn.refresh_from_db()
    assert turn.status == TurnStatus.PENDING
    assert reload(a).usage_score is None and ConfidenceChange.objects.count() == 0

    class Broken(ScriptedJudge):
        def used(self, response, item):
            raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError):
        turn_score(turn_log_id=str(turn.id), judge=Broken())


def test_the_scoring_job_retries_on_judge_retry(dev, space, monkeypatch):
    from quality import jobs

    assert JudgeRetry in jobs.score_turn.autoretry_for


@override_settings(QUALITY_JUDGE_FACTORY="tests.quality_support.lexical_judge_factory")
def test_judge_factory_setting_plugs_in_another_judge():
    assert isinstance(judge_resolve(), LexicalJudge)


def test_ranking_switch_applies_effective_confidence_only_while_enabled(dev, space, settings):
    """Two thoughts of equal similarity: the contradicted one ranks below only while the switch is on,
    and switching it off and on again needs nothing recomputed."""
    a = make_thought(space, "alpha: contradicted")
    b = make_thought(space, "beta: used")
    for n in range(2):
        turn = log_turn(dev.agent, [a, b], used=[b], contradicted=[a], turn_id=f"t{n}")
        turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    a, b = reload(a), reload(b)
    similarity = 0.8

    def ranked() -> list[str]:
        """Brain's ranking itself, both at the same similarity."""
        candidates = [ranking.Candidate(thought=reload(t), similarity=similarity) for t in (a, b)]
        return [candidate.thought.content for candidate in ranking.rank(candidates)]

    settings.QUALITY_RANKING_ENABLED = True
    assert a.effective_confidence < 1.0 < b.effective_confidence
    assert ranked() == ["beta: used", "alpha: contradicted"]
    settings.QUALITY_RANKING_ENABLED = False
    assert quality_multiplier(a.effective_confidence) == quality_multiplier(b.effective_confidence) == 1.0
    off = ranking.rank([ranking.Candidate(thought=t, similarity=similarity) for t in (a, b)])
    # Relevance is the fused one (brain.ranking: both first by cosine, sharing the place; no lexical match).
    fused = ranking.weighted(similarity, 0.0)
    assert [candidate.score for candidate in off] == pytest.approx([fused, fused])
    # scoring goes on while ranking ignores it
    turn = log_turn(dev.agent, [a], contradicted=[a], turn_id="t-off")
    turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    a = reload(a)
    assert a.contradiction_score == pytest.approx(0.657)
    settings.QUALITY_RANKING_ENABLED = True
    assert ranked() == ["beta: used", "alpha: contradicted"]
    assert quality_multiplier(None) == 1.0


@pytest.mark.django_db(transaction=True)
def test_concurrent_scorers_of_one_thought_lose_no_update(space, agent_factory, monkeypatch):
    """Two workers score two turns injecting the same thought at the same moment: both steps land."""
    from quality.services import turns

    monkeypatch.setattr(turns, "turn_enqueue_scoring", lambda turn_log_id: None)  # this test scores them itself
    dev1, dev2 = agent_factory("dev"), agent_factory("dev")
    a = make_thought(space, "alpha shared")
    turns = [log_turn(client.agent, [a], used=[a], turn_id=f"t-{n}") for n, client in enumerate((dev1, dev2))]
    barrier = threading.Barrier(2, timeout=20)

    class Together(ScriptedJudge):
        def contradicts(self, a_text, b_text):
            barrier.wait()  # the last judge call: both threads then enter the scoring transaction
            return super().contradicts(a_text, b_text)

    def score(turn: TurnLog):
        try:
            return turn_score(turn_log_id=str(turn.id), judge=Together())
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(score, turns))
    assert all(not r.already_scored for r in results)
    a = reload(a)
    assert a.usage_score == pytest.approx(0.51)  # 0.3 then 0.51: neither step overwrote the other
    assert ConfidenceChange.objects.filter(thought=a).count() == 2


def test_no_suggestion_for_a_thought_already_superseded(dev, space):
    a = make_thought(space, "alpha: old fact", superseded=True)
    turn = log_turn(dev.agent, [a], contradicted=[a], response="That is wrong.")
    result = turn_score(turn_log_id=str(turn.id), judge=ScriptedJudge())
    assert result.contradicted == 1 and result.suggestions == 0
    assert reload(a).contradiction_score == pytest.approx(0.3)  # still measured and ranked


def test_the_configured_judge_and_its_validation_decide(dev, space, settings):
    """Without a judge passed in, scoring uses QUALITY_JUDGE and that name's latest validation."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    settings.QUALITY_JUDGE = "llm"
    trust("llm")
    a = make_thought(space, "[on] [used] the judge says it was used")
    turn = log_turn(dev.agent, [a])
    result = turn_score(turn_log_id=str(turn.id))
    assert result.judge_trusted is True and result.fed_ema == 1
    turn.refresh_from_db()
    assert (turn.judge_name, turn.judge_trusted) == ("llm", True)
    assert reload(a).usage_score == pytest.approx(0.3)
