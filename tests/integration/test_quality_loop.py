"""The quality loop end to end, through the real API and a real Celery worker.

Two thoughts about the same subject (the CI's Python version) with the real embedding model, the
outdated one slightly *more* similar to the question than the current one. Each round an agent asks
``POST /api/v1/memory`` (the sources become the session's injected items) and then logs its turn
with ``POST /api/v1/turns``: it contradicted A and used B (explicit feedback). Two agents take the
rounds: one agent's contradictions alone stop at the single-agent floor (quality.formulas). The worker scores the
turns; afterwards the same memory query ranks B above A, shows ``effective_confidence`` per source,
lists the raised correction suggestion, and with ``QUALITY_RANKING_ENABLED=False`` ranks by
similarity again (A first) with nothing else undone. The rollup job turns it into metrics.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from brain.embedding import embed
from brain.models import CorrectionSuggestion
from brain.services.thoughts import thought_create
from quality import jobs
from quality.models import TurnLog

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

QUESTION = "Which Python version does the CI pipeline run the test suite on?"
OUTDATED = "The CI pipeline runs the test suite on Python 3.10."
CURRENT = "The CI pipeline's test suite runs on Python 3.12 since the base image upgrade."
ROUNDS = 3


def remember(space, content: str):
    return thought_create(
        space=space, content=content, contributor_id="pdsa-1", contributor_name="pdsa-1", embedding=embed(content)
    )


def ask(client, session_id: str) -> dict:
    response = client.post("/api/v1/memory", {"prompt": QUESTION, "session_id": session_id}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["trace"]["thought_id"] is None  # a lone question: nothing contributed
    return body


def sources_of(body: dict, *thoughts) -> list[dict]:
    """The response's sources for these thoughts, in the response's order."""
    wanted = {str(t.id) for t in thoughts}
    return [source for source in body["result"]["sources"] if source["thought_id"] in wanted]


def test_contradicted_thought_falls_below_a_used_one(start_worker, space, dev, agent_factory, monkeypatch, settings):
    worker = start_worker(
        broker="redis", extra_env={"QUALITY_JUDGE_FACTORY": "tests.quality_support.lexical_judge_factory"}
    )
    sent = []
    monkeypatch.setattr(
        jobs.score_turn, "delay", lambda turn_log_id: sent.append(worker.send("quality.jobs.score_turn", turn_log_id))
    )
    settings.QUALITY_RANKING_ENABLED = True
    a = remember(space, OUTDATED)
    b = remember(space, CURRENT)

    before = ask(dev, "e2e-0")
    first, second = sources_of(before, a, b)
    # Same subject, similar similarity; with no history the factor is 1 and A (more similar) leads.
    assert (first["thought_id"], second["thought_id"]) == (str(a.id), str(b.id))
    # the weighted sum (brain.ranking): a little cosine and BM25 between the two
    assert 0 < first["score"] - second["score"] < 0.1
    assert first["effective_confidence"] == second["effective_confidence"] == 1.0
    initial = {source["thought_id"]: source["score"] for source in (first, second)}

    agents = [dev, agent_factory("dev", name="dev-2"), dev]
    for n in range(ROUNDS):
        session = f"e2e-{n}"
        if n:
            ask(agents[n], session)
        response = agents[n].post(
            "/api/v1/turns",
            {
                "session_id": session,
                "turn_id": "1",
                "user_prompt": "Why does the CI job fail on match statements?",
                "assistant_response": "CI runs Python 3.12, not 3.10, since the base image upgrade.",
                "tool_calls": [{"name": "Read", "input": {"file_path": ".ci/Dockerfile"}}],
                "used_ids": [str(b.id)],
                "contradicted_ids": [str(a.id)],
            },
            format="json",
        )
        assert response.status_code == 202, response.content
    duplicate = dev.post(
        "/api/v1/turns",
        {"session_id": "e2e-0", "turn_id": "1", "user_prompt": "", "assistant_response": ""},
        format="json",
    )
    assert duplicate.status_code == 202 and duplicate.json()["duplicate"] is True
    assert len(sent) == ROUNDS
    results = [result.get(timeout=90) for result in sent]
    assert all(result["already_scored"] is False and result["fed_ema"] == 2 for result in results)
    assert "quality.jobs.score_turn" in worker.output()
    turns = TurnLog.objects.filter(status="scored")
    assert turns.count() == ROUNDS
    assert set(turns.values_list("injected_from", flat=True)) == {"query_log"}  # the memory call's sources

    a.refresh_from_db()
    b.refresh_from_db()
    assert a.contradiction_score == pytest.approx(1 - 0.7**ROUNDS)
    assert b.usage_score == pytest.approx(1 - 0.7**ROUNDS)
    assert a.effective_confidence == 0.0
    assert b.effective_confidence == pytest.approx(1 + 0.5 * (1 - 0.7**ROUNDS))

    # The same question now: B first, A demoted to nothing, the confidence shown per source.
    after = ask(dev, "e2e-after")
    first, second = sources_of(after, a, b)
    assert (first["thought_id"], second["thought_id"]) == (str(b.id), str(a.id))
    assert first["effective_confidence"] == pytest.approx(b.effective_confidence)
    assert second["effective_confidence"] == 0.0
    assert first["score"] == pytest.approx(min(1.0, initial[str(b.id)] * b.effective_confidence), rel=0.01)
    assert second["score"] == 0.0
    assert "effective confidence" in first["matching_reason"] and "effective confidence" in second["matching_reason"]
    pending = after["result"]["pending_corrections"]
    assert [p["thought_id"] for p in pending] == [str(a.id)]

    # One switch off: similarity order again, the factor gone, the confidences still shown.
    with override_settings(QUALITY_RANKING_ENABLED=False):
        off = ask(dev, "e2e-off")
    first, second = sources_of(off, a, b)
    assert (first["thought_id"], second["thought_id"]) == (str(a.id), str(b.id))
    for source in (first, second):
        # only the pheromone boost of the repeated accesses (bounded, ~0.3%) separates it from the start
        assert source["score"] == pytest.approx(initial[source["thought_id"]], rel=0.01)
        assert "effective confidence" not in source["matching_reason"]
    assert first["effective_confidence"] == 0.0
    assert second["effective_confidence"] == pytest.approx(b.effective_confidence)

    suggestion = CorrectionSuggestion.objects.get(thought=a, agent=dev.agent)
    assert suggestion.status == "pending" and suggestion.origin == "quality_judge"
    assert "Python 3.12, not 3.10" in suggestion.statement

    worker.send("quality.jobs.rollup_daily").get(timeout=90)
    metrics = dev.get("/api/v1/quality/metrics?days=1").json()["metrics"]
    assert metrics["contradiction_rate"]["value"] == 0.5  # 3 of 6 injected items
    assert metrics["usage_rate"]["value"] == 0.5
    assert metrics["on_topic_rate"]["value"] == 1.0  # explicit feedback: both were on topic
    assert metrics["false_demotion_rate"]["denominator"] == 1
