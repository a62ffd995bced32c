"""Ranking (SPEC 2.3): each multiplier on its own, their order, and retrieval quality with the real model."""

from __future__ import annotations

import itertools
import uuid
from datetime import date, timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from brain import ranking
from brain.embedding import embed, embed_many
from brain.models import Thought

NOW = timezone.now()


def fake_thought(**overrides) -> SimpleNamespace:
    values = {
        "id": uuid.uuid4(),
        "superseded": False,
        "superseded_by_id": None,
        "superseded_by_category": None,
        "refined_by_id": None,
        "thought_category": "uncategorized",
        "thought_type": "original",
        "source_ids": [],
        "quality_flags": [],
        "effective_confidence": 1.0,
        "pheromone_weight": 1.0,
        "created_at": NOW,
        "topic": "",
        "temporal_scope": None,
        "agent_id": None,
        "contributor_id": "someone",
    }
    values.update(overrides)
    return SimpleNamespace(**values)


@pytest.fixture(autouse=True)
def _multipliers_alone(request, monkeypatch):
    """The multiplier tests see relevance = similarity (no lexical side), the real-model and relevance
    tests the shipped weighted sum."""
    if "real_model" not in request.node.name and "relevance" not in request.node.name:
        monkeypatch.setattr(ranking, "LEXICAL_WEIGHT", 0.0)


def score_of(similarity: float, **overrides) -> float:
    (candidate,) = ranking.rank([ranking.Candidate(thought=fake_thought(**overrides), similarity=similarity)])
    return candidate.score


# --- each multiplier ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, factor",
    [
        ({}, 1.0),
        ({"superseded": True}, 0.7),
        ({"superseded": True, "superseded_by_category": "correction", "superseded_by_id": uuid.uuid4()}, 0.5),
        ({"thought_category": "correction"}, 1.3),
        ({"quality_flags": ["keyword_echo"]}, 0.8),
        ({"quality_flags": ["contradicts_correction"]}, 0.5),
        ({"quality_flags": ["orphaned_reference"]}, 0.8),
        ({"quality_flags": ["stale"]}, 0.85),
        ({"quality_flags": ["near_duplicate"]}, 0.9),
        ({"quality_flags": ["unverified"]}, 0.9),
        ({"quality_flags": ["keyword_echo", "stale"]}, 0.8 * 0.85),
        ({"quality_flags": ["keyword_echo", "keyword_echo"]}, 0.8),  # a flag counts once
        ({"effective_confidence": 0.5}, 0.5),
        ({"pheromone_weight": 10.0}, 1.0 + ranking.PHEROMONE_BOOST_MAX),
        ({"pheromone_weight": 5.5}, 1.0 + ranking.PHEROMONE_BOOST_MAX / 2),
        ({"pheromone_weight": 0.1}, 1.0),  # decayed: no boost, no penalty
        ({"pheromone_weight": 10.0, "superseded": True}, 0.7),  # no boost for superseded thoughts
    ],
)
def test_each_multiplier(overrides, factor):
    assert score_of(0.5, **overrides) == pytest.approx(0.5 * factor)


def test_refinement_of_a_superseded_thought_in_the_same_results_gets_the_boost():
    old = fake_thought(superseded=True, contributor_id="ada")
    new = fake_thought(thought_type="refinement", source_ids=[old.id], contributor_id="bob")
    unrelated_refinement = fake_thought(thought_type="refinement", source_ids=[uuid.uuid4()])
    ranked = ranking.rank(
        [
            ranking.Candidate(thought=old, similarity=0.8),
            ranking.Candidate(thought=new, similarity=0.5),
            ranking.Candidate(thought=unrelated_refinement, similarity=0.5),
        ]
    )
    scores = {c.thought.id: c.score for c in ranked}
    assert scores[new.id] == pytest.approx(0.6)
    assert scores[old.id] == pytest.approx(0.56)
    assert scores[unrelated_refinement.id] == pytest.approx(0.5)
    assert [c.thought.id for c in ranked] == [new.id, old.id, unrelated_refinement.id]  # re-sorted
    assert "refinement of a superseded result ×1.2" in ranked[0].matching_reason


