"""Retrieval (SPEC 2.3): dense and lexical candidates fused by brain.ranking, three statements in one
pipeline, two waits:

1. :data:`_SETTINGS_SQL` — the scan settings of the search (``_SCAN_SETTINGS``: HNSW's filtered
   scan, no sequential scan, joins in the order written) for the rest of its transaction.
2. :data:`_TERMS_LEXICAL_SQL` — the query's lexemes (PostgreSQL's English stemming), each one's
   document frequency in the space, the space's size and total length (index reads of the statistics
   that triggers keep: ``brain.models.LexemeStats`` / ``SpaceTextStats``), their BM25 IDF, the lexemes
   the lexical side matches on (the rarest ones, within ``ranking.LEXICAL_MATCH_BUDGET`` thoughts, so
   the statement stays bounded at any size), and the lexical candidates themselves: full text with OR
   semantics over the matched lexemes, ordered by BM25 as if every word occurred once (one ``@@`` per
   query lexeme), the best ``ranking.LEXICAL_RESCORE`` rescored with the exact BM25 (tf from the
   tsvector's positions), the ``pool`` best kept. It also sets the search's plan mode
   (:data:`GENERIC_PLAN_MIN_THOUGHTS`). It needs no vector: both statements are sent at once, before
   the memory endpoint embeds its query, and the database runs them while this process embeds.
3. :data:`_SEARCH_SQL` returns, for one space and the caller's filters:

- dense candidates: the HNSW scan (cosine) for the ``pool`` nearest thoughts;
- the lexical candidates of statement 2 (their ids and BM25, passed back as arrays);
- live corrections compared EXACTLY (not through the approximate index, see below);
- for every superseded candidate, its live replacement (following superseded_by / refined_by up to
  :data:`REPLACEMENT_DEPTH` hops), fetched by id even when neither side found it;

and, for each of them, everything ranking needs: exact cosine similarity, BM25, the rank on each
side, the category of what superseded it, flags, quality, pheromone weight and the stored vector
(read in binary, for contrast and diversity). Fusion and the multipliers are then plain Python and
numpy over at most a few dozen rows (``brain.ranking.rank``).

The three run in one pipeline (:func:`_fetch`): outside a caller's transaction the statements up to
the pipeline's Sync are one implicit transaction (the settings last until it ends), so the search
needs no BEGIN and no COMMIT of its own, and the search statement's rows come back with that Sync.

Why live corrections are compared exactly: a correction must win at once (SPEC 2.5), so its
retrieval can't depend on index recall; pgvector 0.8's filtered scan can miss a freshly inserted
correction even at ef_search 1000. Corrections are few, and ``distance + 0`` keeps the
planner off HNSW for that part.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psycopg
from django.db import connection, transaction
from django.db.models.base import ModelState

from brain import ranking
from brain.models import THOUGHT_BULKY_FIELDS, Thought
from brain.selectors.hnsw import hnsw_filtered_scan_config_sql, hnsw_filtered_scan_select_sql
from core.db import binary_vector, prepared_cursor, vector_from_binary
from core.models import Space

#: Candidates taken from each side before ranking, relative to the number of results asked for:
#: lineage and flags move scores by up to ×0.5…×1.3, so the pool must be deeper than the page.
POOL_FACTOR = 3
MIN_POOL = 30
#: Most query lexemes used (a 10 000-character prompt stays cheap).
MAX_QUERY_LEXEMES = 64
#: hnsw.ef_search is this multiple of the pool, at least EF_SEARCH_MIN (pgvector's default) and within
#: its allowed maximum. At 1 (ef_search 40 for the pool of 30 a page of 10 asks for) the search
#: statement is 0.3 ms faster at 10,000 thoughts and 0.5 ms at 100,000 than at 2, with the same hit@10
#: and MRR on bench-compare's queries and the same retrieval-benchmark figures (docs/performance.md).
#: The iterative scan goes on past ef_search whenever the filters leave fewer rows than the pool.
EF_SEARCH_FACTOR = 1
EF_SEARCH_MIN = 40
EF_SEARCH_MAX = 1000
#: How many superseded_by / refined_by hops are followed to find a superseded thought's live replacement:
#: a bound, not a design limit (a state snapshot refined at every compaction makes long chains; each
#: hop is one index probe, and only superseded candidates start a walk).
REPLACEMENT_DEPTH = 1000


def ef_search_for(pool: int) -> int:
    """hnsw.ef_search for an HNSW scan that must return ``pool`` rows (the search's dense side and
    ``thought_nearest`` alike)."""
    return min(EF_SEARCH_MAX, max(EF_SEARCH_MIN, pool * EF_SEARCH_FACTOR))


#: The thought columns read back (the vectors and the tsvector stay in the database).
_DEFERRED = set(THOUGHT_BULKY_FIELDS)
#: ... nor what neither ranking nor a response reads (JSON to parse, long texts): a candidate's
#: thought is a deferred-field instance, and reading one of these loads it (one query).
_NOT_READ = {"co_retrieved_with", "context_metadata", "alternatives_considered", "corrected_fact", "correct_fact"}
_COLUMNS = [f for f in Thought._meta.concrete_fields if f.name not in _DEFERRED | _NOT_READ]
_COLUMNS_SQL = ", ".join(f"t.{f.column}" for f in _COLUMNS)

#: A query's vector, or what computes it (the memory endpoint embeds while the lexical side runs).
Vector = list[float] | Callable[[], list[float]]
#: Whether this psycopg can pipeline (libpq 14+); without it the statements run one after the other
#: in a transaction of their own, and the lexical side waits for the vector.
PIPELINE = psycopg.Pipeline.is_supported()


#: A statement the caller has the search run right after its search statement, in its transaction and
#: (in pipeline mode) in its round trip: (SQL, parameters). Its one row comes back as
#: ``SearchResult.companion_row``. A retrieve-only memory call writes its query-log row this way
#: (``brain.services.pheromones.retrieval_log_begin``), so the row is there before the answer without a
#: wait of its own. The search statement fails with it (and the other way round): one transaction.
Companion = tuple[str, dict]


@dataclass
class SearchResult:
    candidates: list[ranking.Candidate]  # ranked, best first, at most ``limit``
    relaxed: bool = False  # the category filter was dropped (multi-round)
    fetched: list[ranking.Candidate] = field(default_factory=list)  # every row the search read
    companion_row: tuple | None = None  # the row of the companion statement, when one was given

    @property
    def method(self) -> str:
        method = "hnsw+fulltext"  # wire value kept: dense (HNSW) + full text (BM25), fused
        return f"{method} (category filter relaxed)" if self.relaxed else method


#: The filtered-scan settings (brain.selectors.hnsw) for this transaction, and no sequential scan of
#: brain_thought: every part of the search reads it through an index (a space filter, HNSW, GIN),
#: and the planner, seeing a frequent lexeme, may prefer scanning a 10 000-thought space.
#: The joins are planned in the order written (``join_collapse_limit`` / ``from_collapse_limit`` 1):
#: below GENERIC_PLAN_MIN_THOUGHTS the statement is planned on every execution, and searching every
#: order of its seven-way final join is 2.7 of its ~10 ms in PostgreSQL at 10,000 thoughts; in written order
#: planning takes 1.7 ms and execution 0.3 ms more (EXPLAIN ANALYZE over 40 of bench-compare's
#: questions, medians; the rows are the same whatever the join order).
_SCAN_SETTINGS = ", ".join(
    [
        *hnsw_filtered_scan_config_sql(ef_search="%(ef_search)s"),
        "set_config('enable_seqscan', 'off', true)",
        "set_config('join_collapse_limit', '1', true)",
        "set_config('from_collapse_limit', '1', true)",
    ]
)
#: Statement 1: the scan settings, and statement 2's plan mode (``%(terms_plan)s``,
#: :data:`GENERIC_TERMS_SPACES`; it also resets what an earlier search in the same transaction left).
_SETTINGS_SQL = f"""SELECT {_SCAN_SETTINGS},
       set_config('plan_cache_mode', %(terms_plan)s, true),
       set_config('enable_sort', 'on', true)"""


#: A space of at least this many thoughts is searched with the search statement's generic plan:
#: made once per connection and statement shape (the prepared statement's, ``plan_cache_mode``)
#: instead of on every call; planning is ~1.2 of the statement's ~6 ms at 10,000 thoughts. A smaller
#: space keeps a plan made for its values (the connection's ``force_custom_plan``, config/settings),
#: where PostgreSQL may scan the space exactly rather than through HNSW (a few thousand thoughts and
#: below), which only a plan that knows the space can choose.
#:
#: A generic plan can't see the space, so its shape is fixed by the statement, not left to estimates
#: (e.g. an average over many small spaces would make an exact scan of a big space look cheap): the
#: dense side names the space as ``space_id + 0``, which no index answers, and the transaction
#: disables sorts, which makes an exact scan (scan + sort) lose to the HNSW scan.
#: ``tests/test_brain_search_plans.py`` checks the shape with misleading statistics. A search
#: filtered by topic or category keeps a custom plan at any size: for a rare topic PostgreSQL scans
#: its few thoughts exactly, where a filtered HNSW scan could stop before it found them all.
#: Statement 2 (terms and the lexical side) is planned for its values until a search of the space has
#: found it big enough (:data:`GENERIC_TERMS_SPACES`).
GENERIC_PLAN_MIN_THOUGHTS = 5000

#: The spaces this process last found to be searched with the generic plan (statement 2's ``plan``,
#: an unfiltered search of at least GENERIC_PLAN_MIN_THOUGHTS thoughts): their next unfiltered search
#: runs statement 2 with its generic plan too. Planning it for its values costs 0.4-0.8 of its 2.1-3.9
#: ms at 10,000 thoughts (two runs), for the same plan: the lexical side's rows come from the GIN
#: index whatever the values, since what it matches on is statement 2's own result, which no plan
#: sees (docs/performance.md, "PostgreSQL"). That matters because statement 2 can take as long as
#: the embedding it runs beside (5.4 against 5.1 ms on a slow machine). Its lexical scan names the
#: space as ``space_id + 0`` in that plan, as the dense side does: with statistics of many small
#: spaces a generic plan would otherwise read the whole space through its btree index and test every
#: thought. A space that shrinks below the threshold is dropped at its next search; filtered searches
#: leave the set as it is (they keep plans made for their values, see above).
GENERIC_TERMS_SPACES: set[int] = set()


#: Statement 2, in parts (CTEs):
#:
#: - ``q``, ``size``, ``idf``: the query's lexemes (in the query's order) with their document frequency
#:   in the space, their IDF (the formula in brain/ranking.py's BM25 part; the search statement and ranking
#:   take these values), the space's size, total lexeme count and average length; and
#:   ``plan``: whether the search statement runs with its generic plan.
#: - ``pending``: the content of a thought this call is about to store (``pending_text``, NULL for
#:   none): the statistics count it as if it were stored (one more document, its length, +1 to the
#:   frequency of each query lexeme it contains), exactly what the triggers will add, so a search run
#:   before the insert scores like one run after it (``thought_search``).
#: - ``match``: the lexemes the lexical side matches on, as one OR tsquery: rarest first (ties by the
#:   lexeme), while their document frequencies add up to at most ``ranking.LEXICAL_MATCH_BUDGET``
#:   thoughts; never a lexeme no thought contains. The more frequent lexemes still count in every
#:   candidate's BM25 but bring no candidates of their own.
#: - ``lexical``: the matched thoughts ordered by BM25 as if each query word occurred once, the best
#:   ``rescore`` rescored exactly, the ``pool`` best kept (their order is their lexical rank).
_TERMS_LEXICAL_SQL = r"""
WITH q AS (
    SELECT u.lexeme, u.ord
    FROM unnest((tsvector_to_array(to_tsvector('english', %(query_text)s::text)))[1:%(max_lexemes)s::int])
         WITH ORDINALITY AS u(lexeme, ord)
), pending AS MATERIALIZED (
    SELECT to_tsvector('english', p.text) AS vector
    FROM (SELECT %(pending_text)s::text AS text) p WHERE p.text IS NOT NULL
), size AS MATERIALIZED (
    SELECT z.documents, z.lexemes,
           CASE WHEN z.documents > 0 THEN z.lexemes::float8 / z.documents::float8 ELSE 1.0::float8 END AS avgdl
    FROM (
        SELECT COALESCE(sum(s.documents), 0) + (SELECT count(*) FROM pending) AS documents,
               COALESCE(sum(s.lexemes), 0) + (SELECT COALESCE(sum(length(vector)), 0) FROM pending) AS lexemes
        FROM brain_spacetextstats s WHERE s.space_id = %(space)s::bigint
    ) z
), plan AS MATERIALIZED (
    SELECT %(generic_allowed)s::boolean AND size.documents >= %(generic_min)s::int AS generic FROM size
), idf AS MATERIALIZED (
    SELECT d.lexeme, d.ord, d.df, d.operand, d.operand::tsquery AS query,
           ln(1.0::float8 + (GREATEST(size.documents, d.df) - d.df + 0.5)::float8 / (d.df + 0.5)::float8) AS idf
    FROM (
        SELECT q.lexeme, q.ord,
               '''' || replace(replace(q.lexeme, '\', '\\'), '''', '''''') || '''' AS operand,
               (SELECT COALESCE(sum(l.documents), 0) FROM brain_lexemestats l
                WHERE l.space_id = %(space)s AND l.lexeme = q.lexeme)
               + (SELECT count(*) FROM pending WHERE q.lexeme = ANY(tsvector_to_array(pending.vector))) AS df
        FROM q
    ) d, size
), matched AS MATERIALIZED (
    SELECT m.lexeme, m.operand, m.df FROM (
        SELECT i.lexeme, i.operand, i.df,
               sum(i.df) OVER (ORDER BY i.df, i.lexeme COLLATE "C" ROWS UNBOUNDED PRECEDING) AS touched
        FROM idf i WHERE i.df > 0
    ) m WHERE m.touched <= %(budget)s
), match AS MATERIALIZED (
    SELECT string_agg(m.operand, ' | ' ORDER BY m.df, m.lexeme COLLATE "C")::tsquery AS query FROM matched m
), lexical AS MATERIALIZED (
    SELECT x.id, x.created_at, {bm25_x} AS bm25 FROM (
        SELECT t.id, t.created_at, t.search_vector FROM brain_thought t
        WHERE {lexical_space} AND t.search_vector @@ (SELECT query FROM match) {filters}
        ORDER BY (SELECT COALESCE(sum(i.idf), 0) FROM idf i WHERE t.search_vector @@ i.query) * (%(k1)s + 1)
                 / (1 + %(k1)s * (1 - %(b)s + %(b)s * length(t.search_vector) / (SELECT avgdl FROM size))) DESC,
                 t.created_at DESC, t.id
        LIMIT %(rescore)s
    ) x
    ORDER BY 3 DESC, x.created_at DESC, x.id LIMIT %(pool)s
)
SELECT (SELECT avgdl FROM size),
       (SELECT generic FROM plan),
       (SELECT COALESCE(array_agg(i.lexeme ORDER BY i.ord), '{{}}') FROM idf i),
       (SELECT COALESCE(array_agg(i.idf ORDER BY i.ord), '{{}}') FROM idf i),
       (SELECT COALESCE(array_agg(m.lexeme ORDER BY m.df, m.lexeme COLLATE "C"), '{{}}') FROM matched m),
       (SELECT COALESCE(array_agg(l.id ORDER BY l.bm25 DESC, l.created_at DESC, l.id), '{{}}') FROM lexical l),
       (SELECT COALESCE(array_agg(l.bm25 ORDER BY l.bm25 DESC, l.created_at DESC, l.id), '{{}}') FROM lexical l),
       set_config('plan_cache_mode',
                  CASE WHEN (SELECT generic FROM plan) THEN 'force_generic_plan' ELSE 'force_custom_plan' END, true),
       set_config('enable_sort', CASE WHEN (SELECT generic FROM plan) THEN 'off' ELSE 'on' END, true)
