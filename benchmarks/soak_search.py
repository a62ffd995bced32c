"""The search on a soak's leftover database: what a contribution's two search statements cost there.

    python -m benchmarks.soak_search --folder var/soak-s7a [--calls 50] [--fold]

Starts the PostgreSQL of a stopped soak's folder (``benchmarks/soak.py --folder``) on its own port,
embeds ``--calls`` soak-like notes (the soak's own wording, new numbers) and times, in this process,
the search's terms statement alone (``brain.selectors.search.query_terms``, in its transaction) and the
whole ``thought_search`` (terms + search statement + ranking) in the soak's larger space; prints p50
and mean. ``--fold`` first folds BM25's statistics deltas (``text_stats_compact``), as the periodic
job does, so a copy of the folder measured with and without it shows what unfolded deltas cost.
Loopback only; bounded calls.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from benchmarks.soak import BASE_DIR, TOPICS, django_setup, say, soak_note

PORT = 5446


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, help="a stopped soak's folder (its pg/ is used)")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--fold", action="store_true", help="fold the statistics deltas first")
    args = parser.parse_args(argv)
    from core.standalone import PgServer

    pgdir = Path(args.folder) / "pg"
    if not (pgdir / "pgdata" / "PG_VERSION").exists():
        raise SystemExit(f"{pgdir} holds no database: pass the --folder of a soak that has run")
    pg = PgServer(pgdir, PORT).start()
    try:
        django_setup(pg.url())
        from django.db import connection, transaction
        from django.db.models import Count

        from brain import embedding
        from brain.models import LexemeStats
        from brain.selectors import search
        from brain.services.text_stats import text_stats_compact
        from core.models import Space

        if args.fold:
            started = time.perf_counter()
            written = text_stats_compact()
            say(f"folded the statistics deltas in {time.perf_counter() - started:.2f} s ({written} rows written)")
        space = Space.objects.annotate(n=Count("thoughts")).order_by("-n").first()
        if space is None or space.n == 0:
            raise SystemExit("the database holds no thoughts")
        deepest = LexemeStats.objects.filter(space=space).values("lexeme").annotate(rows=Count("id")).order_by("-rows")
        rng = random.Random(5)
        notes = [soak_note(rng.randint(1, 99999), "dev-a", rng.choice(TOPICS), rng) for _ in range(args.calls + 10)]
        vectors = embedding.embed_many(notes)
        terms_ms, search_ms = [], []
        for i, (note, vector) in enumerate(zip(notes, vectors, strict=True)):
            with transaction.atomic(), connection.cursor() as cursor:
                started = time.perf_counter()
                search.query_terms(cursor, space_id=space.pk, query_text=note, ef_search=60)
                terms = time.perf_counter() - started
            started = time.perf_counter()
            search.thought_search(space=space, vector=vector, query_text=note, limit=10)
            whole = time.perf_counter() - started
            if i >= 10:  # the first calls warm the caches
                terms_ms.append(terms * 1000)
                search_ms.append(whole * 1000)
        top = deepest.first()
        deepest_rows = f"{top['rows']} ({top['lexeme']})"
        print(f"space {space.slug}: {space.n} thoughts; the most delta rows of a lexeme: {deepest_rows}")
        print(f"{'':22}{'p50 ms':>10}{'mean ms':>10}   ({args.calls} soak notes)")
        for label, values in (("terms statement", terms_ms), ("thought_search", search_ms)):
            print(f"{label:22}{statistics.median(values):10.2f}{statistics.mean(values):10.2f}")
        return 0
    finally:
        pg.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(BASE_DIR))
    sys.exit(main())
