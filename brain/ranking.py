"""How retrieval candidates are scored (SPEC 2.3). Every constant is named here.

:func:`rank` is the only place a score is computed. It applies, in this order:

1. relevance — the weighted sum of the two retrieval sides (``brain.selectors.search`` brings both in
   one SQL statement): ``(1 − LEXICAL_WEIGHT)·cosine + LEXICAL_WEIGHT·lexical``, where ``lexical`` is
   the candidate's BM25 divided by the summed IDF of the query's lexemes (the IDF-weighted share of
   the query it contains, ≤ 1). Both sides are absolute measures, so a lone weak candidate does not
   score like an exact match and close calls are decided by how close. A thought whose embedding is
   still pending has no cosine: its stand-in is ``FULLTEXT_ONLY_BASE + FULLTEXT_ONLY_SPAN · lexical``.
   Once steps 1–6 have scored every candidate, contrast (:data:`CONTRAST_BETA`) replaces each cosine
   by its cosine against what the best hits have in common taken out, and steps 1–6 score again;
2. lineage — superseded thoughts lose, corrections and refinements of what they supersede win;
3. quality flags — each flag multiplies by its own constant (several flags multiply);
4. the quality loop's ``effective_confidence`` (only while ``settings.QUALITY_RANKING_ENABLED``), through
   :func:`quality_multiplier` below (the EMA formula that feeds it: ``quality/formulas.py``);
5. reinforcement as a bounded tie-break: the pheromone weight multiplies by at most
   ``1 + PHEROMONE_BOOST_MAX`` (never for a superseded thought), so traffic can only reorder
   thoughts whose scores are within that share of each other; co-retrieval counts are not used;
6. cap at 1.0, sort (ties: not superseded first, then newest);
7. replacement rule: a superseded thought never ranks above its live replacement. The
   search fetches the replacement by id when neither side found it; here the replacement takes at
   least the superseded thought's score, the superseded one sorts right below it, and both
   ``matching_reason`` say so;
8. diversity (:data:`DIVERSITY_LAMBDA`): the page's places are filled by maximal marginal relevance
   among the best :data:`DIVERSITY_WINDOW` (at most :data:`WINDOW_PER_CONTRIBUTOR` of one contributor's),
   the replacement rule still holding, and one contributor's
   close rewordings of a statement take at most :data:`SAME_CONTRIBUTOR_PLACES` of them;
9. with a topic filter: among that topic's state snapshots, the newest ``temporal_scope`` first.

The fusion constants were chosen on the retrieval benchmark's dev split only (``make
bench-retrieval-sweep``, standard and ``--pooled``; the rule and the sweep are in
benchmarks/retrieval/README.md), contrast and diversity on the dev splits of both benchmarks (below).
The test splits were never used to choose anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cached_property
from typing import Any

from django.conf import settings

from brain.choices import QualityFlag, ThoughtCategory, ThoughtType

# --- lineage ---------------------------------------------------------------------------------------
#: A thought refined or consolidated by a newer one (seeds/001: -30%).
SUPERSEDED_MULTIPLIER = 0.7
#: A thought a correction superseded (seeds/000 7b: "hard penalty", -50%). Replaces, not stacks
#: with, :data:`SUPERSEDED_MULTIPLIER`.
SUPERSEDED_BY_CORRECTION_MULTIPLIER = 0.5
#: A correction (seeds/000 7b: "correction_boost", +30%). Kept for one's own corrections too: without
#: it for them, the retrieval benchmark's correction questions (dev; 62 of its 63 corrections are the
#: speaker's own) find the correction first for 80.0% of questions instead of 86.2%.
CORRECTION_MULTIPLIER = 1.3
#: A refinement or consolidation of a thought that is superseded and present in the same candidate
#: set (seeds/001: +20%), so the newer version outranks the one it replaces: when one of those is
#: another contributor's. A new version of one's own thought is put above it by the replacement rule
#: (step 7) and gets no lead over other contributors' thoughts: otherwise an agent that rewords a
#: teammate's answer as its own and then "refines" that with a claim of its own gets the claim ×1.2 over
#: the teammate's answer. (The retrieval benchmark, dev, ranks the same either way.)
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
#: The lowest factor one agent's reports can give a thought (SPEC 6): its effective confidence stops
#: here while a single agent contradicted it (quality.formulas.SINGLE_AGENT_FLOOR is this value), and
#: the ``unverified`` flag such a contradiction brings doesn't take it lower (:func:`_quality_factor`).
REPORTS_FLOOR = 0.5


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


# --- relevance (chosen on the retrieval benchmark's dev split) -------------------------------------
#: Share of the lexical side in the weighted sum; the dense (cosine) side gets the rest. Chosen on the
#: retrieval benchmark's dev split by the rule of benchmarks/retrieval/README.md ("Dev sweep"), which
#: gives every setting's figures, reciprocal-rank fusion's among them.
LEXICAL_WEIGHT = 0.4

# --- BM25 (computed in SQL from the space's own term statistics) ------------------------------------
#: Okapi BM25's term-frequency saturation and length normalisation (the textbook values).
BM25_K1 = 1.2
BM25_B = 0.75
#: Term statistics (document frequencies, the space's size and total length) are exact: triggers keep
#: them (brain.models.LexemeStats / SpaceTextStats), a search reads them by index.
#:
#: Lexical candidates: the lexical side matches on the query's RAREST lexemes, taken in order of
#: document frequency (ties by the lexeme) while their frequencies add up to at most this many
#: thoughts (the rows the statement touches; never a lexeme no thought contains; chosen in SQL:
#: ``matched`` in brain.selectors.search._TERMS_LEXICAL_SQL); the more frequent lexemes still count
#: in every candidate's BM25 but don't bring candidates of their own. A thought that contains only
#: frequent query words scores little BM25 anyway, and the dense side still finds it by meaning. In a
#: space of a few hundred thoughts every lexeme is matched on; in a large one the statement stays
#: bounded (docs/performance.md).
LEXICAL_MATCH_BUDGET = 1000
#: Matched thoughts are first ordered by BM25 as if each query word occurred once (no unnesting of
#: the tsvector); the exact BM25 is computed for this many of them.
LEXICAL_RESCORE = 60

#: A lexeme's IDF is Okapi BM25's non-negative "+1" form, ``ln(1 + (max(n, df) − df + 0.5) / (df +
#: 0.5))`` for a lexeme found in ``df`` of the space's ``n`` thoughts, computed once per query in SQL
#: (``idf`` in brain.selectors.search._TERMS_LEXICAL_SQL) for both sides of the search.


# --- pheromone (reinforcement) --------------------------------------------------------------------
PHEROMONE_BASE = 1.0  # weight of a new thought
PHEROMONE_MAX = 10.0  # cap of reinforcement (SPEC 2.3)
#: The boost at the maximum weight: ×(1 + PHEROMONE_BOOST_MAX). Linear in the weight between 1 and
#: 10, none at or below 1: ``1 + PHEROMONE_BOOST_MAX · clamp((w − 1) / 9, 0, 1)``. A tie-break, not a
#: vote: 200 searches about one subject can't move an unrelated question's answer unless the two
#: thoughts are within 2% of each other anyway (tests/test_brain_reinforcement.py).
PHEROMONE_BOOST_MAX = 0.02

# --- full-text candidates whose embedding is still pending ----------------------------------------
#: Their stand-in similarity is ``FULLTEXT_ONLY_BASE + FULLTEXT_ONLY_SPAN · lexical`` (lexical: the
#: IDF-weighted share of the query they contain); at most 0.8, so a pending thought containing every
#: query word ranks like a good semantic match, not like an exact one.
FULLTEXT_ONLY_BASE = 0.3
FULLTEXT_ONLY_SPAN = 0.5

#: A candidate less similar than this (cosine, before any multiplier) AND sharing no query word is
#: not a result: nearest neighbours always exist, but for all-MiniLM-L6-v2 unrelated sentences score
#: about 0–0.15. A thought that shares a query word stays (the lexical side vouches for it), and so
#: does the live replacement of a superseded result.
MIN_SIMILARITY = 0.2

# --- calibrated relevance (what a source's ``relevance`` in the memory answer means) --------------
#: Every returned source carries ``relevance`` in [0, 1]: an estimate of P(this source is what the
#: asker needs), ``1 / (1 + exp(−z))`` with ``z = RELEVANCE_INTERCEPT + Σ weight · feature`` over
#: :func:`relevance_features` — the source's final score, its cosine, the query's best score (a query
#: whose best match is weak has no good match at all) and ln of its 1-based position in the answer.
#: A logistic regression fitted on the dev rows of both benchmarks only (``python -m
#: benchmarks.retrieval.calibrate ROWS.jsonl``; every returned source of every dev question, the
#: no-answer prompts' sources as negatives); the reliability table and the test figures are in
#: benchmarks/longmem/README.md. It costs a few arithmetic operations per returned source.
#: The score's weight is the large positive one, so relevance rises with the score when the rest is
#: equal; a strong best score lowers the others' relevance (the answer is likely the best one), and
#: later positions lose a little more. Fitted on 651 dev questions (6,505 sources) of the ranking
#: with contrast and diversity.
RELEVANCE_INTERCEPT = -2.492
RELEVANCE_WEIGHTS = (10.108, -0.793, -3.976, -0.648)  # score, similarity, top_score, log_position
#: The injection mode's default ``min_relevance`` (``inject: true`` on the memory API and MCP search;
#: the prompt hook uses it). Chosen on longmem dev only by the rule fixed before looking at test: the
#: lowest threshold whose silence on no-answer prompts is at least 80%, else the one maximising
#: silence + answerable questions with an evidence source injected (steps of 0.01). The trade-off
#: table: benchmarks/longmem/README.md.
INJECT_MIN_RELEVANCE = 0.28

# --- contrast: a second round seeded by the first round's best hits --------------------------------
#: After a first scoring, the dense side is scored again against what the best hits have in common:
#: the centroid ``c`` of the :data:`CONTRAST_SEEDS` best candidates' unit vectors. Each cosine becomes
#: the cosine of ``q − CONTRAST_BETA · c`` with ``v − CONTRAST_BETA · c`` (query and thought with a
#: share of the shared topic taken out), computed from the cosine the search returned, the candidates'
#: vectors and ``q · c`` (the seeds' mean cosine), so the query's vector is not needed; then every
#: candidate is scored again. In a space where forty turns mention "refunds", the topic stops
#: deciding among them, and what the question asks about the topic ("went live for everyone") weighs
#: more. Candidates without a vector keep their stand-in. 0.0 turns it off. Chosen with the diversity
#: constants below, by their rule.
CONTRAST_BETA = 0.3
CONTRAST_SEEDS = 10

# --- diversity (maximal marginal relevance) -------------------------------------------------------
#: The answer's first places are filled one at a time (Carbonell & Goldstein's maximal marginal
#: relevance): among the :data:`DIVERSITY_WINDOW` best-scored candidates not yet placed, the next place
#: goes to the highest ``DIVERSITY_LAMBDA · score − (1 − DIVERSITY_LAMBDA) · s``, where ``s`` is its
#: highest cosine with a thought already placed; the candidates outside the window follow in score
#: order. Ten rewordings of one topic ("who's on refunds today?", "any news on refunds?") don't fill
#: the page while the turn that answers, worded differently, waits at place 14. Scores are not changed,
#: so a later place can show a higher score; ``matching_reason`` says "placed for diversity".
#: 1.0 turns it off.
#:
#: Contrast and diversity are set together on the dev splits of both benchmarks (``python -m
#: benchmarks.retrieval.run --sweep --dataset retrieval``, then ``longmem``), by the rule: the highest
#: longmem dev recall@10 among the settings that keep the retrieval benchmark's dev recall@10 within 1
#: point of the ranking without either (every setting's figures: benchmarks/longmem/README.md, "Ranking").
DIVERSITY_LAMBDA = 0.85
DIVERSITY_WINDOW = 30
#: One contributor's rewordings of one statement don't fill the page (SPEC 6: no one agent buries shared
#: knowledge): while candidates of several contributors can still be placed (a one-author space is
#: ranked as it would be without this), a candidate waits when its contributor has
#: :data:`SAME_CONTRIBUTOR_PLACES` thoughts placed already and one of them is at least this close to it
#: (cosine) (without this, 12 paraphrases of one wrong claim would take the whole top 5 and push three
#: other agents' statements out of it). Two places, so a statement and its update (which is newer?) both
#: stay. Other contributors' close statements are not held back: agreement between agents is what the
#: page should show.
SAME_CONTRIBUTOR_COSINE = 0.8
SAME_CONTRIBUTOR_PLACES = 2
#: The diversity window holds at most this many candidates of one contributor (the next best of others
#: take the rest), so one agent's many notes echoing a question can't make a window of one author, in
#: which SAME_CONTRIBUTOR_PLACES stands down. Two thirds of the window: both benchmarks' dev figures are
#: the same with it as without.
WINDOW_PER_CONTRIBUTOR = 20

SCORE_CAP = 1.0
#: Multi-round retrieval (seeds/000 5c): below this best score a category-filtered search is
#: retried without the category filter.
SUFFICIENT_SCORE = 0.5


@dataclass
class Candidate:
    """One thought found for a query, with how it was found and what ranking did to it."""

    thought: Any  # brain.models.Thought, annotated with superseded_by_category
    similarity: float | None  # cosine; None while the thought's embedding is pending
    bm25: float = 0.0
    idf_total: float = 0.0  # summed IDF of the query's lexemes (normalises bm25)
    dense_rank: int | None = None  # 1-based rank on the dense side, None if it did not find it
    lexical_rank: int | None = None
    via_vector: bool = False
    via_fulltext: bool = False
    embedding_pending: bool = False
    live_replacement_id: str | None = None  # for a superseded thought: its live replacement
    fetched_as_replacement: bool = False  # neither side found it; it came as a replacement
    vector: Any = None  # the stored embedding (numpy float32), for diversity; None while pending
    contrasted: float | None = None  # the cosine after contrast (see CONTRAST_BETA), when it applies
    factor: float = 1.0  # steps 2-5: the product of the multipliers
    relevance: float = 0.0  # step 1's value
    score: float = 0.0
    own_score: float | None = None  # a replacement lifted in step 7: its score before the lift
    probability: float = 0.0  # the calibrated relevance the answer shows (see RELEVANCE_WEIGHTS)
    reasons: list[str] = field(default_factory=list)

    @cached_property
    def id(self) -> str:
        # Read ~200 times per query (sorting, lineage, reinforcement, the response): the UUID's str()
        # once, not each time. A candidate's thought is never replaced.
        return str(self.thought.id)

    @property
    def matching_reason(self) -> str:
        return ", ".join(self.reasons)

    @property
    def lexical(self) -> float:
        """BM25 as the IDF-weighted share of the query this thought contains (0…1)."""
        if self.idf_total <= 0.0:
            return 0.0
        return min(1.0, self.bm25 / self.idf_total)


def pheromone_boost(weight: float) -> float:
    """The pheromone multiplier for a thought that is not superseded (see PHEROMONE_BOOST_MAX)."""
    share = (weight - PHEROMONE_BASE) / (PHEROMONE_MAX - PHEROMONE_BASE)
    return 1.0 + PHEROMONE_BOOST_MAX * min(1.0, max(0.0, share))


def fulltext_only_similarity(lexical: float) -> float:
    return FULLTEXT_ONLY_BASE + FULLTEXT_ONLY_SPAN * min(1.0, max(0.0, lexical))


def _similarity(candidate: Candidate, *, contrasted: bool = True) -> float:
    """The dense side's value: the cosine (contrasted, once :func:`contrast` ran, unless ``contrasted``
    is false), or the stand-in while the embedding is pending."""
    if contrasted and candidate.contrasted is not None:
        return max(0.0, candidate.contrasted)
    if candidate.similarity is None:
        return fulltext_only_similarity(candidate.lexical)
    return max(0.0, candidate.similarity)


def weighted(similarity: float, lexical: float) -> float:
    """Step 1 for one candidate: the weighted sum of the two sides (both 0…1)."""
    return (1.0 - LEXICAL_WEIGHT) * similarity + LEXICAL_WEIGHT * lexical


def relevances(candidates: list[Candidate]) -> list[float]:
    """Step 1: the relevance of each candidate."""
    return [weighted(_similarity(candidate), candidate.lexical) for candidate in candidates]


def relevance_features(*, score: float, similarity: float, top_score: float, position: int) -> list[float]:
    """The features of the calibrated relevance, in :data:`RELEVANCE_WEIGHTS`' order."""
    return [score, similarity, top_score, math.log(position)]