"""


@dataclass
class QueryTerms:
    """BM25's view of one query in one space (see :data:`_TERMS_LEXICAL_SQL`)."""

    lexemes: list[str]
    idf: list[float]
    avgdl: float
    match: list[str]  # the lexemes the lexical side matched on (rarest first, within the budget)
    generic_plan: bool = False  # the search statement runs with its generic plan (GENERIC_PLAN_MIN_THOUGHTS)

    @property
    def idf_total(self) -> float:
        return sum(self.idf)


def _terms_params(*, space_id: int, query_text: str, ef_search: int, filtered: bool, pending_text: str | None) -> dict:
    return {
        "query_text": query_text,
        "pending_text": pending_text,
        "max_lexemes": MAX_QUERY_LEXEMES,
        "space": space_id,
        "ef_search": str(ef_search),
        "generic_min": GENERIC_PLAN_MIN_THOUGHTS,
        "generic_allowed": not filtered,
        "budget": ranking.LEXICAL_MATCH_BUDGET,
        "k1": ranking.BM25_K1,
        "b": ranking.BM25_B,
    }


def _send_terms_and_lexical(cursor, params: dict, filters: str) -> None:
    """Statements 1 and 2 (in pipeline mode: sent, not waited for).

    In pipeline mode a flush request follows them: PostgreSQL keeps a pipeline's results in its own
    output buffer until it gets a Flush or a Sync: without one their row would leave the server only
    when the read after the embedding asks for it, one more round trip on the critical path (0.6-1.2 ms
    of waiting for that read in process; the flush saves 0.2 ms of it, docs/performance.md). With it the
    row is already in this process's socket when the embedding is done."""
    generic = params["generic_allowed"] and params["space"] in GENERIC_TERMS_SPACES
    cursor.execute(
        _SETTINGS_SQL,
        {"ef_search": params["ef_search"], "terms_plan": "force_generic_plan" if generic else "force_custom_plan"},
    )
    sql = _TERMS_LEXICAL_SQL.format(
        filters=filters,
        bm25_x=_BM25_SQL.format(row="x", avgdl=_AVGDL),
        lexical_space="t.space_id + 0 = %(space)s" if generic else "t.space_id = %(space)s",
    )
    cursor.execute(sql, params)
    pgconn = cursor.connection.pgconn
    if pgconn.pipeline_status == psycopg.pq.PipelineStatus.ON:
        pgconn.send_flush_request()
        pgconn.flush()  # what a full socket buffer leaves unsent goes out with the read


