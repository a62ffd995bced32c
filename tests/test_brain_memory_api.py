"""The memory endpoint (SPEC 2.2): wire format, validation, every orchestration step, in order.

Tests about the orchestration alone use the deterministic fake embedder; every test that claims what
the endpoint finds, ranks, flags as a near-duplicate or offers as disambiguation uses the real model
(``embedding="real"`` thoughts, no ``fake_embedder``), as tests/test_brain_ranking.py does.
"""

from __future__ import annotations

import math
import uuid

import pytest
from django.db import transaction

from brain import embedding, ranking
from brain.choices import SuggestionOrigin, SuggestionStatus
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.selectors import search
from brain.services.memory import steps
from brain.services.suggestions import suggestion_create
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db

STATEMENT = "The deploy pipeline runs database migrations before it restarts the web workers."
RESULT_FIELDS = {"response", "sources", "highways_nearby", "disambiguation", "guidance", "pending_corrections"}
TRACE_FIELDS = {
    "session_id",
    "operations",
    "thoughts_retrieved",
    "thoughts_contributed",
    "contribution_threshold_met",
    "context_used",
    "retrieval_method",
    "thought_id",
    "already_known",  # beyond the seed brain: the prompt repeated a live thought (one row per fact)
    "lineage_summary",
}
SOURCE_FIELDS = {
    "thought_id",
    "contributor",
    "score",
    "relevance",
    "content_preview",
    "refined_by",
    "superseded",
    "thought_category",
    "topic",
    "temporal_scope",
    "quality_flags",
    "matching_reason",
    "effective_confidence",
}


def memory(client, status=200, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    assert body["error"]["message"]


# --- wire format ----------------------------------------------------------------------------------
def test_response_has_exactly_the_fields_of_the_spec(dev, fake_embedder, thought_factory):
    thought_factory("Database migrations run in the deploy pipeline before workers restart.")
    body = memory(dev, prompt=STATEMENT, agent_id="dev-1", agent_name="Dev One", context="task: deploy")
    assert set(body) == {"result", "trace"}
    assert set(body["result"]) == RESULT_FIELDS
    assert set(body["trace"]) == TRACE_FIELDS
    assert body["result"]["sources"], body
    for source in body["result"]["sources"]:
        assert set(source) == SOURCE_FIELDS
    trace = body["trace"]
    assert trace["thoughts_contributed"] == 1 and trace["contribution_threshold_met"] is True
    assert trace["context_used"] is True
    assert trace["retrieval_method"] == "hnsw+fulltext"
    stored = Thought.objects.get(pk=trace["thought_id"])
    assert stored.content == STATEMENT
    # The contributor is the token's agent; the body's agent_id/agent_name are kept as metadata only.
    assert stored.contributor_id == "dev-1" and stored.contributor_name == "dev-1"
    assert stored.agent == dev.agent
    assert stored.context_metadata == {
        "session_id": trace["session_id"],
        "context": "task: deploy",
        "claimed_agent_id": "dev-1",
        "claimed_agent_name": "Dev One",
    }


def test_unauthenticated_and_bad_token_are_401(anon, fake_embedder):
    assert_error(anon.post("/api/v1/memory", {"prompt": STATEMENT}, format="json"), 401, "UNAUTHENTICATED")
    anon.credentials(HTTP_AUTHORIZATION="Bearer col_nope")
    assert_error(anon.get("/api/v1/memory", {"prompt": "x"}), 401, "UNAUTHENTICATED")
    assert Thought.objects.count() == 0


def test_get_takes_the_same_fields_as_query_parameters(dev, fake_embedder, thought_factory):
    a = thought_factory("First thought about release trains and deployment windows.")
    b = thought_factory("Second thought about release trains and freeze periods.")
    response = dev.get(
        "/api/v1/memory",
        {
            "prompt": "Release trains and deployment windows: trains leave every second Tuesday; freeze periods "
            "start the Friday before.",
            "consolidates": f"{a.id},{b.id}",
            "tags": ["release", "process"],
            "topic": "release",
            "temporal_scope": "2026-02-01",
            "source_ref": '{"type": "url", "value": "https://wiki/release", "project": "colony"}',
            "limit": "5",
        },
    )
    assert response.status_code == 200, response.content
    stored = Thought.objects.get(pk=response.json()["trace"]["thought_id"])
    assert stored.thought_type == "consolidation" and stored.source_ids == [a.id, b.id]
    assert stored.tags == ["release", "process"] and stored.topic == "release"
    assert stored.temporal_scope.isoformat() == "2026-02-01"
    assert stored.source_ref == {"type": "url", "value": "https://wiki/release", "project": "colony"}


def test_get_with_bad_source_ref_json_is_400(dev, fake_embedder):
    assert_error(dev.get("/api/v1/memory", {"prompt": STATEMENT, "source_ref": "{nope"}), 400, "VALIDATION_ERROR")
    assert Thought.objects.count() == 0


# --- validation -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"prompt": ""},
        {"prompt": "   "},
        {"prompt": "x" * 10001},
        {"prompt": STATEMENT, "agent_id": "a" * 101},
        {"prompt": STATEMENT, "agent_name": "a" * 201},
        {"prompt": STATEMENT, "context": "c" * 2001},
        {"prompt": STATEMENT, "session_id": "s" * 101},
        {"prompt": STATEMENT, "refines": "not-a-uuid"},
        {"prompt": STATEMENT, "consolidates": "not-a-list"},
        {"prompt": STATEMENT, "consolidates": [str(uuid.uuid4()), "nope"]},
        {"prompt": STATEMENT, "thought_category": "gossip"},
        {"prompt": STATEMENT, "thought_category": "transition_marker"},
        {"prompt": STATEMENT, "topic": "t" * 201},
        {"prompt": STATEMENT, "temporal_scope": "26/02/2026"},
        {"prompt": STATEMENT, "source_ref": {"type": "email", "value": "x"}},
        {"prompt": STATEMENT, "source_ref": {"type": "task"}},
        {"prompt": STATEMENT, "source_ref": "task:x"},
        {"prompt": STATEMENT, "alternatives_considered": [1, 2]},
        {"prompt": STATEMENT, "corrected_fact": "c" * 5001},
        {"prompt": STATEMENT, "supersedes": ["nope"]},
        {"prompt": STATEMENT, "related_thoughts": "nope"},
        {"prompt": STATEMENT, "tags": ["t"] * 21},
        {"prompt": STATEMENT, "tags": ["t" * 101]},
        {"prompt": STATEMENT, "filter_category": "gossip"},
        {"prompt": STATEMENT, "limit": 0},
        {"prompt": STATEMENT, "limit": 51},
        {"prompt": STATEMENT, "limit": "many"},
    ],
)
def test_invalid_input_is_400_and_changes_nothing(dev, fake_embedder, body):
    assert_error(dev.post("/api/v1/memory", body, format="json"), 400, "VALIDATION_ERROR")
    assert Thought.objects.count() == 0 and QueryLog.objects.count() == 0


