"""How retrieval candidates are scored (SPEC 2.3). Every multiplier is a named constant here.

:func:`rank` is the only place a score is computed. It applies, in this order:

1. similarity — cosine similarity of the query and the thought (or, for a thought whose embedding
   is still pending, a full-text stand-in, see :data:`FULLTEXT_ONLY_BASE`);
2. lineage — superseded thoughts lose, corrections and refinements of what they supersede win;
3. quality flags — each flag multiplies by its own constant (several flags multiply);
4. the quality loop's ``effective_confidence`` (only while ``settings.QUALITY_RANKING_ENABLED``), through
   :func:`quality_multiplier` — the quality loop computes and stores ``Thought.effective_confidence``
   (its EMA formula and ALPHA/BETA live in ``quality/formulas.py``); ranking owns the multiplier and
   its switch;
5. a bounded pheromone boost, never applied to a superseded thought;
6. cap at 1.0, re-sort (ties: not superseded first, then newest);
7. with a topic filter: among that topic's state snapshots, the newest ``temporal_scope`` first.

Why the pheromone boost can never lift a superseded thought above its replacement: the boost is
not applied to superseded thoughts at all, and it is ≥ 1 for everything else, so any pair whose
order the lineage rules decided keeps that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.conf import settings

from brain.choices import QualityFlag, ThoughtCategory, ThoughtType

# --- lineage ---------------------------------------------------------------------------------------
#: A thought refined or consolidated by a newer one (seeds/001: -30%).
SUPERSEDED_MULTIPLIER = 0.7
#: A thought a correction superseded (seeds/000 7b: "hard penalty", -50%). Replaces, not stacks
#: with, :data:`SUPERSEDED_MULTIPLIER`.
SUPERSEDED_BY_CORRECTION_MULTIPLIER = 0.5
#: A correction (seeds/000 7b: "correction_boost", +30%).
CORRECTION_MULTIPLIER = 1.3
#: A refinement or consolidation of a thought that is superseded and present in the same candidate
#: set (seeds/001: +20%), so the newer version outranks the one it replaces.
REFINEMENT_OF_PRESENT_MULTIPLIER = 1.2

# --- quality flags (advisory flags lower the rank, never hide a thought) ---------------------------
QUALITY_FLAG_MULTIPLIERS: dict[str, float] = {
    # seeds/000 5c: "Penalize flagged thoughts (keyword_echo: -20% score)".
    QualityFlag.KEYWORD_ECHO: 0.8,
    # It repeats a fact a correction declared wrong: as hard as being superseded by a correction.
    QualityFlag.CONTRADICTS_CORRECTION: 0.5,
    # "See X" without the substance of X: as little value as a keyword echo.
    QualityFlag.ORPHANED_REFERENCE: 0.8,
    # A state snapshot older than STALE_SNAPSHOT_DAYS: "old snapshots get lower relevance".
    QualityFlag.STALE: 0.85,
    # A near copy of an existing thought: slightly lower, so the original ranks first.
    QualityFlag.NEAR_DUPLICATE: 0.9,
    # A raised contradiction nobody resolved in 14 days: doubt, not proof.
    QualityFlag.UNVERIFIED: 0.9,
}

# --- quality loop --------------------------------------------------------------------------------


def quality_multiplier(effective_confidence: float | None) -> float:
    """The factor ranking applies for the quality loop (SPEC 2.3, 4.4): the thought's effective
    confidence (never below 0) while ``settings.QUALITY_RANKING_ENABLED``, else 1.0.

    The one implementation of the switch: :func:`rank` calls it for every candidate. Nothing
    else depends on the switch: the EMAs keep being maintained while it is off, so switching it
    back on needs no recomputation, and switching it off needs nothing undone.
    """
    if not settings.QUALITY_RANKING_ENABLED or effective_confidence is None:
        return 1.0
    return max(0.0, effective_confidence)


# --- pheromone ------------------------------------------------------------------------------------
PHEROMONE_BASE = 1.0  # weight of a new thought
PHEROMONE_MAX = 10.0  # cap of reinforcement (SPEC 2.3)
#: The boost at the maximum weight: ×(1 + PHEROMONE_BOOST_MAX). Linear in the weight between 1 and
#: 10, none at or below 1: ``1 + 0.1 · clamp((w − 1) / 9, 0, 1)``. Small on purpose: traffic should
#: break near-ties, not outvote similarity.
PHEROMONE_BOOST_MAX = 0.1

# --- full-text candidates whose embedding is still pending ----------------------------------------
#: Their stand-in similarity is ``FULLTEXT_ONLY_BASE + FULLTEXT_ONLY_SPAN · coverage``, coverage
#: being the share of the query's lexemes the thought contains; at most 0.8, so a pending thought
#: that contains every query word ranks like a good semantic match, not like an exact one.
FULLTEXT_ONLY_BASE = 0.3
FULLTEXT_ONLY_SPAN = 0.5

#: Candidates less similar than this (before any multiplier) are not results at all: nearest
#: neighbours always exist, but for all-MiniLM-L6-v2 unrelated sentences score about 0–0.15.
MIN_SIMILARITY = 0.2

SCORE_CAP = 1.0
#: Multi-round retrieval (seeds/000 5c): below this best score a category-filtered search is
#: retried without the category filter.
SUFFICIENT_SCORE = 0.5


@dataclass
class Candidate:
    """One thought found for a query, with how it was found and what ranking did to it."""

    thought: Any  # brain.models.Thought, annotated with superseded_by_category
    similarity: float
    via_vector: bool = False
    via_fulltext: bool = False
    embedding_pending: bool = False
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.thought.id)

    @property
    def matching_reason(self) -> str:
        return ", ".join(self.reasons)


def pheromone_boost(weight: float) -> float:
    """The pheromone multiplier for a thought that is not superseded (see PHEROMONE_BOOST_MAX)."""
    share = (weight - PHEROMONE_BASE) / (PHEROMONE_MAX - PHEROMONE_BASE)
    return 1.0 + PHEROMONE_BOOST_MAX * min(1.0, max(0.0, share))


def fulltext_only_similarity(coverage: float) -> float:
    return FULLTEXT_ONLY_BASE + FULLTEXT_ONLY_SPAN * min(1.0, max(0.0, coverage))


def _superseded_by_correction(thought) -> bool:
    return getattr(thought, "superseded_by_category", None) == ThoughtCategory.CORRECTION


def _lineage_factor(candidate: Candidate, superseded_present: set[str]) -> float:
    thought = candidate.thought
    factor = 1.0
    if _superseded_by_correction(thought):
        factor *= SUPERSEDED_BY_CORRECTION_MULTIPLIER
        candidate.reasons.append(
            f"superseded by correction {thought.superseded_by_id} ×{SUPERSEDED_BY_CORRECTION_MULTIPLIER}"
        )
    elif thought.superseded:
        factor *= SUPERSEDED_MULTIPLIER
        by = f" by {thought.refined_by_id}" if thought.refined_by_id else ""
        candidate.reasons.append(f"superseded{by} ×{SUPERSEDED_MULTIPLIER}")
    if thought.thought_category == ThoughtCategory.CORRECTION:
        factor *= CORRECTION_MULTIPLIER
        candidate.reasons.append(f"correction boost ×{CORRECTION_MULTIPLIER}")
    if thought.thought_type in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION) and superseded_present.intersection(
        str(source) for source in thought.source_ids
    ):
        factor *= REFINEMENT_OF_PRESENT_MULTIPLIER
        candidate.reasons.append(f"{thought.thought_type} of a superseded result ×{REFINEMENT_OF_PRESENT_MULTIPLIER}")
    return factor


def _flag_factor(candidate: Candidate) -> float:
    factor = 1.0
    for flag in dict.fromkeys(candidate.thought.quality_flags or []):
        multiplier = QUALITY_FLAG_MULTIPLIERS.get(flag)
        if multiplier is not None:
            factor *= multiplier
            candidate.reasons.append(f"{flag} ×{multiplier}")
    return factor


def _quality_factor(candidate: Candidate) -> float:
    """The quality loop's factor: :func:`quality_multiplier` is its one implementation
    (switch included); ranking only records it in ``matching_reason`` when it changes the score."""
    factor = quality_multiplier(candidate.thought.effective_confidence)
    if factor != 1.0:
        candidate.reasons.append(f"effective confidence ×{factor:.2f}")
    return factor


def _pheromone_factor(candidate: Candidate) -> float:
    if candidate.thought.superseded:
        return 1.0
    boost = pheromone_boost(candidate.thought.pheromone_weight)
    if boost > 1.0:
        candidate.reasons.append(f"pheromone ×{boost:.3f}")
    return boost


def _sort_key(candidate: Candidate):
    created: datetime | None = candidate.thought.created_at
    return (-candidate.score, candidate.thought.superseded, -(created.timestamp() if created else 0.0))


def _newest_snapshots_first(candidates: list[Candidate], topic: str) -> None:
    """Among the topic's state snapshots, hand the best-ranked slots to the newest temporal_scope.

    Only the snapshots move, and only among the places snapshots already hold, so other thoughts
    keep their rank and a stale snapshot can't sit above a newer one of the same topic.
    """
    slots = [
        index
        for index, candidate in enumerate(candidates)
        if candidate.thought.thought_category == ThoughtCategory.STATE_SNAPSHOT and candidate.thought.topic == topic
    ]
    if len(slots) < 2:
        return
    snapshots = [candidates[index] for index in slots]
    snapshots.sort(key=lambda c: (c.thought.temporal_scope or date.min, c.score), reverse=True)
    for position, (index, candidate) in enumerate(zip(slots, snapshots, strict=True)):
        if position == 0:
            candidate.reasons.append("newest state snapshot of the topic")
        candidates[index] = candidate


def rank(candidates: list[Candidate], *, filter_topic: str | None = None) -> list[Candidate]:
    """Score every candidate (see the module docstring for the order) and return them best first.

    Candidates below MIN_SIMILARITY are dropped first: they are neighbours, not matches.
    """
    candidates = [candidate for candidate in candidates if candidate.similarity >= MIN_SIMILARITY]
    superseded_present = {candidate.id for candidate in candidates if candidate.thought.superseded}
    for candidate in candidates:
        similarity = max(0.0, candidate.similarity)
        score = similarity
        score *= _lineage_factor(candidate, superseded_present)
        score *= _flag_factor(candidate)
        score *= _quality_factor(candidate)
        score *= _pheromone_factor(candidate)
        candidate.score = min(SCORE_CAP, score)
    ranked = sorted(candidates, key=_sort_key)
    if filter_topic:
        _newest_snapshots_first(ranked, filter_topic)
    # A retracted thought (superseded without a replacement) never ranks above a live one.
    return [c for c in ranked if QualityFlag.RETRACTED not in c.thought.quality_flags] + [
        c for c in ranked if QualityFlag.RETRACTED in c.thought.quality_flags
    ]
