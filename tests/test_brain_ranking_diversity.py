"""Contrast (a second scoring against the best hits' centroid) and diversity (maximal marginal
relevance) in brain.ranking: the arithmetic, when they apply, and the rules that still hold."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from brain import ranking
from tests.test_brain_ranking import fake_thought


def unit(values) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def candidate(query: np.ndarray, vector: np.ndarray, **overrides) -> ranking.Candidate:
    return ranking.Candidate(
        thought=fake_thought(**overrides), similarity=float(query @ vector), vector=vector.astype(np.float32)
    )


@pytest.fixture
def dense_only(monkeypatch):
    """Relevance = similarity, so the expected orders are read off the cosines."""
    monkeypatch.setattr(ranking, "LEXICAL_WEIGHT", 0.0)


# --- contrast ---------------------------------------------------------------------------------------
def test_contrast_is_the_cosine_with_a_share_of_the_seeds_centroid_taken_out(monkeypatch, dense_only):
    monkeypatch.setattr(ranking, "CONTRAST_SEEDS", 3)
    rng = np.random.default_rng(7)
    query = unit(rng.normal(size=16))
    vectors = [unit(query + rng.normal(scale=0.8, size=16)) for _ in range(6)]
    candidates = [candidate(query, v) for v in vectors]
    for c in candidates:
        c.score = c.similarity
    assert ranking.contrast(candidates)
    seeds = sorted(vectors, key=lambda v: -float(query @ v))[:3]
    centroid = np.mean(seeds, axis=0)
    beta = ranking.CONTRAST_BETA
    q = query - beta * centroid
    for c, v in zip(candidates, vectors, strict=True):
        w = v - beta * centroid
        assert c.contrasted == pytest.approx(float(q @ w / (np.linalg.norm(q) * np.linalg.norm(w))), abs=1e-5)


def test_contrast_lifts_what_differs_from_the_shared_topic(monkeypatch, dense_only):
    """Four thoughts share the query's topic and nothing else; the fifth shares less of the topic
    but what the question asks. Plain cosine puts it third; contrasted, it comes first."""
    monkeypatch.setattr(ranking, "DIVERSITY_LAMBDA", 1.0)
    topic, asked, other = np.eye(3, dtype=np.float32)
    query = unit(topic + 0.5 * asked)
    chatter = [candidate(query, unit(topic + 0.3 * (i + 1) * other)) for i in range(4)]
    answer = candidate(query, unit(0.3 * topic + asked))
    by_cosine = sorted(chatter + [answer], key=lambda c: -c.similarity)
    assert by_cosine.index(answer) == 2
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    assert ranking.rank(list(chatter + [answer]))[0] is not answer
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.9)
    for c in chatter + [answer]:
        c.contrasted = None
    assert ranking.rank(list(chatter + [answer]))[0] is answer


def test_contrast_needs_two_vectors_and_leaves_pending_thoughts_alone(dense_only):
    query = unit([1.0, 0.0])
    lone = candidate(query, unit([1.0, 0.2]))
    lone.score = lone.similarity
    assert not ranking.contrast([lone]) and lone.contrasted is None
    pending = ranking.Candidate(thought=fake_thought(), similarity=None, bm25=1.0, idf_total=2.0)
    pair = [candidate(query, unit([1.0, 0.1])), candidate(query, unit([0.7, 0.7])), pending]
    for c in pair[:2]:
        c.score = c.similarity
    pending.score = 0.5
    assert ranking.contrast(pair)
    assert pending.contrasted is None and all(c.contrasted is not None for c in pair[:2])


def test_contrast_off_scores_as_before(monkeypatch, dense_only):
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    monkeypatch.setattr(ranking, "DIVERSITY_LAMBDA", 1.0)
    query = unit([1.0, 0.3, 0.0])
    ranked = ranking.rank([candidate(query, unit(v)) for v in ([1, 0, 0], [0, 1, 0], [1, 1, 1])])
    assert [c.score for c in ranked] == pytest.approx(sorted((c.similarity for c in ranked), reverse=True))
    assert all(c.contrasted is None for c in ranked)


# --- diversity ---------------------------------------------------------------------------------------
def three(query):
    first = candidate(query, unit([1.0, 0.0, 0.0]))
    near_copy = candidate(query, unit([1.0, 0.05, 0.0]))
    different = candidate(query, unit([0.6, 0.0, 0.8]))
    return first, near_copy, different


def test_diversity_places_a_different_thought_before_a_near_copy(monkeypatch, dense_only):
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    monkeypatch.setattr(ranking, "DIVERSITY_LAMBDA", 0.5)
    query = unit([1.0, 0.0, 0.3])
    first, near_copy, different = three(query)
    assert near_copy.similarity > different.similarity
    ranked = ranking.rank([first, near_copy, different])
    assert ranked == [first, different, near_copy]
    assert "placed for diversity" in different.matching_reason
    assert different.score < near_copy.score  # scores are not changed, only places


@pytest.mark.parametrize(
    "constants",
    [
        {"DIVERSITY_LAMBDA": 1.0},  # off
        # Window 2: ``different`` (third by score) can't move up, however different it is.
        {"DIVERSITY_LAMBDA": 0.5, "DIVERSITY_WINDOW": 2},
    ],
)
def test_diversity_off_or_outside_its_window_keeps_score_order(monkeypatch, dense_only, constants):
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    for name, value in constants.items():
        monkeypatch.setattr(ranking, name, value)
    query = unit([1.0, 0.0, 0.3])
    first, near_copy, different = three(query)
    assert ranking.rank([first, near_copy, different]) == [first, near_copy, different]


def test_diversity_never_places_a_superseded_thought_above_its_live_replacement(monkeypatch, dense_only):
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    monkeypatch.setattr(ranking, "DIVERSITY_LAMBDA", 0.5)
    query = unit([1.0, 0.0, 0.0])
    top = candidate(query, unit([0.95, 0.312, 0.0]))
    # The replacement (cosine 0.6, lifted to the 0.63 of the thought it replaces) is close to the top
    # thought and the superseded one (0.9 × 0.7) less so: diversity alone would place the superseded
    # thought first.
    replacement = candidate(query, unit([0.6, 0.8, 0.0]))
    old = candidate(query, unit([0.9, -0.43, 0.0]), superseded=True, superseded_by_id=replacement.thought.id)
    old.live_replacement_id = str(replacement.thought.id)
    ranked = ranking.rank([top, replacement, old])
    assert ranked.index(replacement) < ranked.index(old)


def test_diversity_skips_candidates_without_vectors(dense_only):
    pending = [
        ranking.Candidate(thought=fake_thought(id=uuid.uuid4()), similarity=None, bm25=b, idf_total=4.0)
        for b in (3.0, 2.0, 1.0)
    ]
    ranked = ranking.rank(pending)
    assert [c.bm25 for c in ranked] == [3.0, 2.0, 1.0]


def test_relevance_is_computed_from_the_cosine_the_search_returned_not_the_contrasted_one(dense_only):
    """The calibration constants are fitted on the harness's cosine (benchmarks/retrieval/calibrate.py);
    the answer's relevance must use the same feature."""
    rng = np.random.default_rng(3)
    query = unit(rng.normal(size=8))
    candidates = [candidate(query, unit(query + rng.normal(scale=0.7, size=8))) for _ in range(6)]
    ranked = ranking.rank(candidates)
    assert any(c.contrasted is not None and abs(c.contrasted - c.similarity) > 0.01 for c in ranked)
    top = ranked[0].score
    for position, c in enumerate(ranked, start=1):
        features = ranking.relevance_features(score=c.score, similarity=c.similarity, top_score=top, position=position)
        assert c.probability == pytest.approx(ranking.calibrated_relevance(features))


def test_a_zero_vector_poisons_neither_contrast_nor_diversity(dense_only):
    """An import may carry any finite vector, zeros included; pgvector's cosine with it is NaN. Such
    a thought is left out of contrast's seeds and keeps its own score; the others rank as without it."""
    rng = np.random.default_rng(5)
    query = unit(rng.normal(size=8))
    vectors = [unit(query + rng.normal(scale=0.7, size=8)) for _ in range(6)]
    plain = ranking.rank([candidate(query, v) for v in vectors])
    zero = ranking.Candidate(
        thought=fake_thought(), similarity=float("nan"), bm25=50.0, idf_total=2.0, vector=np.zeros(8, np.float32)
    )
    mixed = ranking.rank([candidate(query, v) for v in vectors] + [zero])
    assert all(np.isfinite(c.score) and np.isfinite(c.probability) for c in mixed)
    assert [c.similarity for c in mixed if c is not zero] == [c.similarity for c in plain]
