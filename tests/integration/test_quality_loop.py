"""The quality loop end to end through a real Celery worker: turns posted over the API are scored by
the worker, a repeatedly contradicted thought falls below an uncontradicted one, the rollup job
turns it into metrics.

The memory endpoint's ranking lives on another branch; until it is merged, the ranking check here is
the one Colony's ranking applies for the quality loop: cosine similarity from pgvector times
``quality_multiplier(effective_confidence)``, for two thoughts of equal similarity.
"""

from __future__ import annotations

import pytest
from django.db.models import FloatField, Value
from pgvector.django import CosineDistance

from brain.models import CorrectionSuggestion, Thought
from quality import jobs
from quality.models import TurnLog
from quality.selectors import quality_multiplier
from tests.quality_support import make_query_log, make_thought

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

QUERY = [0.1] * 384


def ranked(space) -> list[str]:
    rows = (
        Thought.objects.filter(space=space)
        .annotate(similarity=Value(1.0, output_field=FloatField()) - CosineDistance("embedding", QUERY))
        .values_list("content", "similarity", "effective_confidence")
    )
    scored = [(content, sim * quality_multiplier(effective_confidence=ec)) for content, sim, ec in rows]
    return [content for content, _ in sorted(scored, key=lambda row: -row[1])]


def test_contradicted_thought_falls_below_a_used_one(start_worker, space, dev, monkeypatch, settings):
    worker = start_worker(
        broker="redis", extra_env={"QUALITY_JUDGE_FACTORY": "tests.quality_support.lexical_judge_factory"}
    )
    sent = []
    monkeypatch.setattr(
        jobs.score_turn, "delay", lambda turn_log_id: sent.append(worker.send("quality.jobs.score_turn", turn_log_id))
    )
    a = make_thought(space, "The CI pipeline runs on Python 3.10.")
    b = make_thought(space, "The CI pipeline caches the virtualenv between runs.")
    settings.QUALITY_RANKING_ENABLED = True
    assert set(ranked(space)) == {a.content, b.content}  # equal similarity, no history: a tie at 1.0

    for n in range(4):
        session = f"e2e-{n}"
        make_query_log(space, session, [a, b], scores=[0.8, 0.8])
        response = dev.post(
            "/api/v1/turns",
            {
                "session_id": session,
                "turn_id": "1",
                "user_prompt": "Why does the CI job fail on match statements?",
                "assistant_response": "CI runs Python 3.12, not 3.10; the cached virtualenv made it fast.",
                "tool_calls": [{"name": "Read", "input": {"file_path": ".ci/run"}}],
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
    assert duplicate.json()["duplicate"] is True
    assert len(sent) == 4
    results = [result.get(timeout=90) for result in sent]
    assert all(result["already_scored"] is False and result["fed_ema"] == 2 for result in results)
    assert "quality.jobs.score_turn" in worker.output()

    a.refresh_from_db()
    b.refresh_from_db()
    assert a.contradiction_score == pytest.approx(1 - 0.7**4)
    assert b.usage_score == pytest.approx(1 - 0.7**4)
    assert a.effective_confidence == 0.0 < 1.0 < b.effective_confidence == pytest.approx(1 + 0.5 * (1 - 0.7**4))
    assert ranked(space) == [b.content, a.content]
    settings.QUALITY_RANKING_ENABLED = False  # the one switch: back to similarity alone
    assert {quality_multiplier(effective_confidence=t.effective_confidence) for t in (a, b)} == {1.0}

    assert TurnLog.objects.filter(status="scored").count() == 4
    suggestion = CorrectionSuggestion.objects.get(thought=a)
    assert suggestion.status == "pending" and suggestion.origin == "quality_judge"
    assert "Python 3.12, not 3.10" in suggestion.statement

    worker.send("quality.jobs.rollup_daily").get(timeout=90)
    metrics = dev.get("/api/v1/quality/metrics?days=1").json()["metrics"]
    assert metrics["contradiction_rate"]["value"] == 0.5  # 4 of 8 injected items
    assert metrics["usage_rate"]["value"] == 0.5
    assert metrics["on_topic_rate"]["value"] == 1.0  # explicit feedback: both were on topic
    assert metrics["false_demotion_rate"]["denominator"] == 1
