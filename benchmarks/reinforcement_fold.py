"""What counting reinforcement costs per memory call, by how many calls one fold counts (issue 14: the
reinforcement after the answer). Prints, for each batch size, the fold statement's wall time and its
time per call counted, and the share of its row updates that stayed HOT (on their page: no index
entry, the HNSW graph's included):

    python -m benchmarks.reinforcement_fold [--database bench_colony] [--sizes 1,10,30,70] [--rounds 5]
                                            [--fillfactors 70,60,50]

A batch of 1 is what every call paid until the forty-fifth session (one reinforcement statement per
call after its answer, the same work for one call); larger batches are what a web process folds at
``REINFORCEMENT_FOLD_SECONDS`` (a second's calls of every process). It runs on a copy of the database
(``<database>_fold``, made from it as a template and dropped afterwards, so the database is left as it
was): the latest logged calls that returned something are marked uncounted and folded ``size`` at a
time, each fold committed as a web process commits it. The database must hold bench-compare's notes
and logged calls: run ``python -m benchmarks.compare --notes 10000 --skip-mem0`` first. Loopback only,
bounded rounds; figures from a loaded machine are noisy, compare sizes within one run.

``--fillfactors`` measures the same folds once per ``brain_thought`` fillfactor: before each, the copy's
table is rewritten at that setting (``ALTER TABLE ... SET (fillfactor)``, ``VACUUM FULL``), so every
setting starts from the same rows, freshly packed (brain/migrations/0014).
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.memory_profile import _setup

_MARK_SQL = """
UPDATE brain_querylog SET reinforced = false WHERE id IN (
    SELECT id FROM brain_querylog WHERE jsonb_typeof(results) = 'array' AND jsonb_array_length(results) > 0
    ORDER BY id DESC LIMIT %s)
"""


_UPDATES_SQL = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'brain_thought'::regclass"


def thought_updates() -> tuple[int, int]:
    """brain_thought's row updates so far, and how many of them were HOT (this process's included)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, at its next commit
    with connection.cursor() as cursor:
        cursor.execute(_UPDATES_SQL)
        return cursor.fetchone()


def measure(size: int, rounds: int) -> tuple[list[float], int]:
    """Wall ms of each of ``rounds`` folds of ``size`` logged calls (the latest ``size × rounds``
    marked uncounted first), and the thoughts they reinforced in all (one update per thought a fold)."""
    from django.db import connection

    from brain.services import pheromones

    with connection.cursor() as cursor:
        cursor.execute(_MARK_SQL, [size * rounds])
        marked = cursor.rowcount
    times, thoughts, counted = [], 0, 0
    for _ in range(rounds):
        started = time.perf_counter()
        fold = pheromones.reinforcement_fold(batch=max(size, 1))
        times.append((time.perf_counter() - started) * 1000)
        counted, thoughts = counted + fold.logs, thoughts + fold.thoughts
    if counted != marked:
        raise SystemExit(f"the folds counted {counted} of the {marked} calls marked: is another fold running?")
    return times, thoughts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="bench_colony")
    parser.add_argument("--sizes", default="1,10,30,70", help="calls counted by one fold, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--fillfactors", default="", help="brain_thought fillfactors to compare, comma-separated (default: as it is)"
    )
    args = parser.parse_args(argv)
    from benchmarks.compare import server_url
    from benchmarks.db import copy_database, drop_database

    copy = f"{args.database}_fold"
    drop_database(server_url(copy))
    copy_database(server_url(args.database), copy)
    try:
        return _run(args, copy)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(server_url(copy))


def _run(args, copy: str) -> int:
    _setup(copy)
    from brain.models import QueryLog

    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    logged = QueryLog.objects.exclude(results=[]).count()
    if logged < max(sizes) * args.rounds:
        raise SystemExit(
            f"{args.database} has {logged} logged calls with results; {max(sizes) * args.rounds} are needed "
            "(run bench-compare or memory_profile against it first, or pass smaller --sizes / --rounds)."
        )
    fillfactors = [int(part) for part in args.fillfactors.split(",") if part.strip()] or [None]
    if any(f is not None and not 10 <= f <= 100 for f in fillfactors):
        raise SystemExit(f"--fillfactors {args.fillfactors}: PostgreSQL takes a fillfactor from 10 to 100.")
    print(f"reinforcement fold in a copy of {args.database}: {args.rounds} folds per size, each committed")
    print("  fillfactor   calls  thoughts a fold   fold p50 ms   per call ms   HOT updates")
    for fillfactor in fillfactors:
        if fillfactor is not None:
            rewrite(fillfactor)
        for size in sizes:
            before = thought_updates()
            times, thoughts = measure(size, args.rounds)
            after = thought_updates()
            updates, hot = after[0] - before[0], after[1] - before[1]
            p50 = statistics.median(times)
            print(
                f"  {fillfactor or 'as is':>10}  {size:6d}  {thoughts / args.rounds:15.1f}   {p50:11.2f}   "
                f"{p50 / size:11.3f}   {100 * hot / max(updates, 1):10.1f}%",
                flush=True,
            )
    return 0


def rewrite(fillfactor: int) -> None:
    """The copy's brain_thought rewritten at ``fillfactor`` (its rows freshly packed, indexes rebuilt)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE brain_thought SET (fillfactor = {int(fillfactor)})")
        cursor.execute("VACUUM FULL brain_thought")
        cursor.execute("ANALYZE brain_thought")
        cursor.execute("SELECT pg_size_pretty(pg_relation_size('brain_thought'))")
        (size,) = cursor.fetchone()
    print(f"  brain_thought rewritten at fillfactor {fillfactor}: {size}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