def _read_terms_and_lexical(cursor, params: dict) -> tuple[QueryTerms, list, list[float]]:
    """Statement 2's row: (the query's terms, the lexical candidates' ids and BM25, best first); an
    unfiltered search also records here whether its space is searched with the generic plan."""
    avgdl, generic_plan, lexemes, idfs, match, lexical_ids, lexical_bm25 = cursor.fetchone()[:7]
    if params["generic_allowed"]:
        (GENERIC_TERMS_SPACES.add if generic_plan else GENERIC_TERMS_SPACES.discard)(params["space"])
    terms = QueryTerms(
        lexemes=list(lexemes),
        idf=[float(idf) for idf in idfs],
        avgdl=float(avgdl),
        match=list(match),
        generic_plan=bool(generic_plan),
    )
    return terms, list(lexical_ids), [float(value) for value in lexical_bm25]


#: Everything else, given the vector and the lexical side's rows (``lexical_ids`` / ``lexical_bm25``,
#: best first). Its arrays are bound in binary (``%(name)b``): psycopg dumps a list as text value by
#: value (a regular expression per string for its quoting, every float printed), which costs ~0.1 ms
#: of CPU a call for the ~70 values of a 10k space (docs/performance.md, "PostgreSQL").
_SEARCH_SQL = """
WITH RECURSIVE
idf AS MATERIALIZED (
    SELECT i.lexeme, i.idf FROM unnest(%(lexemes)b::text[], %(idfs)b::float8[]) AS i(lexeme, idf)
),
dense AS (
    SELECT t.id, row_number() OVER () AS rank FROM (
        SELECT t.id FROM brain_thought t
        WHERE {in_space} AND t.embedding IS NOT NULL {filters}
        ORDER BY t.embedding <=> %(vector)s::vector LIMIT %(pool)s
    ) t
),
lexical AS (
    SELECT l.id, l.bm25, l.rank
    FROM unnest(%(lexical_ids)b::uuid[], %(lexical_bm25)b::float8[]) WITH ORDINALITY AS l(id, bm25, rank)
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
       ag.name AS agent_name,
       CASE WHEN t.embedding IS NULL THEN NULL ELSE 1 - (t.embedding <=> %(vector)s::vector) END AS similarity,
       COALESCE(l.bm25, {bm25_t}) AS bm25,
       d.rank AS dense_rank, l.rank AS lexical_rank,
       (c.id IS NOT NULL) AS via_correction_scan,
       lr.id AS live_replacement_id,
       (e.id NOT IN (SELECT id FROM found)) AS fetched_as_replacement,
       t.embedding AS vector
FROM everything e
JOIN brain_thought t ON t.id = e.id
LEFT JOIN brain_thought sb ON sb.id = t.superseded_by_id
LEFT JOIN core_agent ag ON ag.id = t.agent_id
LEFT JOIN dense d ON d.id = t.id
LEFT JOIN lexical l ON l.id = t.id
LEFT JOIN corrections c ON c.id = t.id
LEFT JOIN live_replacement lr ON lr.origin = t.id
"""

