"""bench-compare settles both databases before anything is timed (``benchmarks.compare.settle``): a table
loaded moments ago is vacuumed and analyzed, as autovacuum would have left it in a running deployment
(without it, autovacuum runs during Mem0's timed searches of a fresh run and slows them by several ms)."""

from __future__ import annotations

import psycopg
import pytest

from benchmarks.compare import settle
from benchmarks.setup import recreate_database
from runtime.databases import drop_database

SCRATCH = "bench_settle_probe"
STATE = """SELECT c.reltuples, c.relallvisible, (SELECT count(*) FROM pg_stats s WHERE s.tablename = c.relname)
           FROM pg_class c WHERE c.relname = 'settle_probe'"""


@pytest.fixture
def scratch_database():
    """A database of its own on the benchmark's server (bench-compare's own helper makes it): settle()
    vacuums a whole database, and the test database's open transactions would make it wait."""
    url = recreate_database(SCRATCH)
    try:
        yield url
    finally:
        drop_database(url)


def test_a_table_loaded_moments_ago_is_vacuumed_and_analyzed(scratch_database):
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE settle_probe (id int, note text) WITH (autovacuum_enabled = off)")
        conn.execute("INSERT INTO settle_probe SELECT i, 'note ' || i FROM generate_series(1, 2000) i")
        # Never vacuumed nor analyzed: no row estimate, no page marked all-visible, no column statistics.
        assert conn.execute(STATE).fetchone() == (-1, 0, 0)

        seconds = settle([scratch_database])

        rows, all_visible, column_stats = conn.execute(STATE).fetchone()
        assert rows == 2000  # counted by VACUUM and ANALYZE
        assert all_visible > 0  # VACUUM marked the pages all-visible; ANALYZE alone does not
        assert column_stats == 2  # ANALYZE's statistics for both columns
        assert seconds >= 0
