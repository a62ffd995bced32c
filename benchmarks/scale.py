"""``make bench-scale``: the memory endpoint at a million thoughts (issue 14 item 6; not in CI).

    python -m benchmarks.scale [--thoughts 1000000] [--real 2000] [--queries 200] [--reuse]

Builds the database ``bench_scale`` on the embedded PostgreSQL (or ``BENCH_DATABASE_URL``'s server):

1. ``--real`` thoughts get real all-MiniLM-L6-v2 vectors of the deterministic seed texts
   (``benchmarks.seed``); the rest are synthetic: a real vector plus Gaussian noise, normalised, so
   the index sees clusters like real data instead of uniform noise. 90% of the rows are in the
   benchmark's space, 10% in a second space, so every query runs with the space filter.
2. Rows are bulk-inserted with the HNSW index dropped, then ``CREATE INDEX`` rebuilds it (m=16,
   ef_construction=64, cosine, as the migration declares) with ``maintenance_work_mem`` =
   ``--build-memory``; the build time and the sizes of table and index are printed.
3. Times ``--queries`` retrieve-only memory calls (``contribute: false``; real prompts, so the
   embedding is included) through the whole DRF stack in-process, with HNSW iterative scan and the
   space filter as the endpoint runs them, and prints p50/p95/p99 and the process's peak RSS.

``--reuse`` skips the load when the database already holds the rows (rerun the queries only).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE = "bench_scale"
BATCH = 5000
NOISE = 0.35


def _url() -> str:
    if os.environ.get("BENCH_DATABASE_URL"):
        return urlunparse(urlparse(os.environ["BENCH_DATABASE_URL"])._replace(path=f"/{DATABASE}"))
    from core import embedded_db

    embedded_db.ensure_running()
    return embedded_db.url(DATABASE)


def setup(reuse: bool) -> None:
    import psycopg

    url = _url()
    admin = urlunparse(urlparse(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone()
        if exists and not reuse:
            conn.execute(f'DROP DATABASE "{DATABASE}" WITH (FORCE)')
            exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def load(*, thoughts: int, real: int, build_memory: str) -> None:
    import numpy as np
    from django.db import connection
    from tqdm import tqdm

    from benchmarks.seed import SEED_CONTRIBUTOR, seed_text
    from brain import embedding
    from brain.models import Thought
    from core.models import Space

    main = Space.objects.get(slug="default")
    other, _ = Space.objects.get_or_create(slug="scale-other", defaults={"name": "Other space"})
    have = Thought.objects.count()
    if have >= thoughts:
        print(f"{have} thoughts already loaded (--reuse).")
        return
    print(f"Embedding {real} seed texts (real vectors) ...", flush=True)
    base = np.array(embedding.embed_many([seed_text(i)["content"] for i in range(real)], batch_size=128))
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS thought_embedding_hnsw")
    rng = np.random.default_rng(7)
    label = embedding.current_model_label()
    started = time.perf_counter()
    with tqdm(total=thoughts, initial=have, unit="thought", desc="inserting") as bar:
        for start in range(have, thoughts, BATCH):
            stop = min(thoughts, start + BATCH)
            picks = np.arange(start, stop) % real
            vectors = base[picks] + rng.normal(0, NOISE / np.sqrt(384), (stop - start, 384))
            vectors[picks == np.arange(start, stop)] = base[picks[picks == np.arange(start, stop)]]
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            rows = []
            for offset, i in enumerate(range(start, stop)):
                fields = seed_text(i)
                rows.append(
                    Thought(
                        space=other if i % 10 == 9 else main,
                        contributor_id=SEED_CONTRIBUTOR,
                        contributor_name="Benchmark seed",
                        embedding=vectors[offset],
                        embedding_model=label,
                        **fields,
                    )
                )
            Thought.objects.bulk_create(rows)
            bar.update(stop - start)
    print(f"inserted in {time.perf_counter() - started:.0f} s; building the HNSW index ...", flush=True)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{build_memory}'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        cursor.execute(
            "CREATE INDEX thought_embedding_hnsw ON brain_thought USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )
        cursor.execute("ANALYZE brain_thought")
    print(f"HNSW index built in {time.perf_counter() - started:.0f} s (maintenance_work_mem {build_memory})")


def sizes() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_size_pretty(pg_table_size('brain_thought')), "
            "pg_size_pretty(pg_relation_size('thought_embedding_hnsw')), "
            "pg_size_pretty(pg_indexes_size('brain_thought')), current_setting('shared_buffers') FROM brain_thought"
        )
        count, table, hnsw, indexes, shared = cursor.fetchone()
    print(f"{count} thoughts: table {table}, HNSW index {hnsw}, all indexes {indexes}; shared_buffers {shared}")


def measure(queries: int) -> None:
    from rest_framework.test import APIClient

    from benchmarks import seed
    from core import services
    from core.models import Space

    agent, token = services.agent_create(
        name=f"scale-{int(time.time())}", role="dev", space=Space.objects.get(slug="default")
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    rng = random.Random(11)

    def ask(i: int) -> float:
        text = f"Why does {rng.choice(seed.COMPONENTS)} {rng.choice(seed.ACTIONS)} {rng.choice(seed.CONDITIONS)}? ({i})"
        started = time.perf_counter()
        response = client.get("/api/v1/memory", {"prompt": text, "contribute": "false"})
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.content[:300]
        return elapsed

    for i in range(5):
        ask(-i - 1)
    samples = sorted(ask(i) for i in range(queries))

    def pct(share: float) -> float:
        return samples[min(len(samples) - 1, round(share * (len(samples) - 1)))]

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"memory endpoint, retrieve-only, in-process: n={queries} p50 {pct(0.5):.1f} ms  p95 {pct(0.95):.1f} ms  "
        f"p99 {pct(0.99):.1f} ms; process peak RSS {rss:.0f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=1_000_000)
    parser.add_argument("--real", type=int, default=2000, help="thoughts with real vectors (the cluster centres)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--build-memory", default="2GB", help="maintenance_work_mem for the index build")
    parser.add_argument("--reuse", action="store_true", help="keep bench_scale's rows if it has enough")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(BASE_DIR))
    setup(args.reuse)
    load(thoughts=args.thoughts, real=min(args.real, args.thoughts), build_memory=args.build_memory)
    sizes()
    measure(args.queries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
