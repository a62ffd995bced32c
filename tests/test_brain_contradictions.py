"""Contradiction detection off the request path (SPEC 2.5, 4.5): candidates, judge, suggestions, job."""

from __future__ import annotations

import numpy as np
import pytest

from brain import embedding, jobs
from brain.choices import SuggestionStatus
from brain.judging import EmbeddingJudge, JudgeUnavailable, Verdict
from brain.models import CorrectionSuggestion, Thought
from brain.services import contradictions
from brain.services.contradictions import EmbeddingPending, thought_detect_contradictions
from brain.services.corrections import suggestion_accept
from brain.services.pipeline import thought_schedule_contradiction_check, thought_schedule_followups
from brain.services.thoughts import thought_create
from config.celery import app as celery_app

pytestmark = pytest.mark.django_db


def axis(i: int, j: int | None = None) -> list[float]:
    """A unit vector along axis i (or halfway between i and j): deterministic similarities."""
    v = [0.0] * 384
    if j is None:
        v[i] = 1.0
    else:
        v[i] = v[j] = 0.5**0.5
    return v


def store(space, content, *, vector="real", agent=None, detect_contradictions=False, **fields):
    """Store a thought the way the memory service does: the write, then its follow-up jobs."""
    thought = thought_create(
        space=space,
        content=content,
        contributor_id=agent.name if agent else "someone",
        contributor_name=agent.name if agent else "someone",
        agent=agent,
        embedding=embedding.embed(content) if vector == "real" else vector,
        **fields,
    )
    thought_schedule_followups(thought=thought, detect_contradictions=detect_contradictions)
    return thought


class RecordingJudge:
    """Says "contradicts" when the old statement contains ``trigger``; records every pair it saw."""

    name = "recording"

    def __init__(self, trigger="WRONG", confidence=0.9):
        self.trigger, self.confidence, self.seen = trigger, confidence, []

    def contradicts(self, a, b):
        self.seen.append(a)
        return Verdict(self.trigger in a, self.confidence, "test")

    def on_topic(self, prompt, item):
        raise AssertionError("not used")

    def used(self, response, item):
        raise AssertionError("not used")


# --- end to end with the offline judge and the real model ----------------------------------------


def test_contradiction_raises_a_suggestion_that_accepting_turns_into_a_correction(space, agent_factory):
    qa, dev = agent_factory("qa"), agent_factory("dev")
    old = store(space, "The deploy uses Postgres 15", agent=qa.agent, topic="infra")
    bystander = store(space, "The deploy runs on two cores with 8 GB of memory", agent=qa.agent, topic="infra")
    store(space, "The office coffee machine is broken again", agent=qa.agent)
    new = store(
        space,
        "The deploy does not use Postgres 15",
        agent=dev.agent,
        topic="infra",
        context_metadata={"session_id": "sess-7"},
    )

    raised = thought_detect_contradictions(thought_id=str(new.id), judge=EmbeddingJudge())

    assert len(raised) == 1
    suggestion = raised[0]
    assert suggestion.thought_id == old.id
    assert suggestion.statement == new.content
    assert suggestion.contradicting_thought_id == new.id
    assert suggestion.agent_id == dev.agent.id and suggestion.session_id == "sess-7"
    assert suggestion.origin == "contradiction_detector" and suggestion.status == "pending"
    assert suggestion.confidence > 0.8 and "negates" in suggestion.reason
    assert suggestion.draft["supersedes"] == [str(old.id)]
    assert suggestion.draft["corrected_fact"] == old.content
    assert not CorrectionSuggestion.objects.filter(thought=bystander).exists()

    correction = suggestion_accept(suggestion=suggestion, resolved_by="dev-2", agent=dev.agent)
    old.refresh_from_db()
    assert old.superseded and old.superseded_by_id == correction.id
    assert correction.thought_category == "correction" and correction.correct_fact == new.content
    suggestion.refresh_from_db()
    assert (suggestion.status, suggestion.correction_id) == (SuggestionStatus.ACCEPTED, correction.id)


def test_the_detector_judges_with_the_stored_vectors_and_embeds_nothing(space, agent_factory, monkeypatch):
    """The new thought and its candidates carry vectors from the current embedder: the embedding
    judge is handed those instead of embedding every text again (worker CPU under load)."""
    from brain.judging import embedding as judge_embedding

    qa, dev = agent_factory("qa"), agent_factory("dev")
    old = store(space, "The billing export runs at 02:00 UTC every night", agent=qa.agent, topic="billing")
    new = store(space, "The billing export does not run at 02:00 UTC every night", agent=dev.agent, topic="billing")
    judge_embedding._VECTOR_CACHE.clear()
    embedded = []
    real = embedding.embed_many
    monkeypatch.setattr(embedding, "embed_many", lambda texts, **kw: embedded.extend(texts) or real(texts, **kw))

    raised = thought_detect_contradictions(thought_id=str(new.id), judge=EmbeddingJudge())

    assert [s.thought_id for s in raised] == [old.id] and embedded == []