def calibrated_relevance(features: list[float]) -> float:
    """P(relevant) from :func:`relevance_features` (see RELEVANCE_WEIGHTS), in [0, 1]."""
    z = RELEVANCE_INTERCEPT + sum(weight * value for weight, value in zip(RELEVANCE_WEIGHTS, features, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def calibrate(ranked: list[Candidate]) -> None:
    """Set ``probability`` on each candidate of a final ranked list (best first).

    A replacement lifted to the score of what it replaced (step 7) keeps its place but is rated on its
    own score: the lift puts it above what it replaced, it doesn't make it fit the question (a text an
    agent sent as a "refinement" of a fitting thought, about something else, would otherwise be rated
    as fitting, and injected)."""
    top = ranked[0].score if ranked else 0.0
    for position, candidate in enumerate(ranked, start=1):
        candidate.probability = calibrated_relevance(
            relevance_features(
                # The cosine as the search returned it, the feature the constants were fitted on.
                score=candidate.score if candidate.own_score is None else candidate.own_score,
                similarity=_similarity(candidate, contrasted=False),
                top_score=top,
                position=position,
            )
        )


def is_match(candidate: Candidate) -> bool:
    """Whether a candidate is a result at all (see MIN_SIMILARITY)."""
    if candidate.fetched_as_replacement or candidate.bm25 > 0.0:
        return True
    return candidate.similarity is not None and candidate.similarity >= MIN_SIMILARITY


def _superseded_by_correction(thought) -> bool:
    return getattr(thought, "superseded_by_category", None) == ThoughtCategory.CORRECTION


def _author(thought) -> str:
    """Who contributed ``thought``: its agent (renamed or not), else the contributor it names (a human)."""
    agent_id = getattr(thought, "agent_id", None)
    return f"agent:{agent_id}" if agent_id is not None else f"contributor:{getattr(thought, 'contributor_id', '')}"


def _lineage_factor(candidate: Candidate, superseded_present: dict[str, str]) -> float:
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
    author = _author(thought)
    if thought.thought_type in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION) and any(
        superseded_present.get(str(source), author) != author for source in thought.source_ids
    ):
        factor *= REFINEMENT_OF_PRESENT_MULTIPLIER
        candidate.reasons.append(f"{thought.thought_type} of a superseded result ×{REFINEMENT_OF_PRESENT_MULTIPLIER}")
    return factor


def _flag_factor(candidate: Candidate) -> float:
    """Every flag's multiplier but ``unverified``'s, which :func:`_quality_factor` applies."""
    factor = 1.0
    for flag in dict.fromkeys(candidate.thought.quality_flags or []):
        multiplier = QUALITY_FLAG_MULTIPLIERS.get(flag)
        if multiplier is not None and flag != QualityFlag.UNVERIFIED:
            factor *= multiplier
            candidate.reasons.append(f"{flag} ×{multiplier}")
    return factor


def _quality_factor(candidate: Candidate) -> float:
    """The quality loop's factor: :func:`quality_multiplier` (the one implementation of the switch)
    times the ``unverified`` flag's multiplier, both the outcome of agents' reports. While confidence is
    at :data:`REPORTS_FLOOR` or above (one agent's contradictions can't take it lower), the two together
    don't go below it either: a contradiction one agent raised and nobody resolved can't bury a thought
    by the flag it brings. Recorded in ``matching_reason`` when it changes the score."""
    confidence = quality_multiplier(candidate.thought.effective_confidence)
    factor = confidence
    if confidence != 1.0:
        candidate.reasons.append(f"effective confidence ×{confidence:.2f}")
    if QualityFlag.UNVERIFIED in (candidate.thought.quality_flags or []):
        multiplier = QUALITY_FLAG_MULTIPLIERS[QualityFlag.UNVERIFIED]
        factor *= multiplier
        if confidence >= REPORTS_FLOOR and factor < REPORTS_FLOOR:
            factor = REPORTS_FLOOR
            candidate.reasons.append(f"unverified ×{multiplier} (held at the floor ×{REPORTS_FLOOR})")
        else:
            candidate.reasons.append(f"unverified ×{multiplier}")
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
    # The id last: the order never depends on the order the statement's rows came in (its join order).
    return (-candidate.score, candidate.thought.superseded, -(created.timestamp() if created else 0.0), candidate.id)


def _newest_snapshots_first(candidates: list[Candidate], topic: str) -> None:
    """Among the topic's live state snapshots, hand the best-ranked slots to the newest temporal_scope.

    Only the live snapshots move, and only among the places they already hold, so other thoughts keep
    their rank, a stale snapshot can't sit above a newer one of the same topic, and a superseded one
    stays below its replacement (step 7) whatever date it carries.
    """
    slots = [
        index
        for index, candidate in enumerate(candidates)
        if candidate.thought.thought_category == ThoughtCategory.STATE_SNAPSHOT
        and candidate.thought.topic == topic
        and not candidate.thought.superseded
    ]
    if len(slots) < 2:
        return
    snapshots = [candidates[index] for index in slots]
    snapshots.sort(key=lambda c: (c.thought.temporal_scope or date.min, c.score), reverse=True)
    for position, (index, candidate) in enumerate(zip(slots, snapshots, strict=True)):
        if position == 0:
            candidate.reasons.append("newest state snapshot of the topic")
        candidates[index] = candidate


def _replacements_above(ranked: list[Candidate]) -> bool:
    """Step 7: lift each present live replacement to at least its superseded thought's score."""
    by_id = {candidate.id: candidate for candidate in ranked}
    moved = False
    for candidate in ranked:
        if not candidate.thought.superseded or candidate.live_replacement_id not in by_id:
            continue
        replacement = by_id[candidate.live_replacement_id]
        candidate.reasons.append(f"superseded by {replacement.id}, ranked above it")
        if replacement.score < candidate.score:
            if replacement.own_score is None:
                replacement.own_score = replacement.score
            replacement.score = candidate.score
            moved = True
        replacement.reasons.append(f"replaces superseded {candidate.id}: ranked above it")
    return moved


def _unit_rows(candidates: list[Candidate]):
    """The candidates' vectors as unit rows of one numpy matrix (zeros for a candidate without one, or
    with a vector of zeros). In float64: an imported vector may hold values near float32's maximum,
    whose squares overflow float32."""
    import numpy as np

    width = next(c.vector.shape[0] for c in candidates if c.vector is not None)
    matrix = np.zeros((len(candidates), width), dtype=np.float64)
    for row, candidate in enumerate(candidates):
        if candidate.vector is not None:
            matrix[row] = candidate.vector
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0.0, norms, 1.0)


