"""BM25's term statistics, kept by triggers (brain.models.LexemeStats / SpaceTextStats): exact after
every kind of write, in the writing transaction, and unchanged by compaction."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from brain import ranking
from brain.models import LexemeStats, SpaceTextStats, Thought
from brain.selectors import search
from brain.services.text_stats import text_stats_compact, text_stats_verify
from core.models import Space

pytestmark = pytest.mark.django_db


def _df(space, lexeme: str) -> int:
    return sum(LexemeStats.objects.filter(space=space, lexeme=lexeme).values_list("documents", flat=True))


def _documents(space) -> int:
    return sum(SpaceTextStats.objects.filter(space=space).values_list("documents", flat=True))


def _query_terms(cursor, *, space_id: int, query_text: str, ef_search: int) -> search.QueryTerms:
    """Statements 1 and 2 of a search as thought_search sends and reads them, without lexical
    candidates: the query's lexemes, their IDF and which ones the lexical side matches on."""
    params = search._terms_params(
        space_id=space_id, query_text=query_text, ef_search=ef_search, filtered=False, pending_text=None
    )
    params.update(pool=0, rescore=0)
    search._send_terms_and_lexical(cursor, params, "")
    return search._read_terms_and_lexical(cursor, params)[0]


def test_single_and_bulk_inserts_count_each_document_once(thought_factory, space):
    thought_factory("The webhook retries failed deliveries three times; webhook retries back off.")
    Thought.objects.bulk_create(
        [
            Thought(
                space=space,
                content=f"Webhook note {i} about the billing queue.",
                contributor_id="x",
                contributor_name="x",
            )
            for i in range(5)
        ]
    )
    assert _df(space, "webhook") == 6  # a document counts once, however often the word occurs in it
    assert _df(space, "bill") == 5 and _documents(space) == 6
    assert text_stats_verify(space.pk) == []


def test_content_update_and_delete_keep_them_exact(thought_factory, space):
    thought = thought_factory("The cache uses LRU eviction for sessions.")
    other = thought_factory("Sessions expire after ten minutes.")
    Thought.objects.filter(pk=thought.pk).update(content="The cache uses LFU eviction.")
    assert _df(space, "lru") == 0 and _df(space, "lfu") == 1 and _df(space, "session") == 1
    Thought.objects.filter(pk=thought.pk).update(access_count=5, pheromone_weight=2.0)  # no content change
    assert LexemeStats.objects.filter(space=space, lexeme="lfu").count() == 1  # nothing appended
    Thought.objects.filter(pk=other.pk).delete()
    assert _df(space, "session") == 0 and _documents(space) == 1
    assert text_stats_verify(space.pk) == []


def test_a_rolled_back_insert_leaves_no_statistics(thought_factory, space):
    with pytest.raises(RuntimeError), transaction.atomic():
        thought_factory("Rollback words: zebra quartz.")
        assert _df(space, "zebra") == 1  # the writing transaction sees its own statistics at once
        raise RuntimeError
    assert _df(space, "zebra") == 0 and text_stats_verify(space.pk) == []


def test_spaces_are_counted_apart(thought_factory, space):
    other = Space.objects.create(slug="other-stats", name="Other")
    thought_factory("Kafka partitions are rebalanced nightly.")
    thought_factory("Kafka lag alerts page the on-call.", in_space=other)
    thought_factory("Kafka topics are compacted.", in_space=other)
    assert (_df(space, "kafka"), _df(other, "kafka")) == (1, 2)
    assert text_stats_verify(space.pk) == [] and text_stats_verify(other.pk) == []


def test_compaction_folds_deltas_without_changing_a_statistic(thought_factory, space):
    for i in range(4):
        thought_factory(f"Deploy step {i} restarts the workers.")
    Thought.objects.filter(content__startswith="Deploy step 0").delete()
    assert LexemeStats.objects.filter(space=space, lexeme="worker").count() == 5  # 4 inserts + 1 delete
    before = (_df(space, "worker"), _documents(space))
    assert text_stats_compact() > 0
    assert LexemeStats.objects.filter(space=space, lexeme="worker").count() == 1
    assert SpaceTextStats.objects.filter(space=space).count() == 1
    assert (_df(space, "worker"), _documents(space)) == before == (3, 3)
    assert text_stats_verify(space.pk) == []


def test_compaction_folds_only_the_spaces_written_since_its_last_run(thought_factory, space):
    """The job runs every few seconds, so a run reads only what changed: a space nobody wrote to keeps
    its folded rows as they are (same ids), and a run with nothing to fold writes nothing."""
    quiet = Space.objects.create(slug="quiet-stats", name="Quiet")
    for i in range(3):
        thought_factory(f"Quiet note {i}: the archive is read-only.", in_space=quiet)
    text_stats_compact()
    folded = sorted(LexemeStats.objects.filter(space=quiet).values_list("id", flat=True))
    assert text_stats_compact() == 0  # nothing written since: nothing to fold

    for i in range(3):
        thought_factory(f"Busy note {i}: the archive sync retries.")
    assert LexemeStats.objects.filter(space=space, lexeme="archiv").count() == 3
    assert text_stats_compact() > 0
    assert LexemeStats.objects.filter(space=space, lexeme="archiv").count() == 1
    assert sorted(LexemeStats.objects.filter(space=quiet).values_list("id", flat=True)) == folded
    assert (_df(space, "archiv"), _df(quiet, "archiv")) == (3, 3)
    assert text_stats_verify(space.pk) == [] and text_stats_verify(quiet.pk) == []
    assert text_stats_compact() == 0