def test_job_runs_the_default_judge_and_rerunning_raises_nothing_twice(space, dev):
    old = store(space, "Feature flags are enabled in production", topic="flags")
    new = store(space, "Feature flags are disabled in production", agent=dev.agent, topic="flags")
    assert jobs.detect_contradictions.delay(str(new.id)).get() == 1
    assert jobs.detect_contradictions.delay(str(new.id)).get() == 1  # the same pending suggestion
    assert CorrectionSuggestion.objects.filter(thought=old).count() == 1


def test_schedule_runs_the_check_after_commit(space, dev, django_capture_on_commit_callbacks):
    old = store(space, "The CI pipeline passed on main", topic="ci")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        new = store(space, "The CI pipeline failed on main", agent=dev.agent, topic="ci")
        thought_schedule_contradiction_check(thought_id=str(new.id))
        assert not CorrectionSuggestion.objects.exists()  # nothing before commit
    assert len(callbacks) == 1
    assert CorrectionSuggestion.objects.get().thought_id == old.id


def test_storing_with_detection_asks_for_the_check_after_commit(space, dev, django_capture_on_commit_callbacks):
    old = store(space, "The nightly backup job is enabled on the database server", topic="ops")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        store(
            space,
            "The nightly backup job is disabled on the database server",
            agent=dev.agent,
            topic="ops",
            detect_contradictions=True,
        )
    assert len(callbacks) == 1
    assert CorrectionSuggestion.objects.get().thought_id == old.id


def test_without_a_vector_the_check_is_chained_after_the_embedding(space, dev, django_capture_on_commit_callbacks):
    """No EmbeddingPending retry: the chain runs the check once the embedding job stored the vector."""
    old = store(space, "The staging cluster runs Kubernetes 1.29", topic="infra")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        new = store(
            space,
            "The staging cluster runs Kubernetes 1.30",
            vector=None,
            agent=dev.agent,
            topic="infra",
            detect_contradictions=True,
        )
        assert Thought.objects.get(pk=new.pk).embedding is None
    assert len(callbacks) == 1  # one chain, not two independent jobs
    assert Thought.objects.get(pk=new.pk).embedding is not None
    suggestion = CorrectionSuggestion.objects.get()
    assert (suggestion.thought_id, suggestion.contradicting_thought_id) == (old.id, new.id)


def test_without_the_flag_nothing_is_checked(space, dev, django_capture_on_commit_callbacks):
    store(space, "The nightly backup job is enabled on the database server", topic="ops")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        store(space, "The nightly backup job is disabled on the database server", agent=dev.agent, topic="ops")
    assert callbacks == [] and not CorrectionSuggestion.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_memory_contribution_sends_its_check_after_the_answer_once_committed(dev, monkeypatch):
    """Publishing the job (~2.5 ms of kombu) is no longer part of the contribution's answer."""
    from django.db import connection

    from api.responses import ResponseThenWork

    closing, sent = [], []
    close = ResponseThenWork.close

    def close_marking(response):
        closing.append(True)
        close(response)

    def delay(thought_id):
        committed = Thought.objects.filter(pk=thought_id).exists() and not connection.in_atomic_block
        sent.append((thought_id, len(closing), committed))

    monkeypatch.setattr(ResponseThenWork, "close", close_marking)
    monkeypatch.setattr(jobs.detect_contradictions, "delay", delay)
    body = {"prompt": "The nightly backup job is disabled on the database server since the last deploy."}
    response = dev.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    assert sent == [(response.json()["trace"]["thought_id"], 1, True)]  # after the answer, committed


# --- candidates (deterministic vectors, recording judge) -------------------------------------------


def test_candidates_are_live_same_topic_thoughts_and_near_neighbours_of_the_same_space(space, other_space):
    new = store(space, "new statement", vector=axis(0), topic="t")
    same_topic_far = store(space, "same topic far WRONG", vector=axis(5), topic="t")
    neighbour = store(space, "neighbour other topic WRONG", vector=axis(0, 1), topic="u")
    far = store(space, "far other topic", vector=axis(7), topic="u")
    superseded = store(space, "superseded WRONG", vector=axis(0), topic="t", superseded=True)
    correction = store(space, "a correction WRONG", vector=axis(0), topic="t", thought_category="correction")
    marker = store(space, "a marker WRONG", vector=axis(0), topic="t", thought_category="transition_marker")
    elsewhere = store(other_space, "other space WRONG", vector=axis(0), topic="t")
    pending_embedding = store(space, "no vector yet, same topic WRONG", vector=None, topic="t")

    judge = RecordingJudge()
    raised = thought_detect_contradictions(thought_id=str(new.id), judge=judge)

    assert sorted(judge.seen) == sorted([same_topic_far.content, neighbour.content, pending_embedding.content])
    assert {s.thought_id for s in raised} == {same_topic_far.id, neighbour.id, pending_embedding.id}
    for skipped in (far, superseded, correction, marker, elsewhere):
        assert not CorrectionSuggestion.objects.filter(thought=skipped).exists()


