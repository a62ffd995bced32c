"""BM25's term statistics (``brain.models.SpaceTextStats`` / ``LexemeStats``): read and compact.

The rows are deltas that triggers on ``brain_thought`` append (migration 0008); a statistic is the
SUM of its rows. :func:`text_stats_compact` folds them, so reads stay a few index entries per lexeme.
"""

from __future__ import annotations

from django.db import connection, transaction

#: Spaces written to since they were last compacted: a statement that inserts, deletes or changes
#: thoughts appends a row to ``brain_spacetextstats`` together with its lexeme rows (migration 0008),
#: so a space with one row has no lexeme delta to fold either. A small table: one row per space
#: plus the deltas since the last run.
_CHANGED_SPACES_SQL = "SELECT space_id FROM brain_spacetextstats GROUP BY space_id HAVING count(*) > 1"

_COMPACT_LEXEMES_SQL = """
WITH many AS (
    SELECT space_id, lexeme FROM brain_lexemestats WHERE space_id = ANY(%(spaces)s::bigint[])
    GROUP BY space_id, lexeme HAVING count(*) > 1
), gone AS (
    DELETE FROM brain_lexemestats l USING many m
    WHERE l.space_id = m.space_id AND l.lexeme = m.lexeme
    RETURNING l.space_id, l.lexeme, l.documents
)
INSERT INTO brain_lexemestats (space_id, lexeme, documents)
SELECT space_id, lexeme, sum(documents) FROM gone GROUP BY space_id, lexeme HAVING sum(documents) <> 0
"""

_COMPACT_SPACES_SQL = """
WITH gone AS (
    DELETE FROM brain_spacetextstats s WHERE s.space_id = ANY(%(spaces)s::bigint[])
    RETURNING s.space_id, s.documents, s.lexemes
)
INSERT INTO brain_spacetextstats (space_id, documents, lexemes)
SELECT space_id, sum(documents), sum(lexemes) FROM gone GROUP BY space_id
"""


def text_stats_compact() -> int:
    """Fold the delta rows of every space written to since the last run into one row per space and
    lexeme (a periodic job, every ``TEXT_STATS_COMPACT_SECONDS``). Returns the rows written.

    A search sums a lexeme's rows, so their number is what it reads: a space taking five writes a
    second gains ~300 rows per common lexeme a minute, and the query's terms statement slows with
    them until they are folded. A run that finds no written space costs one statement over the small
    space table; otherwise it reads only the written spaces' lexeme rows.

    Safe beside writers and beside another run: the triggers only ever insert new rows, and the rows
    this deletes and replaces by their sum are those its own statement saw (a row another run deleted
    first is skipped, not summed twice), in one transaction.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CHANGED_SPACES_SQL)
        spaces = [row[0] for row in cursor.fetchall()]
        if not spaces:
            return 0
        cursor.execute(_COMPACT_LEXEMES_SQL, {"spaces": spaces})
        written = cursor.rowcount
        cursor.execute(_COMPACT_SPACES_SQL, {"spaces": spaces})
        return written + cursor.rowcount


def text_stats_verify(space_id: int) -> list[str]:
    """Differences between the kept statistics of a space and a recount (empty when exact)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH kept AS (SELECT lexeme, sum(documents) AS n FROM brain_lexemestats WHERE space_id = %(s)s
                          GROUP BY lexeme HAVING sum(documents) <> 0),
                 counted AS (SELECT x.lexeme, count(*) AS n FROM brain_thought t, unnest(t.search_vector) x
                             WHERE t.space_id = %(s)s GROUP BY x.lexeme)
            SELECT COALESCE(k.lexeme, c.lexeme), k.n, c.n FROM kept k FULL JOIN counted c ON c.lexeme = k.lexeme
            WHERE k.n IS DISTINCT FROM c.n ORDER BY 1
            """,
            {"s": space_id},
        )
        problems = [f"lexeme {lexeme!r}: kept {kept}, counted {counted}" for lexeme, kept, counted in cursor.fetchall()]
        cursor.execute(
            """
            SELECT (SELECT COALESCE(sum(documents), 0) FROM brain_spacetextstats WHERE space_id = %(s)s),
                   (SELECT COALESCE(sum(lexemes), 0) FROM brain_spacetextstats WHERE space_id = %(s)s),
                   (SELECT count(*) FROM brain_thought WHERE space_id = %(s)s),
                   (SELECT COALESCE(sum(length(search_vector)), 0) FROM brain_thought WHERE space_id = %(s)s)
            """,
            {"s": space_id},
        )
        documents, lexemes, counted_documents, counted_lexemes = cursor.fetchone()
        if (documents, lexemes) != (counted_documents, counted_lexemes):
            problems.append(
                f"space: kept {documents} thoughts / {lexemes} lexemes, counted {counted_documents} / {counted_lexemes}"
            )
    return problems


def thought_lexemes(*, thought_id) -> list[str]:
    """The lexemes of a thought's text, as its search statistics count them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(search_vector) FROM brain_thought WHERE id = %s", [thought_id])
        row = cursor.fetchone()
    return list(row[0] or []) if row else []


def lexemes_fold(*, space_id: int, lexemes: list[str]) -> None:
    """Fold ``lexemes``' delta rows of a space into one each, now, in the caller's transaction: a lexeme
    whose rows sum to 0 (a text erased, and no other text holds the word) leaves no row."""
    if not lexemes:
        return
    with connection.cursor() as cursor:
        cursor.execute(_FOLD_LEXEMES_SQL, {"space": space_id, "lexemes": lexemes})


_FOLD_LEXEMES_SQL = """
WITH gone AS (
    DELETE FROM brain_lexemestats l WHERE l.space_id = %(space)s AND l.lexeme = ANY(%(lexemes)s::text[])
    RETURNING l.lexeme, l.documents
)
INSERT INTO brain_lexemestats (space_id, lexeme, documents)
SELECT %(space)s, lexeme, sum(documents) FROM gone GROUP BY lexeme HAVING sum(documents) <> 0
"""