def test_body_that_is_not_an_object_is_400(dev, fake_embedder):
    assert_error(dev.post("/api/v1/memory", ["prompt"], format="json"), 400, "VALIDATION_ERROR")


def test_mutual_exclusion(dev, fake_embedder, thought_factory):
    a, b = thought_factory("alpha thought content here"), thought_factory("beta thought content here")
    response = dev.post(
        "/api/v1/memory",
        {"prompt": STATEMENT, "refines": str(a.id), "consolidates": [str(a.id), str(b.id)]},
        format="json",
    )
    assert_error(response, 400, "MUTUAL_EXCLUSION")
    assert Thought.objects.count() == 2 and not Thought.objects.filter(superseded=True).exists()


@pytest.mark.parametrize("count", [0, 1, "duplicate"])
def test_min_consolidation(dev, fake_embedder, thought_factory, count):
    a = thought_factory("alpha thought content here")
    ids = {0: [], 1: [str(a.id)], "duplicate": [str(a.id), str(a.id)]}[count]
    assert_error(
        dev.post("/api/v1/memory", {"prompt": STATEMENT, "consolidates": ids}, format="json"), 400, "MIN_CONSOLIDATION"
    )
    assert Thought.objects.count() == 1


@pytest.mark.parametrize("field", ["refines", "consolidates", "related_thoughts", "supersedes"])
def test_unknown_or_other_space_ids_are_404(dev, fake_embedder, thought_factory, other_space, field):
    mine = thought_factory("a thought in my own space about caching")
    foreign = thought_factory("a thought in another space about caching", in_space=other_space)
    for missing in (foreign.id, uuid.uuid4()):
        value = str(missing) if field == "refines" else [str(mine.id), str(missing)]
        response = dev.post("/api/v1/memory", {"prompt": STATEMENT, field: value}, format="json")
        assert_error(response, 404, "THOUGHT_NOT_FOUND")
        assert str(missing) in response.json()["error"]["message"]
    assert Thought.objects.count() == 2 and QueryLog.objects.count() == 0
    assert not Thought.objects.filter(superseded=True).exists()


def test_embedding_failure_is_500_and_stores_nothing(dev, monkeypatch):
    def broken(texts, *, batch_size=64):
        raise embedding.EmbeddingError("model file missing")

    monkeypatch.setattr(embedding, "embed_many", broken)
    response = dev.post("/api/v1/memory", {"prompt": STATEMENT}, format="json")
    assert_error(response, 500, "EMBEDDING_FAILED")
    assert Thought.objects.count() == 0 and QueryLog.objects.count() == 0


# --- session --------------------------------------------------------------------------------------
def test_session_is_created_when_missing_and_kept_when_given(dev, fake_embedder):
    first = memory(dev, prompt="what do we know?")["trace"]
    assert uuid.UUID(first["session_id"]) and "session:new" in first["operations"]
    second = memory(dev, prompt="and more?", session_id=first["session_id"])["trace"]
    assert second["session_id"] == first["session_id"] and "session:continue" in second["operations"]
    assert QueryLog.objects.filter(session_id=first["session_id"]).count() == 2


