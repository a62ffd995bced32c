"""Retrieval (SPEC 2.3): dense and lexical candidates in ONE SQL statement, fused by brain.ranking.

One round trip (:data:`_SEARCH_SQL`) returns, for one space and the caller's filters:

- dense candidates: the HNSW scan (cosine) for the ``pool`` nearest thoughts;
- lexical candidates: full text with OR semantics (any query lexeme), ranked by BM25 computed in
  the statement from the space's own term statistics (document frequency of each query lexeme,
  counted through the GIN index and capped at :data:`ranking.BM25_DF_CAP`; the space's size capped at
  :data:`ranking.BM25_N_CAP`; the average document length from the newest
  :data:`ranking.BM25_AVGDL_SAMPLE` thoughts). Lexemes as frequent as the cap are left out of the OR
  match (they would match most of a large space and carry almost no weight) but still score;
- live corrections compared EXACTLY (not through the approximate index, see below);
- for every superseded candidate, its live replacement (following superseded_by / refined_by up to
  :data:`REPLACEMENT_DEPTH` hops), fetched by id even when neither side found it;

and, for each of them, everything ranking needs: exact cosine similarity, BM25, the rank on each
side, the category of what superseded it, flags, quality, pheromone weight. Fusion and the
multipliers are then plain Python over at most a few dozen rows (``brain.ranking.rank``).

Why live corrections are compared exactly: a correction must win at once (issue 4), so its
retrieval can't depend on index recall; pgvector 0.8's filtered scan was seen missing a freshly
inserted correction even at ef_search 1000. Corrections are few, and ``distance + 0`` keeps the
planner off HNSW for that part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction

from brain import ranking
from brain.models import Thought
from brain.selectors.hnsw import hnsw_filtered_scan, hnsw_filtered_scan_sql
from core.models import Space

#: Candidates taken from each side before ranking, relative to the number of results asked for:
#: lineage and flags move scores by up to ×0.5…×1.3, so the pool must be deeper than the page.
POOL_FACTOR = 3
MIN_POOL = 30
#: Most query lexemes used (a 10 000-character prompt stays cheap).
MAX_QUERY_LEXEMES = 64
#: hnsw.ef_search is raised to this multiple of the pool, within pgvector's allowed maximum.
EF_SEARCH_FACTOR = 2
EF_SEARCH_MAX = 1000
#: How many superseded_by / refined_by hops are followed to find a superseded thought's live replacement.
REPLACEMENT_DEPTH = 5

#: The thought columns read back (the vectors and the tsvector stay in the database).
_DEFERRED = {"embedding", "corrected_fact_embedding", "search_vector"}
_COLUMNS = [f for f in Thought._meta.concrete_fields if f.name not in _DEFERRED]


@dataclass
class SearchResult:
    candidates: list[ranking.Candidate]  # ranked, best first, at most ``limit``
    relaxed: bool = False  # the category filter was dropped (multi-round)

    @property
    def method(self) -> str:
        method = "hnsw+fulltext"  # wire value kept: dense (HNSW) + full text (BM25), fused
        return f"{method} (category filter relaxed)" if self.relaxed else method


def query_lexemes(text: str) -> list[str]:
    """The query's normalised lexemes, as PostgreSQL's English configuration stems them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [text])
        (lexemes,) = cursor.fetchone()
    return list(lexemes or [])[:MAX_QUERY_LEXEMES]


