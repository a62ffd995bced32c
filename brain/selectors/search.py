"""Retrieval (SPEC 2.3): HNSW candidates unioned with full-text candidates, ranked by brain.ranking.

The vector side finds what is similar in meaning; the full-text side finds thoughts whose
embedding is still being computed (markers, imports) and exact wording the model blurs; live
corrections are also compared exactly, without the approximate index (see
:func:`_correction_candidates`). All are restricted to one space and the same filters, and the
union is ranked once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, models, transaction
from django.db.models import F, Func, QuerySet
from pgvector.django import CosineDistance

from brain import ranking
from brain.choices import ThoughtCategory
from brain.models import Thought
from brain.selectors.hnsw import hnsw_filtered_scan
from core.models import Space

#: Candidates taken from each side before ranking, relative to the number of results asked for:
#: lineage and flags move scores by up to ×0.5…×1.3, so the pool must be deeper than the page.
POOL_FACTOR = 3
MIN_POOL = 30
#: Most query lexemes turned into the OR full-text query (a 10 000-character prompt stays cheap).
MAX_QUERY_LEXEMES = 64
#: hnsw.ef_search is raised to this multiple of the pool, within pgvector's allowed maximum.
EF_SEARCH_FACTOR = 2
EF_SEARCH_MAX = 1000


@dataclass
class SearchResult:
    candidates: list[ranking.Candidate]  # ranked, best first, at most ``limit``
    relaxed: bool = False  # the category filter was dropped (multi-round)

    @property
    def method(self) -> str:
        method = "hnsw+fulltext"
        return f"{method} (category filter relaxed)" if self.relaxed else method


def _base_queryset(
    *, space: Space, filter_topic: str | None, filter_category: str | None, exclude_ids: Iterable[str]
) -> QuerySet[Thought]:
    qs = Thought.objects.filter(space=space).annotate(superseded_by_category=F("superseded_by__thought_category"))
    if filter_topic:
        qs = qs.filter(topic=filter_topic)
    if filter_category:
        qs = qs.filter(thought_category=filter_category)
    exclude = [str(i) for i in exclude_ids]
    if exclude:
        qs = qs.exclude(id__in=exclude)
    return qs.defer("embedding", "corrected_fact_embedding", "search_vector")


def query_lexemes(text: str) -> list[str]:
    """The query's normalised lexemes, as PostgreSQL's English configuration stems them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [text])
        (lexemes,) = cursor.fetchone()
    return list(lexemes or [])[:MAX_QUERY_LEXEMES]