# --- contribution threshold -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "prompt, stored",
    [
        ("x" * 50, False),
        ("x" * 51, True),
        ("  " + "y" * 50 + "  ", False),  # trimmed to 50
        ("Why does the deploy pipeline run the migrations before restarting?", False),
        ("The deploy failed twice. Why does the pipeline run migrations before restarting?", True),
        ("The deploy failed twice! Is the pipeline running migrations before restarting?", True),
        ("Based on what you found, the deploy pipeline should run migrations first.", False),
        ("You said the deploy pipeline runs the migrations before it restarts workers.", False),
        ("you told me the deploy pipeline runs the migrations before it restarts workers.", False),
        ("Regarding your answer, the deploy pipeline runs migrations before restarts.", False),
        ("About your response: the deploy pipeline runs migrations before it restarts.", False),
        ("The pipeline, based on the runbook, runs migrations before restarting workers.", True),
    ],
)
def test_contribution_threshold(dev, prompt, stored):
    trace = memory(dev, prompt=prompt)["trace"]
    assert trace["contribution_threshold_met"] is stored
    assert (trace["thought_id"] is not None) is stored
    assert Thought.objects.count() == (1 if stored else 0)


def test_refines_bypasses_the_threshold(dev, thought_factory):
    original = thought_factory("Original note about the cache layer and its eviction policy.", embedding="real")
    trace = memory(dev, prompt="The cache layer's eviction policy is LRU, not LFU.", refines=str(original.id))["trace"]
    assert trace["contribution_threshold_met"] is False and trace["thoughts_contributed"] == 1
    assert "threshold:bypassed(refines)" in trace["operations"]
    assert Thought.objects.get(pk=trace["thought_id"]).thought_type == "refinement"


def test_consolidates_bypasses_the_threshold(dev, thought_factory):
    a = thought_factory("Note one about the cache layer.", embedding="real")
    b = thought_factory("Note two about the cache layer.", embedding="real")
    trace = memory(dev, prompt="Cache: LRU.", consolidates=[str(a.id), str(b.id)])["trace"]
    assert trace["thoughts_contributed"] == 1 and "threshold:bypassed(consolidates)" in trace["operations"]


def test_a_correction_bypasses_the_threshold(dev, thought_factory):
    wrong = thought_factory("The cache uses LFU eviction.", topic="cache", embedding="real")
    trace = memory(
        dev,
        prompt="Cache is LRU.",
        thought_category="correction",
        topic="cache",
        corrected_fact="The cache uses LFU.",
        correct_fact="The cache uses LRU.",
        supersedes=[str(wrong.id)],
    )["trace"]
    assert trace["thoughts_contributed"] == 1 and "threshold:bypassed(correction)" in trace["operations"]
    assert Thought.objects.get(pk=trace["thought_id"]).thought_category == "correction"
    assert Thought.objects.get(pk=wrong.pk).superseded_by_id == uuid.UUID(trace["thought_id"])


# --- contribute, embed once, retrieve -------------------------------------------------------------
def test_query_is_embedded_once_and_the_same_vector_is_stored(dev, fake_embedder, thought_factory):
    thought_factory("Database migrations run in the deploy pipeline before restarts.")
    fake_embedder.clear()
    trace = memory(dev, prompt=STATEMENT)["trace"]
    assert fake_embedder == [STATEMENT]
    stored = Thought.objects.get(pk=trace["thought_id"])
    assert list(stored.embedding) == pytest.approx(fake_vector(STATEMENT), abs=1e-6)
    assert stored.embedding_model


def test_the_contributed_thought_is_not_in_its_own_results(dev, fake_embedder):
    body = memory(dev, prompt=STATEMENT)
    assert body["result"]["sources"] == [] and body["trace"]["thoughts_retrieved"] == 0
    again = memory(dev, prompt="deploy pipeline migrations")
    assert [s["thought_id"] for s in again["result"]["sources"]] == [body["trace"]["thought_id"]]


def test_every_structured_field_is_stored(dev, fake_embedder, thought_factory):
    other = thought_factory("A related thought about the cache layer.")
    wrong = thought_factory("The cache uses LFU eviction.")
    body = memory(
        dev,
        prompt="Decision: the cache uses LRU eviction because the access pattern is recency-heavy.",
        thought_category="decision_record",
        topic="cache",
        temporal_scope="2026-03-01",
        source_ref={"type": "commit", "value": "abc123", "project": "colony"},
        alternatives_considered=["LFU", "ARC"],
        corrected_fact="The cache uses LFU eviction.",
        correct_fact="The cache uses LRU eviction.",
        supersedes=[str(wrong.id)],
        related_thoughts=[str(other.id)],
        tags=["cache", "decision", "cache"],
    )
    thought = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert thought.thought_category == "decision_record" and thought.topic == "cache"
    assert thought.temporal_scope.isoformat() == "2026-03-01"
    assert thought.source_ref == {"type": "commit", "value": "abc123", "project": "colony"}
    assert thought.alternatives_considered == "LFU\nARC"
    assert thought.corrected_fact == "The cache uses LFU eviction."
    assert thought.correct_fact == "The cache uses LRU eviction."
    assert thought.supersedes == [wrong.id]
    assert thought.tags == ["cache", "decision"]
    assert list(thought.related_thoughts.all()) == [other]
    assert list(other.related_thoughts.all()) == [thought]  # bidirectional


