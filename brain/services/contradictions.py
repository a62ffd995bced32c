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

from api.text import quoted
from brain import embedding
from brain.choices import SuggestionOrigin, ThoughtCategory
from brain.judging import Judge, JudgeAnswerInvalid, get_judge
from brain.judging.embedding import texts_read_at, vectors_generation, vectors_remember
from brain.models import CorrectionSuggestion, Thought, vector_from_send
from brain.selectors.hnsw import hnsw_filtered_scan_select_sql
from brain.selectors.search import thought_from_row
from brain.services.suggestions import suggestion_create
from core.db import binary_vector, prepared_cursor
from core.models import Agent

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


#: The candidates of :func:`_candidates` in one statement: the newest live thoughts of the same topic,
#: then the nearest live neighbours by embedding (HNSW); vectors in binary (``vector_send``).
_CANDIDATES_SQL = """
WITH topic AS (
    SELECT t.id, t.created_at FROM brain_thought t
    WHERE t.space_id = %(space)s AND NOT t.superseded AND t.id <> %(id)s
          AND t.thought_category <> ALL(%(skipped)s::text[]) AND %(topic)s <> '' AND t.topic = %(topic)s
    ORDER BY t.created_at DESC LIMIT %(topic_limit)s
),
near AS (
    SELECT n.id, row_number() OVER () AS rank FROM (
        SELECT t.id FROM brain_thought t
        WHERE t.space_id = %(space)s AND NOT t.superseded AND t.id <> %(id)s
              AND t.thought_category <> ALL(%(skipped)s::text[]) AND t.embedding IS NOT NULL
              AND (t.embedding <=> %(vector)s::vector) < %(max_distance)s
        ORDER BY t.embedding <=> %(vector)s::vector LIMIT %(near_limit)s
    ) n
)
SELECT t.id, t.space_id, t.content, t.topic, t.embedding_model, vector_send(t.embedding)
FROM brain_thought t
LEFT JOIN topic tp ON tp.id = t.id
LEFT JOIN near n ON n.id = t.id
WHERE t.id IN (SELECT id FROM topic UNION SELECT id FROM near)
ORDER BY tp.created_at DESC NULLS LAST, n.rank
"""
_CANDIDATE_FIELDS = ["id", "space_id", "content", "topic", "embedding_model"]


def _candidates(thought: Thought) -> list[Thought]:
    """Live thoughts of the same space that ``thought`` could contradict: same topic (newest first,
    at most TOPIC_CANDIDATES_LIMIT), then neighbours (nearest first, at most NEIGHBOUR_CANDIDATES_LIMIT).

    Each carries id, space, content, topic, embedding and its model (other fields load on access).
    Two prepared statements, the filtered-scan settings and the candidates (the ORM's two queries
    cost more CPU to build than the database spent answering them).
    """
    params = {
        "space": thought.space_id,
        "id": thought.pk,
        "skipped": [str(category) for category in SKIPPED_CATEGORIES],
        "topic": thought.topic or "",
        "topic_limit": TOPIC_CANDIDATES_LIMIT,
        "vector": binary_vector(thought.embedding),
        "max_distance": 1.0 - NEIGHBOUR_MIN_SIMILARITY,
        "near_limit": NEIGHBOUR_CANDIDATES_LIMIT,
    }
    with transaction.atomic(), prepared_cursor() as cursor:
        # Filters (space, superseded, category) apply after the index scan; let it keep scanning.
        cursor.execute(_SCAN_SETTINGS_SQL)
        cursor.execute(_CANDIDATES_SQL, params)
        rows = cursor.fetchall()
    candidates = []
    for *values, vector in rows:
        candidate = thought_from_row(_CANDIDATE_FIELDS, values)
        candidate.embedding = vector_from_send(vector)
        candidates.append(candidate)
    return candidates


_SCAN_SETTINGS_SQL = hnsw_filtered_scan_select_sql(ef_search=f"'{HNSW_EF_SEARCH}'")

#: The judged thought: what the detector reads of it, the session it was contributed in (a string, or
#: '' when the metadata has none or not a string) and its vector in binary, as the candidates'.
_JUDGED_SQL = """
SELECT t.id, t.space_id, t.agent_id, t.content, t.topic, t.thought_category, t.superseded, t.embedding_model,
       CASE WHEN jsonb_typeof(t.context_metadata -> 'session_id') = 'string'
            THEN t.context_metadata ->> 'session_id' ELSE '' END,
       vector_send(t.embedding)
FROM brain_thought t WHERE t.id = %(id)s
"""
_JUDGED_FIELDS = ["id", "space_id", "agent_id", "content", "topic", "thought_category", "superseded", "embedding_model"]