def _tsquery(lexemes: list[str], operator: str) -> SearchQuery:
    """A tsquery joining the (already normalised) lexemes with ``|`` (any) or ``&`` (all)."""
    quoted = ["'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes]
    return SearchQuery(f" {operator} ".join(quoted), search_type="raw", config="simple")


def _vector_candidates(qs: QuerySet[Thought], *, vector: list[float], pool: int) -> list[ranking.Candidate]:
    rows = (
        qs.filter(embedding__isnull=False)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")[:pool]
    )
    # Inside the caller's transaction: a filtered HNSW scan keeps scanning until it has ``pool``
    # rows that pass the filters, instead of returning the few of its first ef_search neighbours.
    ef_search = min(EF_SEARCH_MAX, max(40, pool * EF_SEARCH_FACTOR))
    hnsw_filtered_scan(ef_search=ef_search)
    return [ranking.Candidate(thought=t, similarity=1.0 - t.distance, via_vector=True) for t in rows]


def _correction_candidates(qs: QuerySet[Thought], *, vector: list[float], pool: int) -> list[ranking.Candidate]:
    """The space's live corrections, compared EXACTLY (the HNSW index is approximate).

    A correction must win at once (issue 4), so its retrieval can't depend on index recall. HNSW
    recall is not guaranteed: with the seed's case (five thoughts reinforced and superseded many
    times, then a correction inserted) pgvector 0.8's scan missed the new correction even at
    ef_search 1000, while a rebuilt index found it. Corrections are few, so reading them through
    the (space, category) index and sorting by exact distance is cheap; ``distance + 0`` keeps the
    planner off HNSW.
    """
    rows = (
        qs.filter(thought_category=ThoughtCategory.CORRECTION, superseded=False, embedding__isnull=False)
        .annotate(distance=CosineDistance("embedding", vector))
        .filter(distance__lt=1.0 - ranking.MIN_SIMILARITY)
        .order_by(F("distance") + 0)[:pool]
    )
    return [ranking.Candidate(thought=t, similarity=1.0 - t.distance, via_vector=True) for t in rows]


def _fulltext_candidates(
    qs: QuerySet[Thought], *, vector: list[float], lexemes: list[str], pool: int
) -> list[ranking.Candidate]:
    """Two full-text nets, each cheap at any corpus size.

    Thoughts still waiting for their embedding match on *any* query word (a partial GIN index
    holds only them, so this stays small); their stand-in similarity is the share of query words
    they contain. Embedded thoughts match only on *all* query words: exact wording (an error code,
    a name) the model may blur, scored by their real cosine similarity like every vector hit.
    """
    if not lexemes:
        return []
    any_word, all_words = _tsquery(lexemes, "|"), _tsquery(lexemes, "&")
    pending = (
        qs.filter(embedding__isnull=True, search_vector=any_word)
        .annotate(
            rank=SearchRank(F("search_vector"), any_word),
            lexemes=Func(F("search_vector"), function="tsvector_to_array", output_field=ArrayField(models.TextField())),
        )
        .order_by("-rank")[:pool]
    )
    exact = (
        qs.filter(embedding__isnull=False, search_vector=all_words)
        .annotate(rank=SearchRank(F("search_vector"), all_words), distance=CosineDistance("embedding", vector))
        .order_by("-rank")[:pool]
    )
    wanted = set(lexemes)
    candidates = [
        ranking.Candidate(
            thought=thought,
            similarity=ranking.fulltext_only_similarity(len(wanted.intersection(thought.lexemes or [])) / len(wanted)),
            via_fulltext=True,
            embedding_pending=True,
        )
        for thought in pending
    ]
    candidates += [ranking.Candidate(thought=t, similarity=1.0 - t.distance, via_fulltext=True) for t in exact]
    return candidates


def _union(vector_side: list[ranking.Candidate], *others: list[ranking.Candidate]) -> list[ranking.Candidate]:
    by_id: dict[str, ranking.Candidate] = {c.id: c for c in vector_side}
    for candidate in (c for side in others for c in side):
        if candidate.id in by_id:
            by_id[candidate.id].via_fulltext |= candidate.via_fulltext
        else:
            by_id[candidate.id] = candidate
    return list(by_id.values())


def _explain(candidate: ranking.Candidate, *, filter_topic: str | None, filter_category: str | None) -> None:
    """The first words of matching_reason: how it was found, before ranking adds its multipliers."""
    reasons = []
    if candidate.via_vector:
        reasons.append(f"similarity {candidate.similarity:.2f}")
    if candidate.via_fulltext:
        if candidate.via_vector:
            reasons.append("full-text match")
        elif candidate.embedding_pending:
            reasons.append(f"full-text match, embedding pending ({candidate.similarity:.2f})")
        else:
            reasons.append(f"full-text match, similarity {candidate.similarity:.2f}")
    if filter_topic and candidate.thought.topic == filter_topic:
        reasons.append("topic match")
    if filter_category and candidate.thought.thought_category == filter_category:
        reasons.append("category match")
    candidate.reasons = reasons


def _round(
    *,
    space: Space,
    vector: list[float],
    lexemes: list[str],
    limit: int,
    filter_topic: str | None,
    filter_category: str | None,
    exclude_ids: Iterable[str],
) -> list[ranking.Candidate]:
    pool = max(MIN_POOL, limit * POOL_FACTOR)
    qs = _base_queryset(
        space=space, filter_topic=filter_topic, filter_category=filter_category, exclude_ids=exclude_ids
    )
    with transaction.atomic():
        candidates = _union(
            _vector_candidates(qs, vector=vector, pool=pool),
            _correction_candidates(qs, vector=vector, pool=pool),
            _fulltext_candidates(qs, vector=vector, lexemes=lexemes, pool=pool),
        )
    for candidate in candidates:
        _explain(candidate, filter_topic=filter_topic, filter_category=filter_category)
    return ranking.rank(candidates, filter_topic=filter_topic)


def thought_search(
    *,
    space: Space,
    vector: list[float],
    query_text: str,
    limit: int = 10,
    filter_topic: str | None = None,
    filter_category: str | None = None,
    exclude_ids: Iterable[str] = (),
) -> SearchResult:
    """Ranked thoughts of ``space`` for a query; multi-round when a category filter finds too little.

    ``exclude_ids`` keeps the thought this very call stored out of its own results.
    """
    exclude_ids = list(exclude_ids)
    lexemes = query_lexemes(query_text)
    kwargs = {"space": space, "vector": vector, "lexemes": lexemes, "limit": limit, "exclude_ids": exclude_ids}
    ranked = _round(filter_topic=filter_topic, filter_category=filter_category, **kwargs)
    best = ranked[0].score if ranked else 0.0
    if filter_category and best < ranking.SUFFICIENT_SCORE:
        ranked = _round(filter_topic=filter_topic, filter_category=None, **kwargs)
        note = f"relaxed filter: no {filter_category} scored {ranking.SUFFICIENT_SCORE} or more (best {best:.2f})"
        for candidate in ranked:
            if candidate.thought.thought_category == filter_category:
                candidate.reasons.append("category match")
            candidate.reasons.append(note)
        return SearchResult(candidates=ranked[:limit], relaxed=True)
    return SearchResult(candidates=ranked[:limit])


def thought_nearest(
    *, space: Space, vector: list[float], exclude_ids: Iterable[str] = (), limit: int = 1
) -> list[tuple[Thought, float]]:
    """The most similar thoughts of the space by cosine similarity alone (near-duplicate check)."""
    qs = _base_queryset(space=space, filter_topic=None, filter_category=None, exclude_ids=exclude_ids)
    with transaction.atomic():
        candidates = _vector_candidates(qs, vector=vector, pool=limit)
    return [(c.thought, c.similarity) for c in candidates]