# --- filters --------------------------------------------------------------------------------------
def test_topic_and_category_filters_and_limit(dev, thought_factory):
    for i in range(6):
        thought_factory(
            f"cache eviction note number {i} about LRU",
            topic="cache",
            thought_category="operational_learning",
            embedding="real",
        )
    thought_factory("cache eviction note in another topic about LRU", topic="cdn", embedding="real")
    thought_factory(
        "cache eviction decision about LRU", topic="cache", thought_category="decision_record", embedding="real"
    )
    body = memory(dev, prompt="cache eviction LRU", filter_topic="cache", limit=3)
    assert len(body["result"]["sources"]) == 3
    assert all(s["topic"] == "cache" and "topic match" in s["matching_reason"] for s in body["result"]["sources"])
    body = memory(dev, prompt="cache eviction LRU", filter_topic="cache", filter_category="decision_record")
    assert [s["thought_category"] for s in body["result"]["sources"]] == ["decision_record"]
    assert "category match" in body["result"]["sources"][0]["matching_reason"]


def test_a_weak_category_filter_is_relaxed(dev, thought_factory):
    thought_factory(
        "cache eviction uses LRU in the web tier", thought_category="operational_learning", embedding="real"
    )
    thought_factory(
        "completely unrelated words about gardening tomatoes", thought_category="decision_record", embedding="real"
    )
    body = memory(dev, prompt="cache eviction uses LRU in the web tier", filter_category="decision_record")
    assert body["trace"]["retrieval_method"] == "hnsw+fulltext (category filter relaxed)"
    sources = body["result"]["sources"]
    assert sources[0]["thought_category"] == "operational_learning"
    assert all("relaxed filter" in s["matching_reason"] for s in sources)
    # One query-log row (its search's first round wrote it), naming what the relaxed round returned.
    (log,) = QueryLog.objects.filter(session_id=body["trace"]["session_id"])
    assert [result["id"] for result in log.results] == [s["thought_id"] for s in sources]


def test_a_sufficient_category_filter_is_not_relaxed(dev, thought_factory):
    thought_factory("cache eviction uses LRU in the web tier", thought_category="decision_record", embedding="real")
    thought_factory(
        "cache eviction uses LRU in the web tier today", thought_category="operational_learning", embedding="real"
    )
    body = memory(dev, prompt="cache eviction uses LRU in the web tier", filter_category="decision_record")
    assert body["trace"]["retrieval_method"] == "hnsw+fulltext"
    assert [s["thought_category"] for s in body["result"]["sources"]] == ["decision_record"]


def test_full_text_finds_a_thought_whose_embedding_is_pending(dev, fake_embedder, thought_factory):
    pending = thought_factory("Kubernetes ingress annotations for sticky sessions", embedding=None)
    assert Thought.objects.get(pk=pending.pk).embedding is None  # the job runs on commit, not here
    body = memory(dev, prompt="sticky sessions ingress")
    assert [s["thought_id"] for s in body["result"]["sources"]] == [str(pending.id)]
    assert "embedding pending" in body["result"]["sources"][0]["matching_reason"]


# --- disambiguation -------------------------------------------------------------------------------
@pytest.mark.parametrize("count, tags, expected", [(10, 3, True), (9, 3, False), (10, 2, False)])
def test_disambiguation(dev, thought_factory, count, tags, expected):
    """The real model: the thoughts are found by meaning, as an agent's would be."""
    for i in range(count):
        thought_factory(f"retry policy for the queue consumer variant {i}", tags=[f"tag{i % tags}"], embedding="real")
    body = memory(dev, prompt="retry policy queue consumer", limit=10)
    assert len(body["result"]["sources"]) == count
    disambiguation = body["result"]["disambiguation"]
    if expected:
        assert {o["tag"] for o in disambiguation["options"]} == {"tag0", "tag1", "tag2"}
        assert sum(o["count"] for o in disambiguation["options"]) == 10
        assert "disambiguation" in body["trace"]["operations"]
    else:
        assert disambiguation is None


# --- onboarding -----------------------------------------------------------------------------------
def test_onboarding_guidance_only_on_an_agents_first_call(agent_factory, fake_embedder):
    first, second = agent_factory("dev"), agent_factory("qa")
    assert "Welcome to the shared brain" in memory(first, prompt="anything?")["result"]["guidance"]
    assert memory(first, prompt="anything else?")["result"]["guidance"] is None
    assert "Welcome" in memory(second, prompt="anything?")["result"]["guidance"]


# --- near-duplicate -------------------------------------------------------------------------------
def _unit(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos)] + [0.0] * 382


@pytest.mark.parametrize(
    "similarity, flagged, advice",
    [(0.95, True, "consolidates"), (0.88, False, "refines"), (0.80, False, None)],
)
def test_near_duplicate_guidance(dev, monkeypatch, thought_factory, similarity, flagged, advice):
    new_text = "The cache uses LRU eviction with a 10 minute TTL for every tenant."
    existing = thought_factory("The cache evicts by LRU and keeps entries ten minutes.", embedding=_unit(1.0))
    monkeypatch.setattr(embedding, "embed_many", lambda texts, batch_size=64: [_unit(similarity) for _ in texts])
    memory(dev, prompt="warm up")  # onboarding out of the way
    body = memory(dev, prompt=new_text)
    thought = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert ("near_duplicate" in thought.quality_flags) is flagged
    guidance = body["result"]["guidance"] or ""
    if advice:
        assert str(existing.id) in guidance and f'"{advice}"' in guidance
    else:
        assert guidance == ""