def test_consolidation_of_a_present_superseded_thought_gets_the_boost():
    old = fake_thought(superseded=True, agent_id=uuid.uuid4())
    merged = fake_thought(thought_type="consolidation", source_ids=[uuid.uuid4(), old.id], agent_id=uuid.uuid4())
    ranked = ranking.rank([ranking.Candidate(thought=old, similarity=0.9), ranking.Candidate(merged, 0.5)])
    assert {c.thought.id: c.score for c in ranked}[merged.id] == pytest.approx(0.6)


def test_a_new_version_of_ones_own_thought_gets_no_lead_over_others_only_its_place_above_it():
    """The replacement rule puts it above what it replaces; the ×1.2 is for a teammate's thought."""
    agent = uuid.uuid4()
    old = fake_thought(superseded=True, agent_id=agent, contributor_id="dev-1")
    own = fake_thought(thought_type="refinement", source_ids=[old.id], agent_id=agent, contributor_id="dev-1 renamed")
    other = fake_thought(agent_id=uuid.uuid4())
    ranked = ranking.rank(
        [
            ranking.Candidate(old, 0.8, live_replacement_id=str(own.id)),
            ranking.Candidate(own, 0.5),
            ranking.Candidate(other, 0.58),
        ]
    )
    scores = {c.thought.id: c.score for c in ranked}
    assert [c.thought.id for c in ranked] == [other.id, own.id, old.id]
    assert scores[own.id] == pytest.approx(0.56)  # lifted to its source's score (0.8 × 0.7), not × 1.2
    assert "of a superseded result" not in ranked[1].matching_reason


def test_score_is_capped_at_one():
    assert score_of(0.95, thought_category="correction", pheromone_weight=10.0) == 1.0


def test_multipliers_apply_in_the_documented_order_and_compose():
    score = score_of(
        0.6,
        thought_category="correction",
        quality_flags=["keyword_echo"],
        effective_confidence=0.9,
        pheromone_weight=10.0,
    )
    assert score == pytest.approx(0.6 * 1.3 * 0.8 * 0.9 * (1 + ranking.PHEROMONE_BOOST_MAX))


def test_quality_factor_only_when_enabled(settings):
    settings.QUALITY_RANKING_ENABLED = False
    assert score_of(0.5, effective_confidence=0.2) == pytest.approx(0.5)
    settings.QUALITY_RANKING_ENABLED = True
    assert score_of(0.5, effective_confidence=0.2) == pytest.approx(0.1)


def test_below_minimum_similarity_is_not_a_result():
    assert ranking.rank([ranking.Candidate(thought=fake_thought(), similarity=ranking.MIN_SIMILARITY - 0.01)]) == []


def test_ties_prefer_not_superseded_then_newest():
    old = fake_thought(created_at=NOW - timedelta(days=1))
    new = fake_thought(created_at=NOW)
    superseded = fake_thought(superseded=True, created_at=NOW + timedelta(days=1))
    ranked = ranking.rank(
        [
            ranking.Candidate(thought=old, similarity=0.5),
            ranking.Candidate(thought=superseded, similarity=0.5 / 0.7),
            ranking.Candidate(thought=new, similarity=0.5),
        ]
    )
    assert [c.thought for c in ranked] == [new, old, superseded]