def _judged(thought_id) -> tuple[Thought | None, str]:
    """The thought to judge (the fields above; others load on access) and its session id, in one
    prepared statement (the ORM compiled a query of every column and the agent's on each job)."""
    with prepared_cursor() as cursor:
        cursor.execute(_JUDGED_SQL, {"id": thought_id})
        row = cursor.fetchone()
    if row is None:
        return None, ""
    *values, session_id, vector = row
    thought = thought_from_row(_JUDGED_FIELDS, values)
    thought.embedding = vector_from_send(vector)
    return thought, session_id or ""


def thought_detect_contradictions(*, thought_id: str, judge: Judge | None = None) -> list[CorrectionSuggestion]:
    """Judge a stored thought against existing facts; return the suggestions raised (new or already pending).

    Safe to run twice (a retry after a judge failure half-way, a redelivery, ``embed_missing`` running
    it again): ``suggestion_create`` reuses the pending suggestion for the same old thought and
    statement, and raises no contradiction between the same two thoughts that a reviewer dismissed or
    its raiser withdrew. A thought whose agent was deactivated or deleted raises nothing in its name (a
    revoked identity acts no more); a thought contributed without an agent (an import) is judged as
    ever. Raises :class:`EmbeddingPending` while the thought has no vector, and lets
    ``JudgeUnavailable`` through: both are retried by the job. A pair the judge answered without a
    verdict (``JudgeAnswerInvalid``) is skipped: one thought whose text steers an LLM judge can't stop
    the check of the others.
    """
    # Taken before the texts are read: a redaction landing while they are judged keeps them out of the
    # judge's vector cache (brain.judging.embedding), whatever the judge embeds after it.
    read_at = vectors_generation()
    thought, session_id = _judged(thought_id)
    if thought is None:
        logger.warning("detect_contradictions: thought %s does not exist", thought_id)
        return []
    if thought.thought_category in SKIPPED_CATEGORIES or thought.superseded:
        return []
    if thought.embedding is None:
        raise EmbeddingPending(f"Thought {thought_id} has no embedding yet.")
    agent = None
    if thought.agent_id is not None:
        # Checked again under a share lock where each suggestion is created (suggestion_create); here so
        # a revoked agent's check costs no judge call.
        agent = Agent.objects.filter(pk=thought.agent_id, active=True).first()
        if agent is None:
            logger.info("detect_contradictions: %s's agent is inactive or deleted; nothing raised", thought_id)
            return []
    judge = judge or get_judge()
    with texts_read_at(read_at):
        return _judge_candidates(thought=thought, agent=agent, session_id=session_id, judge=judge)


def _judge_candidates(*, thought: Thought, agent: Agent | None, session_id: str, judge: Judge):
    raised: list[CorrectionSuggestion] = []
    candidates = _candidates(thought)
    # The embedding judge compares texts by their vectors: hand it the stored ones (same embedder),
    # so judging a new thought against 30 others embeds nothing instead of up to 31 texts.
    label = embedding.current_model_label()
    known = [t for t in [thought, *candidates] if t.embedding is not None and t.embedding_model == label]
    vectors_remember((t.content, t.embedding) for t in known)
    for candidate in candidates:
        # Read both texts again before handing them to the judge (an LLM judge sends them out): a
        # redaction that committed while earlier pairs were judged erased one, and no judge gets it.
        # The thought itself changed: the job is over; a candidate changed: it is left out.
        now = dict(
            Thought.objects.filter(pk__in=[thought.pk, candidate.pk], superseded=False).values_list("pk", "content")
        )
        if now.get(thought.pk) != thought.content:
            break
        if now.get(candidate.pk) != candidate.content:
            continue
        try:
            verdict = judge.contradicts(candidate.content, thought.content)
        except JudgeAnswerInvalid as exc:  # this pair's words got no verdict; the other pairs still count
            logger.warning("detect_contradictions: no verdict on %s vs %s: %s", candidate.pk, thought.pk, exc)
            continue
        if not verdict.verdict or verdict.confidence < CONTRADICTION_MIN_CONFIDENCE:
            continue
        suggestion, _created = suggestion_create(
            thought=candidate,
            statement=thought.content,
            origin=SuggestionOrigin.CONTRADICTION_DETECTOR,
            confidence=verdict.confidence,
            reason=f"{judge.name} judge: {quoted(verdict.reason)}",  # the model's words, which may be steered
            agent=agent,
            session_id=session_id,
            contradicting_thought=thought,
        )
        if suggestion is None:  # a thought moved while the judge ran, a reviewer settled it, or the agent went
            continue
        raised.append(suggestion)
    return raised