def test_no_near_duplicate_advice_against_the_thought_being_refined(dev, thought_factory):
    original = thought_factory(STATEMENT, embedding="real")
    memory(dev, prompt="warm up")
    body = memory(dev, prompt=STATEMENT, refines=str(original.id))
    assert body["result"]["guidance"] is None
    assert Thought.objects.get(pk=body["trace"]["thought_id"]).quality_flags == []


@pytest.mark.parametrize("filtered", [False, True])
def test_a_contribution_reads_its_nearest_thought_from_the_search_that_ran_first(
    dev, monkeypatch, thought_factory, filtered
):
    # Unfiltered, the search that ran before storing fetched the nearest thought already: no scan of
    # its own. Filtered by topic, the search can't see the rest of the space: one scan of its own,
    # which finds the near-duplicate in another topic.
    existing = thought_factory(
        "The cache evicts by LRU and keeps entries ten minutes.", embedding=_unit(1.0), topic="cache"
    )
    monkeypatch.setattr(embedding, "embed_many", lambda texts, batch_size=64: [_unit(0.95) for _ in texts])
    scans = []
    nearest = search.thought_nearest
    monkeypatch.setattr(search, "thought_nearest", lambda **kwargs: scans.append(1) or nearest(**kwargs))
    memory(dev, prompt="warm up")
    extra = {"filter_topic": "billing"} if filtered else {}
    body = memory(dev, prompt="The cache uses LRU eviction with a 10 minute TTL for every tenant.", **extra)
    assert len(scans) == (1 if filtered else 0)
    assert Thought.objects.get(pk=body["trace"]["thought_id"]).quality_flags == ["near_duplicate"]
    assert f'"consolidates": ["{existing.id}"' in body["result"]["guidance"]


# --- implicit feedback ----------------------------------------------------------------------------
def test_implicit_feedback_rewards_what_the_session_was_shown(dev, fake_embedder, thought_factory):
    shown = thought_factory("The deploy pipeline restarts web workers one by one.")
    unseen = thought_factory("Gardening: tomatoes need sun.")
    session = memory(dev, prompt="deploy pipeline web workers")["trace"]["session_id"]
    after_query = Thought.objects.get(pk=shown.pk).pheromone_weight
    assert after_query == pytest.approx(1.05)
    body = memory(dev, prompt="Deploys restart web workers one by one, so there is no downtime.", session_id=session)
    # +0.05 for being retrieved again, +0.02 because the session contributed after seeing it.
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(after_query + 0.05 + 0.02)
    assert Thought.objects.get(pk=unseen.pk).pheromone_weight == pytest.approx(1.0)
    assert "implicit_feedback:after_response" in body["trace"]["operations"]


def test_implicit_feedback_counts_only_what_the_contributing_agent_was_shown(
    dev, agent_factory, fake_embedder, thought_factory
):
    """Another agent naming this session in its memory calls can't have what it was shown rewarded by
    this agent's contribution, nor have its own contribution reward what this agent was shown."""
    shown = thought_factory("The deploy pipeline restarts web workers one by one.")
    planted = thought_factory("Gardening: tomatoes need sun.")
    qa = agent_factory("qa")
    session = memory(dev, prompt="deploy pipeline web workers")["trace"]["session_id"]
    memory(qa, prompt="gardening tomatoes sun", session_id=session, contribute=False)
    weights = {t.pk: Thought.objects.get(pk=t.pk).pheromone_weight for t in (shown, planted)}

    memory(qa, prompt="Tomatoes want full sun and water daily, says the garden guide.", session_id=session)
    # qa's contribution retrieves the planted thought again (+0.05), nothing of what dev was shown.
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(weights[shown.pk])
    assert Thought.objects.get(pk=planted.pk).pheromone_weight == pytest.approx(weights[planted.pk] + 0.05 + 0.02)

    weights = {t.pk: Thought.objects.get(pk=t.pk).pheromone_weight for t in (shown, planted)}
    memory(
        dev,
        prompt="Web workers restart one at a time during deploys, so no downtime.",
        session_id=session,
        filter_topic="none",
    )
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(weights[shown.pk] + 0.02)
    assert Thought.objects.get(pk=planted.pk).pheromone_weight == pytest.approx(weights[planted.pk])


def test_implicit_feedback_counts_a_showing_for_one_contribution(dev, fake_embedder, thought_factory):
    """What the session saw before its previous contribution was rewarded then, not again."""
    shown = thought_factory("The deploy pipeline restarts web workers one by one.")
    session = memory(dev, prompt="deploy pipeline web workers")["trace"]["session_id"]
    # The first contribution rewards the query's result; it retrieves nothing itself (topic filter).
    one = memory(
        dev,
        prompt="Deploys restart web workers one by one, no downtime.",
        session_id=session,
        filter_topic="no-such-topic",
    )
    assert "implicit_feedback:after_response" in one["trace"]["operations"] and one["result"]["sources"] == []
    weight = Thought.objects.get(pk=shown.pk).pheromone_weight
    assert weight == pytest.approx(1.05 + 0.02)
    two = memory(
        dev,
        prompt="Gardening: tomatoes need full sun and water every day.",
        session_id=session,
        filter_topic="no-such-topic",
    )
    assert "implicit_feedback:after_response" in two["trace"]["operations"]  # scheduled: it found nothing new
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(weight)


