"""Does an HNSW scan find a freshly inserted row when the table has been updated many times?

Why brain/migrations/0005 set fillfactor 70 (0014 made it 50) and early autovacuum on brain_thought: every retrieval
updates the thoughts it returns, and a non-HOT update leaves a dead entry in the HNSW graph until
VACUUM. This script builds a scratch table of clustered 384-d vectors (one topic), updates every row
``--rounds`` times, then inserts a new vector and asks for its nearest neighbour ``--trials`` times,
for three tables: plain, fillfactor 70 (updates stay HOT), plain after VACUUM. It prints the misses.

    python -m benchmarks.hnsw_recall [--rows 1500] [--rounds 15] [--trials 40]

Uses the database ``colony_hnsw_recall`` on the embedded server (or DATABASE_URL's server); dropped
and created on each run.
"""

from __future__ import annotations

import argparse
import random
from urllib.parse import urlparse, urlunparse

import psycopg

from benchmarks.db import bench_url, drop_database, ensure_database

DATABASE = "colony_hnsw_recall"


def server_url(database: str) -> str:
    """The benchmark server's URL for ``database``."""
    return urlunparse(urlparse(bench_url())._replace(path=f"/{database}"))


def _vector(rng: random.Random, centre: list[float], spread: float) -> str:
    values = [x + rng.gauss(0, spread) for x in centre]
    norm = sum(x * x for x in values) ** 0.5
    return "[" + ",".join(f"{x / norm:.5f}" for x in values) + "]"


def measure(url: str, *, mode: str, rows: int, rounds: int, trials: int) -> tuple[int, int, int]:
    """Returns (misses, HOT updates, all updates) for mode plain | fillfactor70 | vacuum."""
    rng = random.Random(2)
    centre = [rng.gauss(0, 1) for _ in range(384)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS recall")
        storage = " WITH (fillfactor = 70)" if mode == "fillfactor70" else ""
        conn.execute(f"CREATE TABLE recall (id serial PRIMARY KEY, e vector(384), n int DEFAULT 0){storage}")
        conn.execute("ALTER TABLE recall SET (autovacuum_enabled = false)")
        conn.execute("CREATE INDEX ON recall USING hnsw (e vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
        for _ in range(rows):
            conn.execute("INSERT INTO recall (e) VALUES (%s)", [_vector(rng, centre, 0.6)])
        for _ in range(rounds):
            for low in range(0, rows, 10):  # small batches, like retrievals touching ~10 thoughts
                conn.execute("UPDATE recall SET n = n + 1 WHERE id > %s AND id <= %s", [low, low + 10])
        if mode == "vacuum":
            conn.execute("VACUUM recall")
        misses = 0
        for _ in range(trials):
            with conn.transaction(force_rollback=True):
                vector = _vector(rng, centre, 0.6)
                conn.execute("INSERT INTO recall (e) VALUES (%s)", [vector])
                conn.execute("SET LOCAL hnsw.ef_search = 100")
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                nearest = "SELECT e <=> %s FROM recall ORDER BY e <=> %s LIMIT 5"
                best = conn.execute(nearest, [vector, vector]).fetchone()
                misses += best is None or best[0] > 1e-4
        hot, updated = conn.execute(
            "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'recall'"
        ).fetchone()
    return misses, hot, updated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args(argv)
    url = server_url(DATABASE)
    ensure_database(url, fresh=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    print(f"{args.rows} clustered vectors, each updated {args.rounds} times; {args.trials} fresh inserts looked up")
    for mode in ("plain", "fillfactor70", "vacuum"):
        misses, hot, updated = measure(url, mode=mode, rows=args.rows, rounds=args.rounds, trials=args.trials)
        print(f"  {mode:13} missed {misses:3} of {args.trials}   (HOT updates {hot} of {updated} counted so far)")
    drop_database(url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