def contrast(candidates: list[Candidate]) -> bool:
    """Set ``contrasted`` on every candidate with a vector (see CONTRAST_BETA), given their first
    scores; False when it does not apply (off, or fewer than two seeds)."""
    import numpy as np

    # A vector given on import may be all zeros (its cosine is NaN): it takes no part.
    with_vector = [
        c
        for c in candidates
        if c.vector is not None and c.similarity is not None and math.isfinite(c.similarity) and c.vector.any()
    ]
    if CONTRAST_BETA <= 0.0 or len(with_vector) < 2:
        return False
    rows = _unit_rows(with_vector)
    # Ties by id: the seeds never depend on the order the statement's rows came in.
    seeds = sorted(range(len(with_vector)), key=lambda i: (-with_vector[i].score, with_vector[i].id))[:CONTRAST_SEEDS]
    centroid = rows[seeds].mean(axis=0)
    query_centroid = float(np.mean([with_vector[i].similarity for i in seeds]))  # q · c
    centroid_norm = float(centroid @ centroid)
    beta = CONTRAST_BETA
    query_norm = math.sqrt(max(1e-12, 1.0 - 2.0 * beta * query_centroid + beta * beta * centroid_norm))
    thought_centroid = rows @ centroid  # v · c
    thought_norms = np.sqrt(np.maximum(1e-12, 1.0 - 2.0 * beta * thought_centroid + beta * beta * centroid_norm))
    for candidate, v_c, v_norm in zip(with_vector, thought_centroid.tolist(), thought_norms.tolist(), strict=True):
        dot = candidate.similarity - beta * query_centroid - beta * v_c + beta * beta * centroid_norm
        candidate.contrasted = dot / (query_norm * v_norm)
    return True