#: BM25 of row ``{row}`` for the query's lexemes (tf from the tsvector's positions, dl its lexeme count).
#: The final SELECT takes a lexical candidate's from the lexical side (the same expression on the same
#: row; ``COALESCE`` runs the subquery only for the others): ~25 µs per row saved on half the rows.
#: ``{avgdl}``: the space's average length, statement 2's own (:data:`_AVGDL`) or a parameter.
_BM25_SQL = """(SELECT COALESCE(sum(i.idf * u.tf * (%(k1)s + 1)
        / (u.tf + %(k1)s * (1 - %(b)s + %(b)s * length({row}.search_vector) / {avgdl}))), 0)
    FROM (SELECT x.lexeme, COALESCE(array_length(x.positions, 1), 1) AS tf FROM unnest({row}.search_vector) x) u
    JOIN idf i ON i.lexeme = u.lexeme)"""
_AVGDL = "(SELECT avgdl FROM size)"


def thought_from_row(attnames: list[str], values: list, *, db: str | None = None) -> Thought:
    """What ``Thought.from_db`` builds (a saved instance whose unread columns load on access), without
    ``Model.__init__``'s per-field loop: ~45 candidates per query make that ~2 ms of CPU. Thought has no
    ``pre_init``/``post_init`` receivers, which are all ``__init__`` would add. ``db``: the connection's
    alias, when the caller has it (``connection.alias`` goes through a thread-local lookup per row)."""
    thought = Thought.__new__(Thought)
    thought.__dict__.update(zip(attnames, values, strict=True))
    state = thought._state = ModelState()
    state.adding = False
    state.db = db or connection.alias
    return thought