def test_pheromone_never_lifts_a_superseded_thought_above_its_replacement():
    def ranked_ids(sim_old, sim_new, weight_old, weight_new, kind) -> list:
        replacement = fake_thought(
            id="new",
            thought_type="refinement" if kind == "refinement" else "original",
            thought_category="correction" if kind == "correction" else "uncategorized",
            source_ids=["old"],
            pheromone_weight=weight_new,
        )
        old = fake_thought(
            id="old",
            superseded=True,
            refined_by_id="new" if kind == "refinement" else None,
            superseded_by_id="new" if kind == "correction" else None,
            superseded_by_category="correction" if kind == "correction" else None,
            pheromone_weight=weight_old,
        )
        ranked = ranking.rank([ranking.Candidate(old, sim_old), ranking.Candidate(replacement, sim_new)])
        return [c.thought.id for c in ranked]

    similarities = [0.25, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    checked = 0
    for sim_old, sim_new, weight_old, weight_new, kind in itertools.product(
        similarities, similarities, [0.1, 1.0, 5.0, 10.0], [0.1, 1.0, 10.0], ["refinement", "correction"]
    ):
        if ranked_ids(sim_old, sim_new, 1.0, 1.0, kind)[0] == "new":
            checked += 1
            assert ranked_ids(sim_old, sim_new, weight_old, weight_new, kind)[0] == "new", (
                sim_old,
                sim_new,
                weight_old,
                weight_new,
                kind,
            )
    assert checked > 500


def test_pheromone_boost_is_bounded():
    assert ranking.pheromone_boost(100.0) == pytest.approx(1.0 + ranking.PHEROMONE_BOOST_MAX)
    assert ranking.pheromone_boost(ranking.PHEROMONE_MAX) == pytest.approx(1.0 + ranking.PHEROMONE_BOOST_MAX)
    assert ranking.PHEROMONE_BOOST_MAX <= 0.05  # a tie-break, not a vote
    assert ranking.pheromone_boost(1.0) == 1.0 and ranking.pheromone_boost(0.1) == 1.0


def test_with_a_topic_filter_the_newest_snapshot_comes_first():
    snapshot = dict(thought_category="state_snapshot", topic="launch")
    oldest = fake_thought(temporal_scope=date(2026, 1, 1), **snapshot)
    middle = fake_thought(temporal_scope=date(2026, 2, 1), **snapshot)
    newest = fake_thought(temporal_scope=date(2026, 3, 1), **snapshot)
    other = fake_thought(thought_category="decision_record", topic="launch")
    candidates = [
        ranking.Candidate(oldest, 0.9),
        ranking.Candidate(other, 0.8),
        ranking.Candidate(middle, 0.7),
        ranking.Candidate(newest, 0.5),
    ]
    ranked = ranking.rank(candidates, filter_topic="launch")
    # Snapshots swap among their own slots (1st, 3rd, 4th); the decision record keeps the 2nd.
    assert [c.thought for c in ranked] == [newest, other, middle, oldest]
    assert "newest state snapshot of the topic" in ranked[0].matching_reason
    unfiltered = ranking.rank(
        [ranking.Candidate(t, s) for t, s in ((oldest, 0.9), (other, 0.8), (middle, 0.7), (newest, 0.5))]
    )
    assert [c.thought for c in unfiltered] == [oldest, other, middle, newest]


# --- retrieval quality with the real model (all-MiniLM-L6-v2) -------------------------------------
CORPUS = {
    "deploy": "The deploy pipeline runs database migrations before it restarts the web workers.",
    "broker": "Redis is the Celery message broker in production; the filesystem broker is for laptops.",
    "garden": "Tomatoes need at least six hours of direct sun a day and deep, infrequent watering.",
    "auth": "Agents authenticate with a bearer token; only its SHA-256 hash is stored in the database.",
    "backup": "Nightly pg_dump backups are kept for thirty days in the object store.",
}
QUERIES = [
    ("How are schema migrations applied when we ship a release?", "deploy"),
    ("Which message queue does Celery use in prod?", "broker"),
    ("How much sunlight do tomato plants need?", "garden"),
    ("How do agents log in to the API?", "auth"),
    ("How long do we keep database backups?", "backup"),
]


@pytest.fixture
def real_corpus(db, space, thought_factory):
    vectors = embed_many(list(CORPUS.values()))
    return {
        key: thought_factory(text, embedding=vector)
        for (key, text), vector in zip(CORPUS.items(), vectors, strict=True)
    }


def memory(client, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("query, expected", QUERIES)
def test_real_model_puts_the_relevant_thought_first(dev, real_corpus, query, expected):
    sources = memory(dev, prompt=query)["result"]["sources"]
    assert sources[0]["thought_id"] == str(real_corpus[expected].id)
    assert sources[0]["matching_reason"].startswith("similarity")


@pytest.mark.django_db
def test_real_model_a_refinement_outranks_what_it_refines(dev, real_corpus):
    original = real_corpus["backup"]
    body = memory(
        dev,
        prompt="Backups: nightly pg_dump plus WAL archiving; dumps are kept 30 days, WAL 7 days, in the object store.",
        refines=str(original.id),
    )
    refinement_id = body["trace"]["thought_id"]
    Thought.objects.filter(pk=original.pk).update(pheromone_weight=10.0)  # heavily used, still loses
    sources = memory(dev, prompt="How long do we keep database backups?")["result"]["sources"]
    ids = [s["thought_id"] for s in sources]
    assert ids.index(refinement_id) < ids.index(str(original.id))
    old = sources[ids.index(str(original.id))]
    assert old["superseded"] is True and old["refined_by"] == refinement_id
    assert "superseded" in old["matching_reason"]


@pytest.mark.django_db
def test_real_model_a_correction_outranks_the_fact_it_corrects(dev, thought_factory):
    """The seed's case study: the wrong fact matches the question better, the correction must win."""
    wrong_text = "Thomas is a certified Neuroimaginations coach."
    wrong = thought_factory(wrong_text, embedding=embed(wrong_text), pheromone_weight=10.0, access_count=15)
    correction_text = (
        "Thomas is NOT the certified coach; Neuroimaginations coaching is offered through a joint venture "
        "with Gerhard Quiring."
    )
    correction = thought_factory(correction_text, embedding=embed(correction_text), thought_category="correction")
    Thought.objects.filter(pk=wrong.pk).update(superseded=True, superseded_by=correction)
    sources = memory(dev, prompt="Who offers the Neuroimaginations coaching?")["result"]["sources"]
    assert [s["thought_id"] for s in sources[:2]] == [str(correction.id), str(wrong.id)]
    assert "correction boost ×1.3" in sources[0]["matching_reason"]
    assert "superseded by correction" in sources[1]["matching_reason"]


@pytest.mark.django_db
def test_real_model_topic_filter_prefers_the_newest_snapshot(dev, thought_factory):
    texts = {
        date(2026, 1, 10): "Launch state 2026-01-10: pricing drafted, landing page in progress, beta list at 40.",
        date(2026, 2, 20): "Launch state 2026-02-20: pricing final, landing page live, beta list at 180, PR next.",
    }
    vectors = embed_many(list(texts.values()))
    ids = {}
    for (scope, text), vector in zip(texts.items(), vectors, strict=True):
        thought = thought_factory(
            text, embedding=vector, thought_category="state_snapshot", topic="launch", temporal_scope=scope
        )
        ids[scope] = str(thought.id)
    sources = memory(dev, prompt="What is the current launch state? pricing drafted", filter_topic="launch")["result"][
        "sources"
    ]
    assert [s["thought_id"] for s in sources] == [ids[date(2026, 2, 20)], ids[date(2026, 1, 10)]]
    assert sources[0]["temporal_scope"] == "2026-02-20"
    # Without the topic filter, similarity alone puts the older snapshot (it says "drafted") first.
    unfiltered = memory(dev, prompt="What is the current launch state? pricing drafted")["result"]["sources"]
    assert [s["thought_id"] for s in unfiltered] == [ids[date(2026, 1, 10)], ids[date(2026, 2, 20)]]


def test_candidate_datetime_tiebreak_handles_missing_created_at():
    thought = fake_thought(created_at=None)
    assert ranking.rank([ranking.Candidate(thought, 0.5)])[0].score == pytest.approx(0.5)


# --- relevance: the weighted sum of the dense and lexical sides ---------------------------------------
def _candidate(similarity, bm25=0.0, idf_total=5.0, **overrides):
    return ranking.Candidate(fake_thought(**overrides), similarity, bm25=bm25, idf_total=idf_total)


def test_relevance_is_the_weighted_sum_of_cosine_and_the_lexical_share():
    best, other = _candidate(0.8, bm25=4.0), _candidate(0.5, bm25=1.0)
    ranked = ranking.rank([other, best])
    assert ranked[0] is best
    assert best.score == pytest.approx((1 - ranking.LEXICAL_WEIGHT) * 0.8 + ranking.LEXICAL_WEIGHT * 4.0 / 5.0)
    assert other.score == pytest.approx((1 - ranking.LEXICAL_WEIGHT) * 0.5 + ranking.LEXICAL_WEIGHT * 1.0 / 5.0)
    assert best.score == pytest.approx(ranking.weighted(0.8, 0.8))


def _paraphrase_case():
    """The answer shares no word with the question but is the closest by cosine; twelve distractors
    each share a word (their BM25 in the reverse order of their cosine)."""
    answer = _candidate(0.45)
    distractors = [_candidate(0.30 - 0.01 * i, bm25=1.0 + 0.2 * i, idf_total=10.0) for i in range(1, 13)]
    return answer, distractors


def test_relevance_keeps_the_dense_sides_first_place_above_one_word_lexical_distractors():
    """The paraphrase case with the shipped lexical weight (0.4, chosen on the retrieval benchmark's dev
    split): the answer stays first, above distractors that are both far by cosine and weak on the
    lexical side."""
    answer, distractors = _paraphrase_case()
    ranked = ranking.rank([answer, *distractors], limit=10)
    assert ranked[0] is answer


def test_relevance_a_heavier_lexical_side_loses_that_answer(monkeypatch):
    """Why the lexical weight matters for paraphrases: at 0.6 the shared words win and the answer drops
    out of the top 10 (benchmarks/retrieval/README.md, "Dev sweep")."""
    monkeypatch.setattr(ranking, "LEXICAL_WEIGHT", 0.6)
    answer, distractors = _paraphrase_case()
    assert answer not in ranking.rank([answer, *distractors], limit=10)


def test_relevance_of_a_pending_embedding_uses_its_stand_in_on_the_dense_side():
    pending = ranking.Candidate(fake_thought(), None, bm25=5.0, idf_total=5.0, embedding_pending=True)
    weak = _candidate(0.3)
    ranked = ranking.rank([weak, pending])
    assert ranked[0] is pending  # stand-in 0.8 > 0.3, and a full lexical match
    assert pending.relevance == pytest.approx(ranking.weighted(0.8, 1.0))


def test_a_lifted_replacement_keeps_its_place_and_is_rated_on_its_own_score():
    """A replacement below what it replaced is lifted above it (the ordering invariant), but its calibrated
    relevance is its own: a text sent as a refinement of a fitting thought, about something else, is not
    rated as fitting the question (it would be injected)."""
    replacement = fake_thought(id="new", thought_type="refinement", source_ids=["old"])
    old = fake_thought(id="old", superseded=True, refined_by_id="new")
    ranked = ranking.rank(
        [ranking.Candidate(old, 0.8, live_replacement_id="new"), ranking.Candidate(replacement, 0.31)]
    )
    assert [c.thought.id for c in ranked] == ["new", "old"]
    lifted, superseded = ranked
    assert lifted.score == superseded.score and lifted.own_score < lifted.score
    assert lifted.probability < superseded.probability
    alone = ranking.rank([ranking.Candidate(fake_thought(id="alone", thought_type="refinement"), 0.31)])
    assert lifted.probability <= alone[0].probability + 0.05