def _contributor(candidate: Candidate) -> str:
    """Who wrote a candidate: its agent, else the contributor it names (a human, an operator's restore)."""
    thought = candidate.thought
    agent_id = getattr(thought, "agent_id", None)
    return f"agent:{agent_id}" if agent_id is not None else f"name:{getattr(thought, 'contributor_id', '')}"


def diversify(ranked: list[Candidate], places: int | None) -> list[Candidate]:
    """Maximal marginal relevance over the best :data:`DIVERSITY_WINDOW` (see DIVERSITY_LAMBDA);
    ``places``: how many places to fill that way (the page), the rest keep score order. A superseded
    thought can't be placed while its live replacement waits, so step 7 holds (after step 7's sort the
    replacement, scored at least as high, is in the window whenever the superseded thought is)."""
    import numpy as np

    window = _window(ranked)
    if DIVERSITY_LAMBDA >= 1.0 or len(window) < 3 or all(c.vector is None for c in window):
        return ranked
    place = {c.id: i for i, c in enumerate(window)}
    waits_for = {
        i: place[c.live_replacement_id]
        for i, c in enumerate(window)
        if c.thought.superseded and c.live_replacement_id in place
    }
    rows = _unit_rows(window)
    value = DIVERSITY_LAMBDA * np.array([c.score for c in window])
    nearest = rows @ rows[0]  # each one's highest cosine with a placed thought
    authors = np.array([_contributor(c) for c in window], dtype=object)
    # each one's highest cosine with a placed thought of its own contributor, and how many its contributor
    # has placed (SAME_CONTRIBUTOR_COSINE, SAME_CONTRIBUTOR_PLACES)
    own_nearest = np.where(authors == authors[0], nearest, -1.0)
    own_placed = (authors == authors[0]).astype(int)
    open_ = np.ones(len(window), dtype=bool)
    open_[0] = False
    chosen = [0]
    wanted = len(window) if places is None else min(places, len(window))
    while len(chosen) < wanted:
        eligible = open_.copy()
        for waiting, replacement in waits_for.items():
            eligible[waiting] &= not open_[replacement]
        unrepeated = eligible & ((own_nearest < SAME_CONTRIBUTOR_COSINE) | (own_placed < SAME_CONTRIBUTOR_PLACES))
        if unrepeated.any() and len(set(authors[eligible])) > 1:
            eligible = unrepeated
        marginal = np.where(eligible, value - (1.0 - DIVERSITY_LAMBDA) * nearest, -np.inf)
        best = int(np.argmax(marginal))
        if best != int(np.argmax(open_)):  # not the best score still open
            window[best].reasons.append("placed for diversity")
        open_[best] = False
        chosen.append(best)
        similar = rows @ rows[best]
        nearest = np.maximum(nearest, similar)
        same = authors == authors[best]
        own_nearest = np.where(same, np.maximum(own_nearest, similar), own_nearest)
        own_placed += same
    rest = [window[i] for i in range(len(window)) if open_[i]]
    inside = {c.id for c in window}
    return [window[i] for i in chosen] + rest + [c for c in ranked if c.id not in inside]