#: The candidate pools leave out dead ends: thoughts superseded with nothing after them (retracted, or
#: imported so). A superseded thought with a successor stays a candidate (its live replacement is fetched
#: with it); a dead end has nothing to hand over, and a batch of them (one agent's withdrawn notes echoing
#: a question) would take the pools' places that live thoughts need.
_NOT_A_DEAD_END = "AND NOT (t.superseded AND t.superseded_by_id IS NULL AND t.refined_by_id IS NULL)"


#: One contributor's notes can't fill the pools: when a pool came back full and one contributor holds at
#: least this share of what the pools found, in a space where others have contributed, the search fetches
#: again without that contributor and ranks both fetches together (``_round``): a teammate's answer behind
#: one agent's many notes echoing a question is still fetched, and ranking's one-contributor rule
#: (SAME_CONTRIBUTOR_PLACES) sees a page of several authors.
POOL_CROWDED_SHARE = 0.9
#: How long a process remembers that a space holds another contributor's thoughts than the crowding one's.
OTHERS_CACHE_SECONDS = 60.0
_OTHERS_CACHE: dict[tuple[int, str], tuple[float, bool]] = {}


def _filters(
    *, filter_topic: str | None, filter_category: str | None, exclude_ids: list[str], without: str | None = None
) -> tuple[str, str, dict]:
    parts, params = [_NOT_A_DEAD_END], {}
    if without is not None:
        parts.append("AND COALESCE(t.agent_id::text, t.contributor_id) <> %(without)s")
        params["without"] = without
    if filter_topic:
        parts.append("AND t.topic = %(filter_topic)s")
        params["filter_topic"] = filter_topic
    if filter_category:
        parts.append("AND t.thought_category = %(filter_category)s")
        params["filter_category"] = filter_category
    exclude = ""
    if exclude_ids:
        exclude = "AND t.id <> ALL(%(exclude)b::uuid[])"  # bound in binary, like _SEARCH_SQL's arrays
        parts.append(exclude)
        params["exclude"] = exclude_ids
    return " ".join(parts), exclude, params


