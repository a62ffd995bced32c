"""Contradiction detection off the request path (SPEC 2.5, 4.5).

After a thought is stored, ``brain.jobs.detect_contradictions`` compares it with the existing facts
it could contradict — the other live thoughts of its topic plus its nearest neighbours by embedding
— through a judge (``brain.judging``). Every contradiction found becomes a pending correction
suggestion on the OLD thought, addressed to the agent that contributed the new one; the agent sees
it in its next memory response and accepts it (one call creates the correction) or dismisses it.

The detector never changes a thought: which of the two statements is right is for an agent or a
human to decide.
"""

from __future__ import annotations

import logging

from django.db import transaction
from pgvector.django import CosineDistance

from brain import embedding
from brain.choices import SuggestionOrigin, ThoughtCategory
from brain.judging import Judge, get_judge
from brain.judging.embedding import vectors_remember
from brain.models import CorrectionSuggestion, Thought, thought_embedding_received, thoughts_with_embedding_send
from brain.selectors.hnsw import hnsw_filtered_scan
from brain.services.suggestions import suggestion_create

logger = logging.getLogger("colony.brain")

TOPIC_CANDIDATES_LIMIT = 20
"""At most this many other thoughts of the same topic (newest first) are judged."""

NEIGHBOUR_CANDIDATES_LIMIT = 10
"""...plus at most this many nearest neighbours by embedding (HNSW, cosine)."""

NEIGHBOUR_MIN_SIMILARITY = 0.5
"""Neighbours less similar than this are about something else; judging them would only cost
judge calls (an LLM judge is paid per call). The offline judge needs >= 0.75 anyway."""

CONTRADICTION_MIN_CONFIDENCE = 0.5
"""A positive verdict below this confidence raises nothing: a suggestion asks an agent to act."""

HNSW_EF_SEARCH = 100
"""Candidate list size of the filtered HNSW scan (pgvector's default 40 starves filtered queries)."""

SKIPPED_CATEGORIES = (ThoughtCategory.CORRECTION, ThoughtCategory.TRANSITION_MARKER)
"""Never judged, on either side: a correction contradicts on purpose and already supersedes what
it names; a transition marker records an event, not a fact."""


class EmbeddingPending(RuntimeError):
    """The thought has no embedding yet (its embedding job has not run): retry later."""


def _candidates(thought: Thought) -> list[Thought]:
    """Live thoughts of the same space that ``thought`` could contradict: same topic, then neighbours."""
    base = (
        Thought.objects.filter(space_id=thought.space_id, superseded=False)
        .exclude(pk=thought.pk)
        .exclude(thought_category__in=SKIPPED_CATEGORIES)
    )
    chosen: dict = {}
    if thought.topic:
        same_topic = thoughts_with_embedding_send(base.filter(topic=thought.topic))
        for candidate in same_topic.order_by("-created_at")[:TOPIC_CANDIDATES_LIMIT]:
            chosen[candidate.pk] = thought_embedding_received(candidate)
    with transaction.atomic():
        # Filters (space, superseded, category) apply after the index scan; let it keep scanning.
        hnsw_filtered_scan(ef_search=HNSW_EF_SEARCH)
        neighbours = list(
            thoughts_with_embedding_send(base.filter(embedding__isnull=False))
            .annotate(distance=CosineDistance("embedding", thought.embedding))
            .filter(distance__lt=1.0 - NEIGHBOUR_MIN_SIMILARITY)
            .order_by("distance")[:NEIGHBOUR_CANDIDATES_LIMIT]
        )
    for candidate in neighbours:
        if candidate.pk not in chosen:
            chosen[candidate.pk] = thought_embedding_received(candidate)
    return list(chosen.values())


def thought_detect_contradictions(*, thought_id: str, judge: Judge | None = None) -> list[CorrectionSuggestion]:
    """Judge a stored thought against existing facts; return the suggestions raised (new or already pending).

    Safe to run twice (a retry after a judge failure half-way): ``suggestion_create`` reuses the
    pending suggestion for the same old thought and statement. Raises :class:`EmbeddingPending` while
    the thought has no vector, and lets ``JudgeUnavailable`` through: both are retried by the job.
    """
    thought = thoughts_with_embedding_send(Thought.objects.filter(pk=thought_id).select_related("agent")).first()
    if thought is None:
        logger.warning("detect_contradictions: thought %s does not exist", thought_id)
        return []
    if thought.thought_category in SKIPPED_CATEGORIES or thought.superseded:
        return []
    if thought_embedding_received(thought).embedding is None:
        raise EmbeddingPending(f"Thought {thought_id} has no embedding yet.")
    judge = judge or get_judge()
    session_id = (thought.context_metadata or {}).get("session_id", "")
    raised: list[CorrectionSuggestion] = []
    candidates = _candidates(thought)
    # The embedding judge compares texts by their vectors: hand it the stored ones (same embedder),
    # so judging a new thought against 30 others embeds nothing instead of up to 31 texts.
    label = embedding.current_model_label()
    known = [t for t in [thought, *candidates] if t.embedding is not None and t.embedding_model == label]
    vectors_remember((t.content, t.embedding) for t in known)
    for candidate in candidates:
        verdict = judge.contradicts(candidate.content, thought.content)
        if not verdict.verdict or verdict.confidence < CONTRADICTION_MIN_CONFIDENCE:
            continue
        suggestion, _created = suggestion_create(
            thought=candidate,
            statement=thought.content,
            origin=SuggestionOrigin.CONTRADICTION_DETECTOR,
            confidence=verdict.confidence,
            reason=f"{judge.name} judge: {verdict.reason}",
            agent=thought.agent,
            session_id=session_id if isinstance(session_id, str) else "",
            contradicting_thought=thought,
        )
        raised.append(suggestion)
    return raised
