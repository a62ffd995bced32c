"""Every benchmark makes its database through ``runtime.databases.ensure_database`` and drops it through
``runtime.databases.drop_database`` (bench, bench-compare, bench-retrieval, bench-scale):
a reused database keeps its data, a fresh one starts empty even while something is connected to it."""

from __future__ import annotations

import psycopg
import pytest

from benchmarks.setup import bench_url, server_url
from runtime.databases import drop_database, ensure_database

SCRATCH = "bench_db_probe"


def _exists(name: str) -> bool:
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def _tables(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1").fetchall()
    return [name for (name,) in rows]


@pytest.fixture
def scratch_url():
    url = server_url(SCRATCH)
    drop_database(url)
    try:
        yield url
    finally:
        drop_database(url)


def test_a_reused_database_keeps_its_data_and_a_fresh_one_starts_empty(scratch_url):
    assert not _exists(SCRATCH)
    ensure_database(scratch_url)
    assert _exists(SCRATCH)
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE probe (id int)")

    ensure_database(scratch_url)  # reuse: nothing dropped
    assert _tables(scratch_url) == ["probe"]

    with psycopg.connect(scratch_url, autocommit=True) as held:  # a benchmark's server still connected
        ensure_database(scratch_url, fresh=True)
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
    assert _exists(SCRATCH)
    assert _tables(scratch_url) == []


def test_dropping_closes_connections_and_a_missing_database_is_no_error(scratch_url):
    ensure_database(scratch_url)
    with psycopg.connect(scratch_url, autocommit=True) as held:
        drop_database(scratch_url)
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
    assert not _exists(SCRATCH)
    drop_database(scratch_url)  # already gone
    assert not _exists(SCRATCH)


def test_the_benchmark_url_comes_from_its_variable_then_database_url_then_the_embedded_server(monkeypatch):
    monkeypatch.setenv("BENCH_PROBE_URL", "postgresql://u:p@db.example:5433/given")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:p@prod.example:5432/colony")
    assert bench_url("probe", env="BENCH_PROBE_URL") == "postgresql://u:p@db.example:5433/given"

    monkeypatch.delenv("BENCH_PROBE_URL")
    assert bench_url("probe", env="BENCH_PROBE_URL") == "postgresql://u:p@prod.example:5432/probe"

    monkeypatch.delenv("DATABASE_URL")
    from runtime import embedded_db

    assert bench_url("probe", env="BENCH_PROBE_URL") == embedded_db.url("probe")