def _resolve(vector: Vector) -> list[float]:
    return vector() if callable(vector) else vector


def _in_space(terms: QueryTerms) -> str:
    return "t.space_id + 0 = %(space)s" if terms.generic_plan else "t.space_id = %(space)s"


def _fetch(
    *,
    space: Space,
    vector: Vector,
    query_text: str,
    pool: int,
    filter_topic: str | None,
    filter_category: str | None,
    exclude_ids: list[str],
    pending_text: str | None = None,
    companion: Companion | None = None,
    without: str | None = None,
) -> tuple[list[ranking.Candidate], list[float], tuple | None]:
    """The search's three statements (candidates, each carrying its ranking inputs; the query's
    vector, computed here when ``vector`` is a callable; the ``companion`` statement's row, run
    right after the search statement when one is given).

    With pipelining (libpq 14+), statements 1 and 2 are sent at once and the database runs them while
    this process embeds the query (``vector`` a callable: the memory endpoint's calls); their row is
    read afterwards, the search statement is sent, and its rows come back with the pipeline's Sync,
    which also ends the implicit transaction the three ran in (inside a caller's transaction they run
    in that one). The embedding (~2.5-4 ms of CPU) hides statement 2's ~1.5-2.5 ms at 10,000
    thoughts. A statement that fails surfaces at the read, like any other. Without pipelining they run
    one by one in a transaction of their own."""
    filters, exclude, params = _filters(
        filter_topic=filter_topic, filter_category=filter_category, exclude_ids=exclude_ids, without=without
    )
    params.update(
        _terms_params(
            space_id=space.pk,
            query_text=query_text,
            ef_search=ef_search_for(pool),
            filtered=bool(filter_topic or filter_category),
            pending_text=pending_text,
        )
    )
    params.update({"pool": pool, "rescore": max(pool, ranking.LEXICAL_RESCORE)})
    # The companion statement gets a cursor of its own: a cursor holds its last statement's rows.
    with prepared_cursor() as cursor, prepared_cursor() if companion else contextlib.nullcontext() as side:
        with cursor.connection.pipeline() if PIPELINE else transaction.atomic():
            _send_terms_and_lexical(cursor, params, filters)
            vector = _resolve(vector)  # the database works on statements 1 and 2 meanwhile
            terms, lexical_ids, lexical_bm25 = _read_terms_and_lexical(cursor, params)
            params.update(
                {
                    "lexemes": terms.lexemes,
                    "idfs": terms.idf,
                    "avgdl": terms.avgdl,
                    "vector": binary_vector(vector),
                    "lexical_ids": lexical_ids,
                    "lexical_bm25": lexical_bm25,
                    "max_distance": 1.0 - ranking.MIN_SIMILARITY,
                    "depth": REPLACEMENT_DEPTH,
                }
            )
            sql = _SEARCH_SQL.format(
                filters=filters,
                exclude_t=exclude,
                bm25_t=_BM25_SQL.format(row="t", avgdl="%(avgdl)s"),
                in_space=_in_space(terms),
                columns=_COLUMNS_SQL,
            )
            # Read in binary: timestamps, UUIDs, arrays and floats load in C instead of parsing their
            # text (Django's timestamptz loader is psycopg's Python one).
            cursor.cursor.binary_results = True
            try:
                cursor.execute(sql, params)
            finally:
                cursor.cursor.binary_results = None
            if side is not None:
                side.execute(*companion)
        rows = cursor.fetchall()  # pipelined: they came back with the pipeline's Sync
        companion_row = side.fetchone() if side is not None else None
    attnames = [f.attname for f in _COLUMNS]
    width = len(attnames)
    candidates = []
    # The columns whose field converts what the database gives (one of 29: source_ref's JSONField).
    converters = [(i, f.from_db_value) for i, f in enumerate(_COLUMNS) if getattr(f, "from_db_value", None)]
    idf_total = terms.idf_total
    db = connection.alias
    for row in rows:
        values = list(row[:width])
        for i, convert in converters:
            values[i] = convert(values[i], None, connection)
        thought = thought_from_row(attnames, values, db=db)
        (
            superseded_by_category,
            agent_name,
            similarity,
            bm25,
            dense_rank,
            lexical_rank,
            via_correction,
            replacement,
            fetched,
            stored_vector,
        ) = row[width:]
        thought.superseded_by_category = superseded_by_category
        thought.agent_name = agent_name  # what Thought.contributor names, without a query per candidate
        candidates.append(
            ranking.Candidate(
                thought=thought,
                similarity=None if similarity is None else float(similarity),
                bm25=float(bm25 or 0.0),
                idf_total=idf_total,
                dense_rank=dense_rank,
                lexical_rank=lexical_rank,
                via_vector=dense_rank is not None or bool(via_correction),
                via_fulltext=lexical_rank is not None,
                embedding_pending=similarity is None,
                live_replacement_id=str(replacement) if replacement else None,
                fetched_as_replacement=bool(fetched),
                vector=vector_from_binary(stored_vector),
            )
        )
    return candidates, vector, companion_row


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
    vector: Vector,
    query_text: str,
    limit: int,
    filter_topic: str | None,
    filter_category: str | None,
    exclude_ids: list[str],
    pending_text: str | None = None,
    companion: Companion | None = None,
) -> tuple[list[ranking.Candidate], list[ranking.Candidate], list[float], tuple | None]:
    """One search: (the ranked page, every candidate fetched, the query's vector, the companion's row)."""
    pool = max(MIN_POOL, limit * POOL_FACTOR)
    fetch = functools.partial(
        _fetch,
        space=space,
        query_text=query_text,
        pool=pool,
        filter_topic=filter_topic,
        filter_category=filter_category,
        exclude_ids=exclude_ids,
        pending_text=pending_text,
    )
    candidates, vector, companion_row = fetch(vector=vector, companion=companion)
    crowding = _crowding(candidates, pool=pool, space_id=space.pk)
    if crowding is not None:
        more, _vector, _none = fetch(vector=vector, without=crowding)
        fetched = {candidate.id for candidate in candidates}
        candidates += [candidate for candidate in more if candidate.id not in fetched]
    for candidate in candidates:
        _explain(candidate, filter_topic=filter_topic, filter_category=filter_category)
    return ranking.rank(candidates, filter_topic=filter_topic, limit=limit), candidates, vector, companion_row