def _quote(lexeme: str) -> str:
    """A normalised lexeme as a tsquery operand (already stemmed: no further parsing)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


_SEARCH_SQL = """
{hnsw_settings}WITH RECURSIVE
query_lexemes AS (
    SELECT lexeme,
           ('''' || replace(replace(lexeme, E'\\\\', E'\\\\\\\\'), '''', '''''') || '''')::tsquery AS q
    FROM unnest((tsvector_to_array(to_tsvector('english', %(query_text)s)))[1:%(max_lexemes)s]) AS lexeme
),
terms AS (
    SELECT l.lexeme, l.q,
           (SELECT count(*) FROM (SELECT 1 FROM brain_thought d
                                  WHERE d.space_id = %(space)s AND d.search_vector @@ l.q LIMIT %(df_cap)s) s) AS df
    FROM query_lexemes l
),
stats AS (
    SELECT (SELECT count(*) FROM (SELECT 1 FROM brain_thought d WHERE d.space_id = %(space)s LIMIT %(n_cap)s) s) AS n,
           (SELECT COALESCE(avg(length(d.search_vector)), 1) FROM (
                SELECT search_vector FROM brain_thought d WHERE d.space_id = %(space)s
                ORDER BY d.created_at DESC LIMIT %(avgdl_sample)s) d) AS avgdl
),
idf AS (
    SELECT t.lexeme, t.q, t.df,
           ln(1 + (greatest(s.n, t.df) - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM terms t CROSS JOIN stats s
),
match AS (
    SELECT string_agg(i.q::text, ' | ')::tsquery AS q FROM idf i WHERE i.df < %(df_cap)s
),
dense AS (
    SELECT t.id, row_number() OVER () AS rank FROM (
        SELECT t.id FROM brain_thought t
        WHERE t.space_id = %(space)s AND t.embedding IS NOT NULL {filters}
        ORDER BY t.embedding <=> %(vector)s::vector LIMIT %(pool)s
    ) t
),
lexical AS (
    SELECT id, bm25, row_number() OVER (ORDER BY bm25 DESC, created_at DESC, id) AS rank FROM (
        SELECT t.id, t.created_at, {bm25} AS bm25
        FROM brain_thought t, match m
        WHERE m.q IS NOT NULL AND t.space_id = %(space)s AND t.search_vector @@ m.q {filters}
        ORDER BY 3 DESC, t.created_at DESC, t.id LIMIT %(pool)s
    ) x
),
corrections AS (
    SELECT t.id FROM brain_thought t
    WHERE t.space_id = %(space)s AND t.thought_category = 'correction' AND NOT t.superseded
          AND t.embedding IS NOT NULL {filters}
          AND (t.embedding <=> %(vector)s::vector) < %(max_distance)s
    ORDER BY (t.embedding <=> %(vector)s::vector) + 0 LIMIT %(pool)s
),
found AS (
    SELECT id FROM dense UNION SELECT id FROM lexical UNION SELECT id FROM corrections
),
chain(origin, id, depth) AS (
    SELECT t.id, COALESCE(t.superseded_by_id, t.refined_by_id), 1
    FROM found f JOIN brain_thought t ON t.id = f.id
    WHERE t.superseded AND COALESCE(t.superseded_by_id, t.refined_by_id) IS NOT NULL
    UNION ALL
    SELECT c.origin, COALESCE(t.superseded_by_id, t.refined_by_id), c.depth + 1
    FROM chain c JOIN brain_thought t ON t.id = c.id
    WHERE t.superseded AND COALESCE(t.superseded_by_id, t.refined_by_id) IS NOT NULL AND c.depth < %(depth)s
),
live_replacement AS (
    SELECT DISTINCT ON (c.origin) c.origin, c.id
    FROM chain c JOIN brain_thought t ON t.id = c.id
    WHERE NOT t.superseded AND t.space_id = %(space)s {exclude_t}
    ORDER BY c.origin, c.depth
),
everything AS (
    SELECT id FROM found UNION SELECT id FROM live_replacement
)
SELECT {columns},
       sb.thought_category AS superseded_by_category,
       CASE WHEN t.embedding IS NULL THEN NULL ELSE 1 - (t.embedding <=> %(vector)s::vector) END AS similarity,
       {bm25} AS bm25,
       (SELECT COALESCE(sum(i.idf), 0) FROM idf i) AS idf_total,
       d.rank AS dense_rank, l.rank AS lexical_rank,
       (c.id IS NOT NULL) AS via_correction_scan,
       lr.id AS live_replacement_id,
       (e.id NOT IN (SELECT id FROM found)) AS fetched_as_replacement
FROM everything e
JOIN brain_thought t ON t.id = e.id
LEFT JOIN brain_thought sb ON sb.id = t.superseded_by_id
LEFT JOIN dense d ON d.id = t.id
LEFT JOIN lexical l ON l.id = t.id
LEFT JOIN corrections c ON c.id = t.id
LEFT JOIN live_replacement lr ON lr.origin = t.id
"""

#: BM25 of row ``t`` for the query's lexemes (tf from the tsvector's positions, dl its lexeme count).
_BM25_SQL = """(SELECT COALESCE(sum(i.idf * u.tf * (%(k1)s + 1)
        / (u.tf + %(k1)s * (1 - %(b)s + %(b)s * length(t.search_vector) / (SELECT avgdl FROM stats)))), 0)
    FROM (SELECT x.lexeme, COALESCE(array_length(x.positions, 1), 1) AS tf FROM unnest(t.search_vector) x) u
    JOIN idf i ON i.lexeme = u.lexeme)"""


def _filters(*, filter_topic: str | None, filter_category: str | None, exclude_ids: list[str]) -> tuple[str, str, dict]:
    parts, params = [], {}
    if filter_topic:
        parts.append("AND t.topic = %(filter_topic)s")
        params["filter_topic"] = filter_topic
    if filter_category:
        parts.append("AND t.thought_category = %(filter_category)s")
        params["filter_category"] = filter_category
    exclude = ""
    if exclude_ids:
        exclude = "AND t.id <> ALL(%(exclude)s::uuid[])"
        parts.append(exclude)
        params["exclude"] = exclude_ids
    return " ".join(parts), exclude, params


def _fetch(
    *,
    space: Space,
    vector: list[float],
    query_text: str,
    pool: int,
    filter_topic: str | None,
    filter_category: str | None,
    exclude_ids: list[str],
) -> list[ranking.Candidate]:
    """The one statement; every row becomes a :class:`ranking.Candidate` carrying its ranking inputs."""
    filters, exclude, params = _filters(
        filter_topic=filter_topic, filter_category=filter_category, exclude_ids=exclude_ids
    )
    ef_search = min(EF_SEARCH_MAX, max(40, pool * EF_SEARCH_FACTOR))
    columns = ", ".join(f"t.{f.column}" for f in _COLUMNS)
    sql = _SEARCH_SQL.format(
        hnsw_settings=hnsw_filtered_scan_sql(ef_search=ef_search),
        filters=filters,
        exclude_t=exclude,
        bm25=_BM25_SQL,
        columns=columns,
    )
    params.update(
        {
            "space": space.pk,
            "vector": "[" + ",".join(repr(float(x)) for x in vector) + "]",
            "query_text": query_text,
            "max_lexemes": MAX_QUERY_LEXEMES,
            "pool": pool,
            "df_cap": ranking.BM25_DF_CAP,
            "n_cap": ranking.BM25_N_CAP,
            "avgdl_sample": ranking.BM25_AVGDL_SAMPLE,
            "k1": ranking.BM25_K1,
            "b": ranking.BM25_B,
            "max_distance": 1.0 - ranking.MIN_SIMILARITY,
            "depth": REPLACEMENT_DEPTH,
        }
    )
    attnames = [f.attname for f in _COLUMNS]
    width = len(attnames)
    candidates = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        while cursor.description is None and cursor.nextset():
            pass
        rows = cursor.fetchall()
    converters = [getattr(f, "from_db_value", None) for f in _COLUMNS]
    for row in rows:
        values = [
            convert(value, None, connection) if convert else value
            for convert, value in zip(converters, row[:width], strict=True)
        ]
        thought = Thought.from_db(connection.alias, attnames, values)
        (
            superseded_by_category,
            similarity,
            bm25,
            idf_total,
            dense_rank,
            lexical_rank,
            via_correction,
            replacement,
            fetched,
        ) = row[width:]
        thought.superseded_by_category = superseded_by_category
        candidates.append(
            ranking.Candidate(
                thought=thought,
                similarity=None if similarity is None else float(similarity),
                bm25=float(bm25 or 0.0),
                idf_total=float(idf_total or 0.0),
                dense_rank=dense_rank,
                lexical_rank=lexical_rank,
                via_vector=dense_rank is not None or bool(via_correction),
                via_fulltext=lexical_rank is not None,
                embedding_pending=similarity is None,
                live_replacement_id=str(replacement) if replacement else None,
                fetched_as_replacement=bool(fetched),
            )
        )
    return candidates


def _explain(candidate: ranking.Candidate, *, filter_topic: str | None, filter_category: str | None) -> None:
    """The first words of matching_reason: how it was found, before ranking adds its multipliers."""
    reasons = []
    if candidate.similarity is not None:
        reasons.append(f"similarity {candidate.similarity:.2f}")
    if candidate.via_fulltext:
        words = "full-text match" + (", embedding pending" if candidate.embedding_pending else "")
        reasons.append(f"{words} (bm25 {candidate.bm25:.2f})")
    if candidate.fetched_as_replacement:
        reasons.append("fetched as the live replacement of a superseded result")
    if filter_topic and candidate.thought.topic == filter_topic:
        reasons.append("topic match")
    if filter_category and candidate.thought.thought_category == filter_category:
        reasons.append("category match")
    candidate.reasons = reasons


def _round(
    *,
    space: Space,
    vector: list[float],
    query_text: str,
    limit: int,
    filter_topic: str | None,
    filter_category: str | None,
    exclude_ids: list[str],
) -> list[ranking.Candidate]:
    pool = max(MIN_POOL, limit * POOL_FACTOR)
    candidates = _fetch(
        space=space,
        vector=vector,
        query_text=query_text,
        pool=pool,
        filter_topic=filter_topic,
        filter_category=filter_category,
        exclude_ids=exclude_ids,
    )
    for candidate in candidates:
        _explain(candidate, filter_topic=filter_topic, filter_category=filter_category)
    return ranking.rank(candidates, filter_topic=filter_topic, limit=limit)


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
    exclude_ids = [str(i) for i in exclude_ids]
    kwargs = {"space": space, "vector": vector, "query_text": query_text, "limit": limit, "exclude_ids": exclude_ids}
    ranked = _round(filter_topic=filter_topic, filter_category=filter_category, **kwargs)
    best = ranked[0].score if ranked else 0.0
    if filter_category and best < ranking.SUFFICIENT_SCORE:
        ranked = _round(filter_topic=filter_topic, filter_category=None, **kwargs)
        note = f"relaxed filter: no {filter_category} scored {ranking.SUFFICIENT_SCORE} or more (best {best:.2f})"
        for candidate in ranked:
            if candidate.thought.thought_category == filter_category:
                candidate.reasons.append("category match")
            candidate.reasons.append(note)
        return SearchResult(candidates=ranked, relaxed=True)
    return SearchResult(candidates=ranked)


def thought_nearest(
    *, space: Space, vector: list[float], exclude_ids: Iterable[str] = (), limit: int = 1
) -> list[tuple[Thought, float]]:
    """The most similar thoughts of the space by cosine similarity alone (near-duplicate check)."""
    from pgvector.django import CosineDistance

    qs = Thought.objects.filter(space=space, embedding__isnull=False)
    exclude = [str(i) for i in exclude_ids]
    if exclude:
        qs = qs.exclude(id__in=exclude)
    rows = qs.defer(*_DEFERRED).annotate(distance=CosineDistance("embedding", vector)).order_by("distance")[:limit]
    with transaction.atomic():
        hnsw_filtered_scan(ef_search=max(40, limit * EF_SEARCH_FACTOR))
        return [(t, 1.0 - t.distance) for t in rows]