def test_implicit_feedback_skips_log_entries_that_are_not_thought_ids(dev, fake_embedder, thought_factory):
    """An imported query log may hold anything in ``results``: what is not a thought id is skipped,
    the rest of the session's showings still count, and the contribution succeeds."""
    shown = thought_factory("The deploy pipeline restarts web workers one by one.")
    session = memory(dev, prompt="deploy pipeline web workers")["trace"]["session_id"]
    log = QueryLog.objects.get(session_id=session)
    for junk in (
        {"not": "a list"},
        ["a string", 7, None, {"score": 1}, {"id": "not-a-uuid"}, {"id": str(uuid.uuid4())}],
    ):
        QueryLog.objects.create(
            space=log.space, agent=log.agent, session_id=session, query_text="imported", results=junk
        )
    weight = Thought.objects.get(pk=shown.pk).pheromone_weight
    body = memory(
        dev, prompt="Deploys restart web workers one by one, so no downtime.", session_id=session, filter_topic="x"
    )
    assert "implicit_feedback:after_response" in body["trace"]["operations"]
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(weight + 0.02)


def test_no_implicit_feedback_without_a_contribution_or_in_a_new_session(dev, fake_embedder, thought_factory):
    shown = thought_factory("The deploy pipeline restarts web workers one by one.")
    session = memory(dev, prompt="deploy pipeline web workers")["trace"]["session_id"]
    memory(dev, prompt="deploy pipeline web workers?", session_id=session)  # a query, not a contribution
    memory(dev, prompt="Deploys restart web workers one by one, so there is no downtime at all.")  # new session
    assert Thought.objects.get(pk=shown.pk).pheromone_weight == pytest.approx(1.0 + 3 * 0.05)


# --- highways -------------------------------------------------------------------------------------
def test_highways_nearby(agent_factory, thought_factory):
    """The real model: an unrelated query must find no highway by meaning."""
    a, b = agent_factory("dev"), agent_factory("qa")
    road = thought_factory("Redis is the Celery broker in production deployments.", embedding="real")
    lonely = thought_factory("Redis broker configuration lives in the settings module.", embedding="real")
    Thought.objects.filter(pk=road.pk).update(access_count=4, accessed_by=["dev-x", "qa-y"])
    # Many accesses, but all by the caller: still one agent after this call's own access.
    Thought.objects.filter(pk=lonely.pk).update(access_count=9, accessed_by=[a.agent.name])
    highways = memory(a, prompt="Redis Celery broker")["result"]["highways_nearby"]
    assert [h["thought_id"] for h in highways] == [str(road.id)]
    # After this call's own access: 5 accesses by 3 agents.
    assert highways[0]["access_count"] == 5 and highways[0]["agents"] == 3 and highways[0]["traffic"] == 15
    assert memory(b, prompt="gardening tomatoes sun")["result"]["highways_nearby"] == []
    # Corrected, it is no highway any more (before: its traffic kept pointing agents at the wrong fact).
    fixed = b.post(f"/api/v1/thoughts/{road.id}/correct", {"correct_fact": "RabbitMQ is the broker."}, format="json")
    assert fixed.status_code == 201
    assert str(road.id) not in {
        h["thought_id"] for h in memory(a, prompt="Redis Celery broker")["result"]["highways_nearby"]
    }


# --- pending corrections --------------------------------------------------------------------------
def test_pending_corrections_for_this_agent_or_session(agent_factory, fake_embedder, thought_factory):
    me, other = agent_factory("dev"), agent_factory("qa")
    thought = thought_factory("The cache uses LFU eviction.", topic="cache")
    mine, _ = suggestion_create(
        thought=thought, statement="The cache uses LRU.", origin=SuggestionOrigin.QUALITY_JUDGE, agent=me.agent
    )
    session_one, _ = suggestion_create(
        thought=thought,
        statement="TTL is 10 minutes.",
        origin=SuggestionOrigin.CONTRADICTION_DETECTOR,
        session_id="s-1",
    )
    suggestion_create(
        thought=thought, statement="Not for me.", origin=SuggestionOrigin.QUALITY_JUDGE, agent=other.agent
    )
    CorrectionSuggestion.objects.create(  # one pending per agent and thought: a resolved one beside it
        space=thought.space, thought=thought, statement="Old news.", origin=SuggestionOrigin.QUALITY_JUDGE,
        agent=me.agent, status=SuggestionStatus.DISMISSED,
    )  # fmt: skip

    body = memory(me, prompt="cache?", session_id="s-1")
    pending = body["result"]["pending_corrections"]
    assert {p["suggestion_id"] for p in pending} == {str(mine.id), str(session_one.id)}
    item = next(p for p in pending if p["suggestion_id"] == str(mine.id))
    assert set(item) == {
        "suggestion_id", "thought_id", "thought_preview", "statement", "confidence", "reason", "origin", "draft",
        "created_at", "accept", "dismiss",
    }  # fmt: skip
    assert item["thought_id"] == str(thought.id) and item["draft"]["thought_category"] == "correction"
    assert item["accept"] == f"/api/v1/corrections/{mine.id}/accept"
    assert "pending correction" in body["result"]["guidance"]
    assert memory(me, prompt="cache?", session_id="s-2")["result"]["pending_corrections"] == [item]