def test_compaction_is_scheduled_every_few_seconds_and_never_piles_up():
    """A search sums its lexemes' delta rows: folding them every ten minutes let a busy space's
    common lexemes reach thousands of rows. A run queued while the workers are down expires."""
    from config.celery import PERIODIC_JOBS

    entry = PERIODIC_JOBS["text-stats-compact"]
    assert entry["task"] == "brain.jobs.text_stats_compact"
    assert isinstance(entry["schedule"], float) and entry["schedule"] <= 30
    assert 0 < entry["options"]["expires"] <= 120


def test_the_search_reads_them(thought_factory, space):
    for i in range(3):
        thought_factory(f"Routine note {i}: the deploy pipeline restarts workers.")
    thought_factory("The pgbouncer pool size is twenty.")
    with connection.cursor() as cursor:
        terms = _query_terms(cursor, space_id=space.pk, query_text="deploy pgbouncer pool", ef_search=40)
    idf = dict(zip(terms.lexemes, terms.idf, strict=True))
    assert idf["pgbouncer"] > idf["deploy"] > 0  # rarer is worth more
    assert terms.avgdl > 0 and set(terms.match) == {"deploy", "pgbouncer", "pool"}


def test_every_candidates_bm25_is_the_exact_bm25_of_its_row(thought_factory, space):
    """Lexical and dense-only candidates alike carry BM25 with tf from the tsvector's positions (the
    final SELECT reuses the lexical side's value for its rows): checked against a recount in Python."""
    from tests.conftest import fake_vector

    for i in range(6):
        thought_factory(f"Routine note {i}: the deploy pipeline restarts workers after the deploy check.")
    thought_factory("Deploy deploy deploy: the pgbouncer pool size is twenty, the pool is shared.")
    thought_factory("Tomatoes need six hours of sun.")
    query = "deploy pgbouncer pool restarts"
    found = search.thought_search(space=space, vector=fake_vector(query), query_text=query, limit=20).fetched
    with connection.cursor() as cursor:
        terms = _query_terms(cursor, space_id=space.pk, query_text=query, ef_search=40)
        idf = dict(zip(terms.lexemes, terms.idf, strict=True))
        assert {c.via_fulltext for c in found} == {True, False}  # both kinds are checked
        for candidate in found:
            cursor.execute(
                "SELECT x.lexeme, COALESCE(array_length(x.positions, 1), 1), length(t.search_vector) "
                "FROM brain_thought t, unnest(t.search_vector) x WHERE t.id = %s",
                [candidate.thought.id],
            )
            rows = cursor.fetchall()
            k1, b, dl = ranking.BM25_K1, ranking.BM25_B, rows[0][2]
            expected = sum(
                idf[lexeme] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / terms.avgdl))
                for lexeme, tf, _ in rows
                if lexeme in idf
            )
            assert candidate.bm25 == pytest.approx(expected, rel=1e-9), candidate.thought.content


def _settings(cursor) -> list[str]:
    names = ["hnsw.ef_search", "hnsw.iterative_scan", "enable_seqscan", "join_collapse_limit"]
    cursor.execute("SELECT " + ", ".join(f"current_setting('{name}', true)" for name in names))
    return list(cursor.fetchone())


@pytest.mark.django_db(transaction=True)
def test_the_search_terms_statement_sets_the_scan_settings_for_its_transaction_only(thought_factory, space):
    """The search's first round trip also applies its scan settings (statement 1, sent with statement 2)."""
    thought_factory("The pgbouncer pool size is twenty.")
    with connection.cursor() as cursor:
        outside = _settings(cursor)
        with transaction.atomic():
            terms = _query_terms(cursor, space_id=space.pk, query_text="pgbouncer pool", ef_search=77)
            assert _settings(cursor) == ["77", "relaxed_order", "off", "1"]
        assert terms.lexemes == ["pgbouncer", "pool"]
        assert _settings(cursor) == outside != ["77", "relaxed_order", "off", "1"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_lose_no_count(space):
    """Eight threads insert into one space at once: the deltas are append-only, so nobody waits on a
    counter row and no increment is lost."""
    errors = []

    def insert(worker: int) -> None:
        try:
            for i in range(10):
                with transaction.atomic():
                    Thought.objects.create(
                        space=space,
                        content=f"Concurrent note {worker}-{i} about shared queues.",
                        contributor_id="x",
                        contributor_name="x",
                    )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=insert, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert _df(space, "queue") == 80 and _documents(space) == 80
    assert text_stats_verify(space.pk) == []
