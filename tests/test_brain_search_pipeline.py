"""A memory call that searches before it writes anything (retrieve-only, or a plain contribution)
embeds its query while the database runs the search's terms and lexical side
(``brain.selectors.search._fetch``: statements 1 and 2 are sent in pipeline mode before the model
runs, their row read after)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from django.db import connection

from brain import embedding
from brain.models import QueryLog
from brain.selectors import search
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db

QUERY = "which pgbouncer pool size do the celery workers use"


@pytest.fixture
def brain(thought_factory, space):
    for i in range(30):
        thought_factory(f"Note {i}: the pgbouncer pool for celery workers is {10 + i}; deploy {i % 4} checked it.")
    return space


def _backend_query(pid: int) -> str:
    """What PostgreSQL says the backend ``pid`` runs or last ran, asked over another connection."""
    params = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k not in ("cursor_factory", "context")}) as other:
        return other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def test_the_query_is_embedded_while_the_lexical_statement_is_already_sent(dev, brain, monkeypatch):
    seen = []

    def embed_many(texts, *, batch_size=64):
        pid = connection.connection.info.backend_pid
        seen.append((connection.connection.pgconn.pipeline_status, _backend_query(pid)))
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", embed_many)
    response = dev.get("/api/v1/memory", {"prompt": QUERY, "contribute": "false"})
    assert response.status_code == 200, response.content
    assert response.json()["result"]["sources"]
    ((status, running),) = seen
    assert status == psycopg.pq.PipelineStatus.ON
    assert running.lstrip().startswith("WITH q AS"), running  # statement 2: terms and the lexical side


def _refines(original) -> dict:
    return {"refines": str(original.id)}


def _corrects(original) -> dict:
    return {
        "thought_category": "correction",
        "topic": "pgbouncer",
        "corrected_fact": "the pool is 20",
        "correct_fact": "the pool is 25",
        "supersedes": [str(original.id)],
    }


@pytest.mark.parametrize(
    "extra, pipelined",
    [
        (lambda original: {}, True),  # a plain contribution searches first, like a retrieve-only call
        (_refines, False),  # its search must see the write: the vector is needed before it
        (_corrects, False),
    ],
)
def test_a_contribution_embeds_during_its_search_unless_its_write_moves_the_search(
    dev, brain, thought_factory, monkeypatch, extra, pipelined
):
    original = thought_factory("The celery workers use a pgbouncer pool of 20 connections.")
    statuses = []

    def embed_many(texts, *, batch_size=64):
        statuses.append(connection.connection.pgconn.pipeline_status)
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", embed_many)
    body = {"prompt": "The celery workers use a pgbouncer pool of 25 connections since the last deploy."}
    body.update(extra(original))
    response = dev.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["trace"]["thought_id"]
    expected = psycopg.pq.PipelineStatus.ON if pipelined else psycopg.pq.PipelineStatus.OFF
    assert set(statuses) == {expected}  # (a correction also embeds its corrected fact, before storing)


def _counted_embedding(calls: list) -> Callable[[], list[float]]:
    def vector():
        calls.append(QUERY)
        return fake_vector(QUERY)

    return vector


def test_pipelined_and_sequential_searches_find_the_same(brain, monkeypatch):
    def ranked(vector):
        result = search.thought_search(space=brain, vector=vector, query_text=QUERY, limit=10)
        return [(c.id, round(c.score, 6), c.dense_rank, c.lexical_rank) for c in result.candidates]

    calls: list = []
    pipelined = ranked(_counted_embedding(calls))
    assert calls == [QUERY]  # computed once, by the search
    given = ranked(fake_vector(QUERY))
    monkeypatch.setattr(search, "PIPELINE", False)
    sequential = ranked(_counted_embedding(calls))
    assert calls == [QUERY, QUERY]
    assert pipelined == given == sequential
    assert any(lexical for *_, lexical in pipelined) and any(dense for *_, dense, _ in pipelined)


def test_an_embedding_failure_during_the_lexical_statement_is_500_and_logs_nothing(dev, brain, monkeypatch):
    def broken(texts, *, batch_size=64):
        raise embedding.EmbeddingError("model file missing")

    monkeypatch.setattr(embedding, "embed_many", broken)
    response = dev.get("/api/v1/memory", {"prompt": QUERY, "contribute": "false"})
    assert response.status_code == 500 and response.json()["error"]["code"] == "EMBEDDING_FAILED"
    assert QueryLog.objects.count() == 0
    assert connection.connection.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    monkeypatch.setattr(embedding, "embed_many", lambda texts, *, batch_size=64: [fake_vector(t) for t in texts])
    again = dev.get("/api/v1/memory", {"prompt": QUERY, "contribute": "false"})  # the connection still works
    assert again.status_code == 200 and again.json()["result"]["sources"]
    assert QueryLog.objects.count() == 1


def test_a_relaxed_second_round_reuses_the_vector_the_first_computed(brain):
    calls: list = []
    result = search.thought_search(
        space=brain, vector=_counted_embedding(calls), query_text=QUERY, limit=10, filter_category="decision"
    )
    assert result.relaxed and result.candidates  # no decision in the brain: the filter was dropped
    assert calls == [QUERY]


def test_the_search_reads_its_rows_in_binary_and_builds_the_same_thoughts_as_the_orm(
    space, thought_factory, monkeypatch
):
    """The candidates' statement is read in binary (timestamps, UUIDs, arrays and floats load in C):
    every column of every candidate must equal what the ORM reads in text, jsonb included."""
    import datetime as dt

    from brain.models import Thought
    from core import db

    thought_factory(
        "The pgbouncer pool for the celery workers is 40 since the March deploy.",
        tags=["pgbouncer", "celery"],
        topic="pool-size",
        source_ref={"pr": 118, "files": ["deploy/pgbouncer.ini"], "note": "réglage"},
        temporal_scope=dt.date(2026, 3, 14),
    )
    thought_factory("Celery workers restart nightly; the pool size stays at 40.", tags=["celery"])
    formats = []
    execute = db._PreparedCursor.execute

    def recording(self, query, params=None, *, prepare=None, binary=None):
        # In pipeline mode the result arrives later: the format asked for is what is recorded.
        formats.append((query.lstrip()[:14], bool(self.binary_results if binary is None else binary)))
        return execute(self, query, params, prepare=prepare, binary=binary)

    monkeypatch.setattr(db._PreparedCursor, "execute", recording)
    found = search.thought_search(space=space, vector=fake_vector(QUERY), query_text=QUERY, limit=10)
    assert ("WITH RECURSIVE", True) in formats  # the candidates' statement: binary
    assert all(not binary for start, binary in formats if start != "WITH RECURSIVE")  # the others: text
    assert len(found.candidates) == 2
    columns = [f.attname for f in search._COLUMNS]
    for candidate in found.candidates:
        stored = Thought.objects.get(pk=candidate.thought.id)
        for name in columns:
            assert getattr(candidate.thought, name) == getattr(stored, name), name
    first = next(c for c in found.candidates if c.thought.topic == "pool-size")
    assert first.thought.source_ref == {"pr": 118, "files": ["deploy/pgbouncer.ini"], "note": "réglage"}
    assert first.thought.created_at.utcoffset() == dt.timedelta(0)


def test_ef_search_is_the_pool_within_pgvectors_default_and_maximum():
    assert search.ef_search_for(1) == search.EF_SEARCH_MIN == 40
    assert search.ef_search_for(30 * 3) == 90 * search.EF_SEARCH_FACTOR
    assert search.ef_search_for(5000) == search.EF_SEARCH_MAX == 1000


def test_a_nearest_scan_asking_for_more_than_pgvectors_maximum_still_runs(brain):
    """thought_nearest takes its ef_search from the same rule as the search's dense side, cap included
    (pgvector refuses hnsw.ef_search above 1000)."""
    found = search.thought_nearest(space=brain, vector=fake_vector(QUERY), limit=1500)
    assert len(found) == 30


def test_the_search_statement_binds_its_arrays_in_binary(brain, parameter_formats):
    """The query's lexemes and IDF and the lexical side's ids and BM25 go back to the server as binary
    arrays: psycopg dumps a list as text element by element (a regular expression per string to decide
    its quoting, each float printed), ~0.1 ms of CPU a call for the ~70 values of a 10k space."""
    found = search.thought_search(space=brain, vector=fake_vector(QUERY), query_text=QUERY, limit=10)
    assert found.candidates
    statement = [params for start, params in parameter_formats if start == "WITH RECURSIVE idf"]
    assert len(statement) == 1
    arrays = [param for param in statement[0] if param[0].endswith("[]")]
    assert sorted(arrays) == [("float8[]", "BINARY")] * 2 + [("text[]", "BINARY"), ("uuid[]", "BINARY")]
    parameter_formats.clear()  # a search that leaves out a thought (a contribution's own): its ids too
    search.thought_search(
        space=brain, vector=fake_vector(QUERY), query_text=QUERY, limit=10, exclude_ids=[found.candidates[0].id]
    )
    arrays = {
        start: sorted(param for param in params if param[0].endswith("[]"))
        for start, params in parameter_formats
        if start in ("WITH q AS", "WITH RECURSIVE idf")
    }
    assert arrays == {
        "WITH q AS": [("text[]", "BINARY")],  # statement 2 leaves the thought out of the lexical side
        "WITH RECURSIVE idf": [("float8[]", "BINARY")] * 2 + [("text[]", "BINARY")] * 2 + [("uuid[]", "BINARY")],
    }