# --- query log ------------------------------------------------------------------------------------
def test_every_retrieval_writes_a_query_log_row(dev, fake_embedder, thought_factory):
    thought_factory("The deploy pipeline restarts web workers one by one.")
    thought_factory("The deploy pipeline runs migrations first.")
    body = memory(dev, prompt="deploy pipeline", agent_id="wire-name")
    log = QueryLog.objects.get()
    assert log.space == dev.agent.space and log.agent == dev.agent and log.agent_ref == "wire-name"
    assert log.session_id == body["trace"]["session_id"] and log.query_text == "deploy pipeline"
    assert log.results == [{"id": s["thought_id"], "score": s["score"]} for s in body["result"]["sources"]]
    scores = [r["score"] for r in log.results]
    assert scores == sorted(scores, reverse=True) and len(scores) == 2
    memory(dev, prompt="nothing matches zzzz")
    assert QueryLog.objects.count() == 2 and QueryLog.objects.order_by("-id").first().results == []


# --- space isolation ------------------------------------------------------------------------------
def test_retrieval_never_crosses_spaces(agent_factory, fake_embedder, thought_factory, other_space):
    mine = agent_factory("dev")
    theirs = agent_factory("dev", in_space=other_space)
    thought_factory("Tenant A: the deploy pipeline runs migrations first.")
    foreign = thought_factory("Tenant B: the deploy pipeline runs migrations first.", in_space=other_space)
    ids = [s["thought_id"] for s in memory(mine, prompt="deploy pipeline migrations")["result"]["sources"]]
    assert str(foreign.id) not in ids and len(ids) == 1
    ids = [s["thought_id"] for s in memory(theirs, prompt="deploy pipeline migrations")["result"]["sources"]]
    assert ids == [str(foreign.id)]
    assert QueryLog.objects.filter(space=other_space).count() == 1


@pytest.mark.parametrize(
    "prompt",
    [
        "O'Reilly's \\ back\\slash 'quoted' & | ! :* <-> (paren) \"double\"",
        "https://example.com/a?b=1&c=2 user@example.com C:\\path\\file.txt",
        "!!! ??? ...",
        "the and of",  # stop words only: no full-text query at all
        "ünïcödé 日本語 emoji 🚀 ترجمة",
    ],
)
def test_any_text_is_a_valid_query(dev, fake_embedder, thought_factory, prompt):
    thought_factory("O'Reilly's backslash guide for C:\\path\\file.txt and https://example.com/a?b=1&c=2")
    body = memory(dev, prompt=prompt)  # 200, not a tsquery syntax error
    assert QueryLog.objects.get(session_id=body["trace"]["session_id"]).query_text == prompt.strip()


def test_steps_run_in_the_order_of_the_spec(agent_factory, thought_factory):
    """validate → session → threshold → embed + retrieve → flags → contribute (+ contradiction check
    scheduled) → reinforce → disambiguation → onboarding → near-duplicate → implicit feedback →
    highways → pending corrections. SPEC 2.2 retrieves after contributing; a plain contribution's
    search runs first and answers the same (the next test), and a refinement's or a correction's
    runs after its write (test_a_write_that_supersedes_searches_after_it). The real model:
    the near-duplicate is one by meaning."""
    agent = agent_factory("dev")
    prompt = "retry policy queue consumer " * 3
    for i in range(10):
        thought_factory(f"retry policy for the queue consumer variant {i}", tags=[f"tag{i % 3}"], embedding="real")
    thought_factory(prompt.strip() + ".", embedding="real")  # a near-duplicate (the same text is already known)
    session = "s-order"
    QueryLog.objects.create(
        space=agent.agent.space,
        agent=None,
        agent_ref="x",
        session_id=session,
        query_text="q",
        results=[{"id": str(Thought.objects.first().id), "score": 0.5}],
    )
    suggestion_create(
        thought=Thought.objects.first(), statement="fix", origin=SuggestionOrigin.QUALITY_JUDGE, agent=agent.agent
    )
    body = memory(agent, prompt=prompt, session_id=session, limit=10)
    operations = [op.split(":")[0] for op in body["trace"]["operations"]]
    assert operations == [
        "validate", "session", "threshold", "embed", "retrieve", "flags", "contribute", "contradiction_check",
        "reinforce", "disambiguation", "onboarding", "near_duplicate", "implicit_feedback", "highways",
        "pending_corrections",
    ]  # fmt: skip
    guidance = body["result"]["guidance"].splitlines()
    assert guidance[0].startswith("Welcome") and guidance[1].startswith("Near-duplicate")
    assert "pending correction" in guidance[2]


def _answer(body: dict) -> list[tuple]:
    return [(s["thought_id"], s["score"], s["matching_reason"]) for s in body["result"]["sources"]]