def _window(ranked: list[Candidate]) -> list[Candidate]:
    """The best :data:`DIVERSITY_WINDOW` candidates, at most :data:`WINDOW_PER_CONTRIBUTOR` of one
    contributor's; a superseded one whose live replacement stays out stays out too (step 7)."""
    window: list[Candidate] = []
    counts: dict[str, int] = {}
    left_out: set = set()
    for candidate in ranked:
        author = _contributor(candidate)
        superseded = candidate.thought.superseded and candidate.live_replacement_id in left_out
        if counts.get(author, 0) >= WINDOW_PER_CONTRIBUTOR or superseded:
            left_out.add(candidate.id)
            continue
        counts[author] = counts.get(author, 0) + 1
        window.append(candidate)
        if len(window) == DIVERSITY_WINDOW:
            break
    return window


def _score(candidates: list[Candidate]) -> None:
    """Steps 1-6's score of every candidate: its relevance times its multipliers, capped."""
    for candidate, relevance in zip(candidates, relevances(candidates), strict=True):
        candidate.relevance = relevance
        candidate.score = min(SCORE_CAP, relevance * candidate.factor)


def rank(candidates: list[Candidate], *, filter_topic: str | None = None, limit: int | None = None) -> list[Candidate]:
    """Score every candidate (see the module docstring for the order) and return them best first.

    Candidates that are not matches (:func:`is_match`) are dropped first, except the live replacement of
    a superseded match (a side may have found it, too dissimilar to be a match of its own: it comes
    with what it replaces all the same); ``limit`` cuts the result after the replacement rule, so a
    superseded thought in the page has its replacement above it.
    """
    matches = {candidate.id for candidate in candidates if is_match(candidate)}
    replacing = {
        c.live_replacement_id for c in candidates if c.id in matches and c.thought.superseded and c.live_replacement_id
    }
    candidates = [candidate for candidate in candidates if candidate.id in matches or candidate.id in replacing]
    superseded_present = {c.id: _author(c.thought) for c in candidates if c.thought.superseded}
    for candidate in candidates:
        candidate.factor = (
            _lineage_factor(candidate, superseded_present)
            * _flag_factor(candidate)
            * _quality_factor(candidate)
            * _pheromone_factor(candidate)
        )
    _score(candidates)
    if contrast(candidates):
        _score(candidates)
    ranked = sorted(candidates, key=_sort_key)
    if _replacements_above(ranked):
        ranked.sort(key=_sort_key)
    ranked = diversify(ranked, limit)
    if filter_topic:
        _newest_snapshots_first(ranked, filter_topic)
    # A retracted thought (superseded without a replacement) never ranks above a live one.
    ranked = [c for c in ranked if QualityFlag.RETRACTED not in c.thought.quality_flags] + [
        c for c in ranked if QualityFlag.RETRACTED in c.thought.quality_flags
    ]
    ranked = ranked if limit is None else ranked[:limit]
    calibrate(ranked)
    return ranked
