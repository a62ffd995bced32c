"""The scale benchmark's fast loader (benchmarks/scale.py): binary COPY with the secondary indexes
dropped keeps BM25's statistics exact, stores the vectors as given and rebuilds every index as it was."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from benchmarks import scale
from brain.models import EMBEDDING_DIMENSIONS, LexemeStats, Thought
from brain.services.text_stats import text_stats_compact, text_stats_verify

INDEXES_SQL = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'brain_thought' ORDER BY indexname"


@pytest.mark.django_db
def test_copy_load_keeps_text_stats_exact_and_rebuilds_the_indexes(space, other_space):
    vectors = np.random.default_rng(1).normal(size=(300, EMBEDDING_DIMENSIONS))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        cursor.execute(INDEXES_SQL)
        before = cursor.fetchall()
        dropped = scale.secondary_indexes_drop(cursor)
        cursor.execute(INDEXES_SQL)
        assert [name for name, _ in cursor.fetchall()] == ["brain_thought_pkey"]
        for start, stop in ((0, 180), (180, 300)):  # two COPY statements, two trigger firings
            scale.copy_rows(
                cursor, start, stop, spaces=(space.pk, other_space.pk), vectors=vectors[start:stop], label="test"
            )
        # The loader commits each COPY; in the test's transaction the deferred foreign-key checks
        # must run before CREATE INDEX may touch the table.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        built = scale.secondary_indexes_build(cursor, build_memory="64MB")
        cursor.execute(INDEXES_SQL)
        assert cursor.fetchall() == before
    assert sorted(name for name, _, _ in built) == sorted(name for name, _ in dropped)
    assert built[-1][0] == "thought_embedding_hnsw"  # the HNSW build comes last
    assert Thought.objects.filter(space=space).count() == 270
    assert Thought.objects.filter(space=other_space).count() == 30

    assert text_stats_verify(space.pk) == [] and text_stats_verify(other_space.pk) == []
    text_stats_compact()
    assert text_stats_verify(space.pk) == [] and text_stats_verify(other_space.pk) == []
    assert LexemeStats.objects.filter(space=space, lexeme="observ").get().documents == 270

    first = Thought.objects.get(pk=scale.thought_id(0))
    assert first.content == scale.scale_text(0)["content"]
    assert np.allclose(first.embedding, vectors[0], atol=1e-6)