def _owner(thought: Thought) -> str:
    """Who a candidate is by: its agent (whatever it is called now), else the stored contributor id."""
    return str(thought.agent_id) if thought.agent_id else thought.contributor_id


def _crowding(candidates: list[ranking.Candidate], *, pool: int, space_id: int) -> str | None:
    """The contributor whose thoughts crowd the pools (see :data:`POOL_CROWDED_SHARE`), or None."""
    found = [c for c in candidates if c.dense_rank is not None or c.lexical_rank is not None]
    full = (
        sum(c.dense_rank is not None for c in found) >= pool or sum(c.lexical_rank is not None for c in found) >= pool
    )
    if not full:
        return None
    counts: dict[str, int] = {}
    for candidate in found:
        owner = _owner(candidate.thought)
        counts[owner] = counts.get(owner, 0) + 1
    owner, most = max(counts.items(), key=lambda item: item[1])
    if most < POOL_CROWDED_SHARE * len(found) or not _others_contributed(space_id=space_id, owner=owner):
        return None
    return owner


def _others_contributed(*, space_id: int, owner: str) -> bool:
    """Whether the space holds a live thought of another contributor than ``owner`` (remembered a while:
    in a one-author space every full page is that author's, and the answer there is always no)."""
    key = (space_id, owner)
    now = time.monotonic()
    known = _OTHERS_CACHE.get(key)
    if known is not None and known[0] > now:
        return known[1]
    live = Thought.objects.filter(space_id=space_id, superseded=False)
    by_others = live.exclude(agent_id=owner) if _is_uuid(owner) else live.exclude(contributor_id=owner, agent_id=None)
    others = by_others.exists()
    if len(_OTHERS_CACHE) > 10_000:
        _OTHERS_CACHE.clear()
    _OTHERS_CACHE[key] = (now + OTHERS_CACHE_SECONDS, others)
    return others


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def thought_search(
    *,
    space: Space,
    vector: Vector,
    query_text: str,
    limit: int = 10,
    filter_topic: str | None = None,
    filter_category: str | None = None,
    exclude_ids: Iterable[str] = (),
    pending_text: str | None = None,
    companion: Companion | None = None,
) -> SearchResult:
    """Ranked thoughts of ``space`` for a query; multi-round when a category filter finds too little.

    ``exclude_ids`` keeps the thought this very call stored out of its own results. ``vector`` may be
    a callable that computes it: it is then called once, while the database runs the first round's
    lexical side (a relaxed second round reuses what it returned). ``pending_text`` is the content of
    a thought the caller is about to store, searching first: BM25's statistics count it as stored,
    so the search scores as it would once the thought is stored and left out by ``exclude_ids``.
    ``companion`` (see :data:`Companion`) runs with the first round's search statement.
    """
    exclude_ids = [str(i) for i in exclude_ids]
    kwargs = {
        "space": space,
        "query_text": query_text,
        "limit": limit,
        "exclude_ids": exclude_ids,
        "pending_text": pending_text,
    }
    ranked, fetched, vector, companion_row = _round(
        filter_topic=filter_topic, filter_category=filter_category, vector=vector, companion=companion, **kwargs
    )
    best = ranked[0].score if ranked else 0.0
    if filter_category and best < ranking.SUFFICIENT_SCORE:
        ranked, fetched, _vector, _none = _round(
            filter_topic=filter_topic, filter_category=None, vector=vector, **kwargs
        )
        note = f"relaxed filter: no {filter_category} scored {ranking.SUFFICIENT_SCORE} or more (best {best:.2f})"
        for candidate in ranked:
            if candidate.thought.thought_category == filter_category:
                candidate.reasons.append("category match")
            candidate.reasons.append(note)
        return SearchResult(candidates=ranked, relaxed=True, fetched=fetched, companion_row=companion_row)
    return SearchResult(candidates=ranked, fetched=fetched, companion_row=companion_row)