def test_neighbour_count_is_bounded(space, monkeypatch):
    monkeypatch.setattr(contradictions, "NEIGHBOUR_CANDIDATES_LIMIT", 3)
    new = store(space, "new", vector=axis(0))
    for i in range(6):
        store(space, f"neighbour {i}", vector=axis(0, i + 1))
    judge = RecordingJudge()
    thought_detect_contradictions(thought_id=str(new.id), judge=judge)
    assert len(judge.seen) == 3


def test_low_confidence_verdicts_raise_nothing(space):
    new = store(space, "new", vector=axis(0), topic="t")
    store(space, "old WRONG", vector=axis(0), topic="t")
    assert thought_detect_contradictions(thought_id=str(new.id), judge=RecordingJudge(confidence=0.4)) == []
    assert not CorrectionSuggestion.objects.exists()


@pytest.mark.parametrize("category", ["correction", "transition_marker"])
def test_corrections_and_markers_are_not_checked(space, category):
    store(space, "old WRONG", vector=axis(0), topic="t")
    new = store(space, "new", vector=axis(0), topic="t", thought_category=category)
    judge = RecordingJudge()
    assert thought_detect_contradictions(thought_id=str(new.id), judge=judge) == []
    assert judge.seen == []


def test_missing_embedding_is_retryable(space):
    new = store(space, "not embedded yet", vector=None)
    with pytest.raises(EmbeddingPending):
        thought_detect_contradictions(thought_id=str(new.id), judge=RecordingJudge())


def test_unknown_thought_raises_nothing(space):
    assert (
        thought_detect_contradictions(thought_id="5d1c2f8e-6a55-4f53-9b1f-2f7c9c3d9a10", judge=RecordingJudge()) == []
    )


def test_judge_failure_keeps_what_was_found_and_the_job_retries(space, monkeypatch):
    new = store(space, "new", vector=axis(0), topic="t")
    store(space, "old WRONG", vector=axis(0), topic="t")

    class FlakyJudge(RecordingJudge):
        failures = 2

        def contradicts(self, a, b):
            if FlakyJudge.failures:
                FlakyJudge.failures -= 1
                raise JudgeUnavailable("endpoint down")
            return super().contradicts(a, b)

    with pytest.raises(JudgeUnavailable):
        thought_detect_contradictions(thought_id=str(new.id), judge=FlakyJudge())
    FlakyJudge.failures = 2
    monkeypatch.setattr(contradictions, "get_judge", lambda: FlakyJudge())
    # Eager Celery re-runs the task on autoretry (when errors are not propagated): two failures, then the answer.
    celery_app.conf.task_eager_propagates = False
    try:
        assert jobs.detect_contradictions.apply(args=[str(new.id)]).get() == 1
    finally:
        celery_app.conf.task_eager_propagates = True
    assert FlakyJudge.failures == 0
    assert Thought.objects.get(pk=new.pk).superseded is False  # the detector never changes a thought


def test_embed_missing_also_runs_the_check_its_lost_job_would_have_chained(
    space, dev, monkeypatch, django_capture_on_commit_callbacks
):
    """A thought whose embedding job was lost gets its vector from the safety net, and its check too."""
    from brain.services import pipeline

    old = store(space, "The staging cluster runs Kubernetes 1.29", topic="infra")
    monkeypatch.setattr(pipeline, "thought_enqueue_embedding", lambda **kwargs: None)  # the job is lost
    new = store(space, "The staging cluster runs Kubernetes 1.30", vector=None, agent=dev.agent, topic="infra")
    marker = store(space, "TASK ready→active: DEV infra-up (ops)", vector=None, thought_category="transition_marker")
    assert not CorrectionSuggestion.objects.exists()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert jobs.embed_missing() == 2
    assert len(callbacks) == 1  # the marker is not checked

    assert Thought.objects.filter(pk__in=[new.pk, marker.pk], embedding__isnull=False).count() == 2
    suggestion = CorrectionSuggestion.objects.get()
    assert (suggestion.thought_id, suggestion.contradicting_thought_id) == (old.id, new.id)


@pytest.mark.django_db
def test_candidates_carry_their_stored_vectors_exactly(space):
    """The detector reads candidates' vectors through vector_send (faster); the values are exactly the ORM's."""
    new = store(space, "The nightly backup runs at 02:00 UTC and keeps 14 copies.", topic="t")
    old = store(space, "The nightly backup runs at 03:00 UTC and keeps 7 copies.", topic="t")
    pending = store(space, "The nightly backup has no vector yet.", vector=None, topic="t")
    by_id = {c.pk: c for c in contradictions._candidates(Thought.objects.get(pk=new.pk))}
    via_orm = Thought.objects.get(pk=old.pk).embedding
    # The same float32s (the text form prints them rounded to 8 digits, the binary form is exact).
    assert len(via_orm) == 384 and np.array_equal(np.float32(by_id[old.pk].embedding), np.float32(via_orm))
    assert by_id[pending.pk].embedding is None