def test_a_plain_contribution_searching_first_answers_what_searching_after_it_would(
    dev, fake_embedder, thought_factory, monkeypatch
):
    # The search runs before the insert and counts the prompt in BM25's statistics as if stored: the
    # same sources, scores and reasons (BM25 figures included) as SPEC 2.2's order, contribute then
    # retrieve. The prompt's words are the query's, so a statistic that missed it would show.
    for i in range(12):
        thought_factory(f"Note {i}: the pgbouncer pool for celery workers is {10 + i}; deploy {i % 4} checked it.")
    thought_factory("Gardening: tomatoes need sun and the celery beds need water.")
    memory(dev, prompt="warm up")
    prompt = "The celery workers now use a pgbouncer pool of 40 connections since the deploy."
    answers, orders = [], []
    for searches_last in (False, True):
        if searches_last:
            monkeypatch.setattr(steps, "_write_moves_the_search", lambda call: call.contribute)
        with transaction.atomic():
            body = memory(dev, prompt=prompt, session_id="s-first")
            transaction.set_rollback(True)  # the same brain for both
        answers.append(_answer(body))
        orders.append([op.split(":")[0] for op in body["trace"]["operations"]])
    assert orders[0].index("retrieve") < orders[0].index("contribute")
    assert orders[1].index("retrieve") > orders[1].index("contribute")
    first, last = answers
    assert first == last and len(first) == 10
    assert any("bm25" in reason for *_, reason in first)


def test_a_write_that_supersedes_searches_after_it(dev, fake_embedder, thought_factory):
    # A refinement's answer ranks the thought it superseded as superseded, below itself... which only
    # a search after the write can see; the same for a correction.
    original = thought_factory("The celery workers use a pgbouncer pool of 20 connections.")
    memory(dev, prompt="warm up")
    body = memory(
        dev, prompt="The celery workers use a pgbouncer pool of 40 connections now.", refines=str(original.id)
    )
    operations = [op.split(":")[0] for op in body["trace"]["operations"]]
    assert operations.index("contribute") < operations.index("retrieve")
    (source,) = [s for s in body["result"]["sources"] if s["thought_id"] == str(original.id)]
    assert source["superseded"] is True and "superseded" in source["matching_reason"]


def test_full_text_brings_in_an_exact_match_beyond_the_vector_pool(dev, monkeypatch, thought_factory):
    """35 closer neighbours fill the vector side's pool of 30 (flagged, ×0.8, and sharing no query
    word); the thought containing every query word comes in through the lexical side and ranks first.
    Scores are checked against the fusion alone (contrast off: it rescores every cosine)."""
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    for i in range(35):
        thought_factory(
            f"Filler neighbour {i} about something close in meaning.",
            embedding=_unit(0.9),
            quality_flags=["keyword_echo"],
        )
    exact = thought_factory("Invoice ERR4711 means the VAT id is missing.", embedding=_unit(0.75))
    monkeypatch.setattr(embedding, "embed_many", lambda texts, batch_size=64: [_unit(1.0) for _ in texts])
    sources = memory(dev, prompt="invoice ERR4711 VAT", limit=10)["result"]["sources"]
    assert sources[0]["thought_id"] == str(exact.id)
    assert sources[0]["matching_reason"].startswith("similarity 0.75, full-text match (bm25 ")
    # the fillers share the first place by cosine (brain.ranking's fusion), ×0.8 for keyword_echo
    assert sources[1]["score"] == pytest.approx(ranking.weighted(0.9, 0.0) * 0.8, abs=1e-3)
    assert sources[0]["score"] > sources[1]["score"]


def test_a_correction_beyond_the_vector_pool_is_found_exactly(dev, monkeypatch, thought_factory):
    """Corrections don't depend on the approximate index or on wording: 35 closer neighbours fill the
    vector side's pool, the correction shares no query word, and the one statement still brings it
    (compared exactly), with its boost (×1.3) on its fused score. Where that puts it is the fusion's
    business (brain.ranking): 31st of 31 by cosine here, so ×1.3 no longer lifts it above
    thirty closer thoughts (ranking corrections higher inside the fusion cost recall on the
    retrieval benchmark's dev split: benchmarks/retrieval/README.md). Scores are checked against the
    fusion alone (contrast off: it rescores every cosine)."""
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    for i in range(35):
        thought_factory(f"Filler neighbour {i} about something close in meaning.", embedding=_unit(0.9))
    correction = thought_factory(
        "Correction: the VAT id check happens at checkout.", embedding=_unit(0.75), thought_category="correction"
    )
    fetched, _vector, _companion = search._fetch(
        space=dev.agent.space,
        vector=_unit(1.0),
        query_text="invoice ERR4711 rejected",
        pool=search.MIN_POOL,  # what a search for 10 results asks for
        filter_topic=None,
        filter_category=None,
        exclude_ids=[],
    )
    (found,) = [c for c in fetched if c.id == str(correction.id)]
    assert found.dense_rank is None and found.lexical_rank is None and found.via_vector  # the exact scan
    (ranked,) = [c for c in ranking.rank(fetched) if c.id == str(correction.id)]
    assert ranked.matching_reason == "correction boost ×1.3"
    assert ranked.score == pytest.approx(ranking.weighted(0.75, 0.0) * 1.3, abs=1e-3)
