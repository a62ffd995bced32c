"""What hybrid retrieval costs: ``python -m benchmarks.retrieval.cost`` (after ``make bench-retrieval``).

Over the spaces the last ``make bench-retrieval`` left in ``colony_retrieval_bench`` and their
questions, it times per question (p50/p95 in ms):

- ``fusion``: ``brain.ranking.rank`` over the fetched candidates (relevance fusion, multipliers,
  replacement rule): the Python part fusion adds;
- ``hybrid SQL``: the one statement of ``brain.selectors.search`` (dense + BM25 + corrections +
  replacements);
- ``dense SQL``: a dense-only statement of the same pool (HNSW ``ORDER BY embedding <=> q LIMIT``)
  with the same column list, for comparison.

The query vectors are embedded once beforehand: the model's time is not part of any figure.
"""

from __future__ import annotations

import copy
import sys
import time


def main() -> int:
    from benchmarks.retrieval.run import setup_database

    setup_database(fresh=False)
    from django.db import connection, transaction

    from benchmarks.retrieval.dataset import load
    from brain import embedding, ranking
    from brain.selectors import search
    from brain.services.transfer import vector_text
    from core.models import Space

    dataset = load()
    spaces = {s.slug: s for s in Space.objects.filter(slug__startswith="bench-")}
    questions = [q for q in dataset.questions if f"bench-{q.conversation}" in spaces]
    if not questions:
        print("No benchmark spaces found: run `make bench-retrieval` first.", file=sys.stderr)
        return 1
    vectors = embedding.embed_many([q.question for q in questions])
    fusion, hybrid, dense = [], [], []
    pool = max(search.MIN_POOL, 10 * search.POOL_FACTOR)
    columns = ", ".join(f"t.{f.column}" for f in search._COLUMNS)
    for question, vector in zip(questions, vectors, strict=True):
        space = spaces[f"bench-{question.conversation}"]
        started = time.perf_counter()
        candidates, _vector, _companion = search._fetch(
            space=space,
            vector=vector,
            query_text=question.question,
            pool=pool,
            filter_topic=None,
            filter_category=None,
            exclude_ids=[],
        )
        hybrid.append((time.perf_counter() - started) * 1000)
        fresh = copy.deepcopy(candidates)
        started = time.perf_counter()
        ranking.rank(fresh, limit=10)
        fusion.append((time.perf_counter() - started) * 1000)
        literal = vector_text(vector)
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SET LOCAL hnsw.ef_search = 60; SET LOCAL hnsw.iterative_scan = relaxed_order; "
                f"SELECT {columns}, 1 - (t.embedding <=> %(v)s::vector) FROM brain_thought t "
                "WHERE t.space_id = %(s)s AND t.embedding IS NOT NULL ORDER BY t.embedding <=> %(v)s::vector "
                "LIMIT %(p)s",
                {"v": literal, "s": space.pk, "p": pool},
            )
            while cursor.description is None and cursor.nextset():
                pass
            cursor.fetchall()
        dense.append((time.perf_counter() - started) * 1000)

    def pct(samples, share):
        ordered = sorted(samples)
        return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]

    print(f"{'part':12}  {'n':>4}  {'p50 ms':>7}  {'p95 ms':>7}")
    for label, samples in (("fusion", fusion), ("hybrid SQL", hybrid), ("dense SQL", dense)):
        print(f"{label:12}  {len(samples):>4}  {pct(samples, 0.5):>7.2f}  {pct(samples, 0.95):>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
