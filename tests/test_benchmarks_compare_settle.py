"""bench-compare settles both databases before anything is timed (``benchmarks.compare.settle``): a table
loaded moments ago is vacuumed and analyzed, as autovacuum would have left it in a running deployment
(docs/performance.md, twenty-eighth session: without it Mem0's fresh-run search was ~7 ms slower)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from psycopg.conninfo import make_conninfo

from benchmarks.compare import settle

SCRATCH = "bench_settle_probe"
STATE = """SELECT c.reltuples, c.relallvisible, (SELECT count(*) FROM pg_stats s WHERE s.tablename = c.relname)
           FROM pg_class c WHERE c.relname = 'settle_probe'"""


def conninfo(dbname: str) -> str:
    """The test server's address with another database: settle() vacuums a whole database, so it gets a
    scratch one of its own (the test database's open transactions would make it wait)."""
    s = connection.settings_dict
    return make_conninfo(
        dbname=dbname,
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        host=s["HOST"] or None,
        port=str(s["PORT"]) if s["PORT"] else None,
    )


@pytest.fixture
def scratch_database():
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {SCRATCH}")
        try:
            yield conninfo(SCRATCH)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH} WITH (FORCE)")


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