#: The nearest live thoughts by cosine alone (HNSW, the filtered-scan settings of the caller's transaction).
_NEAREST_SQL = """
SELECT t.id, t.content, 1 - (t.embedding <=> %(vector)s::vector) AS similarity
FROM brain_thought t
WHERE t.space_id = %(space)s AND t.embedding IS NOT NULL AND NOT t.superseded AND t.id <> ALL(%(exclude)b::uuid[])
ORDER BY t.embedding <=> %(vector)s::vector LIMIT %(limit)s
"""
_NEAREST_SETTINGS_SQL = hnsw_filtered_scan_select_sql(ef_search="%(ef_search)s")


def thought_nearest(
    *, space: Space, vector: list[float], exclude_ids: Iterable[str] = (), limit: int = 1
) -> list[tuple[Thought, float]]:
    """The most similar live thoughts of the space by cosine similarity alone (near-duplicate check).

    Each thought carries ``id`` and ``content``; any other field loads on access. Two prepared
    statements (this runs on every contribution; the ORM built and compiled the query each time).
    """
    params = {
        "space": space.pk,
        "vector": binary_vector(vector),
        "exclude": [str(i) for i in exclude_ids],
        "limit": limit,
    }
    with transaction.atomic(), prepared_cursor() as cursor:
        cursor.execute(_NEAREST_SETTINGS_SQL, {"ef_search": str(ef_search_for(limit))})
        cursor.execute(_NEAREST_SQL, params)
        rows = cursor.fetchall()
    return [(thought_from_row(["id", "content"], [pk, content]), float(similarity)) for pk, content, similarity in rows]
