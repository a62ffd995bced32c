"""Bulk import rate through ``POST /api/v1/thoughts/import`` (speed target: >= 300 notes/s; Mem0 45/s).

    python -m benchmarks.import_rate [--notes 5000] [--batch 1000]              # in-process API, colony_bench
    python -m benchmarks.import_rate --url http://127.0.0.1:8000 --token col_... # a live server over HTTP

In-process it creates a throw-away space and agent in the ``colony_bench`` database, posts the
notes through the whole DRF stack (parsing, validation, batched embedding, bulk insert into the
HNSW-indexed table) and deletes the space afterwards. An agent's notes are always embedded by the
server (a vector an item carries is not kept), so the rate includes the model.
"""

from __future__ import annotations

import argparse
import json
import random
import time

TOPICS = ["deploy", "billing", "search", "auth", "workers", "ui", "storage", "queue", "alerts", "backups"]


def notes(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        out.append(
            {
                "content": f"Note {i} on {topic}: the {topic} service {rng.randint(1, 99)} needs "
                f"{rng.choice(['a restart', 'a migration', 'more memory', 'a new index', 'a retry'])} "
                f"when {rng.choice(['traffic spikes', 'the cache is cold', 'a worker dies', 'the disk fills'])}.",
                "topic": topic,
                "tags": [topic],
            }
        )
    return out


def _run_http(url: str, token: str, items: list[dict], batch: int) -> float:
    import httpx

    started = time.perf_counter()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as client:
        for start in range(0, len(items), batch):
            response = client.post("/api/v1/thoughts/import", json=items[start : start + batch])
            response.raise_for_status()
    return time.perf_counter() - started


def _run_in_process(items: list[dict], batch: int) -> float:
    from django.test import Client

    from benchmarks.setup import agent_client
    from brain import embedding
    from core.models import Space

    space = Space.objects.create(slug=f"bench-import-{time.time_ns()}", name="import benchmark")
    try:
        _, token, _ = agent_client(space=space, name="importer")
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        embedding.embed("warm up the model")
        bodies = [json.dumps(items[s : s + batch]) for s in range(0, len(items), batch)]
        started = time.perf_counter()
        for body in bodies:
            response = client.post("/api/v1/thoughts/import", data=body, content_type="application/json")
            assert response.status_code == 201, response.content[:500]
        return time.perf_counter() - started
    finally:
        from brain.models import Thought

        Thought.objects.filter(space=space).delete()
        space.agents.all().delete()
        space.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--url", help="a live Colony (else in-process against colony_bench)")
    parser.add_argument("--token", help="an agent token of that Colony")
    args = parser.parse_args()
    items = notes(args.notes)
    if args.url:
        seconds = _run_http(args.url, args.token, items, args.batch)
        print(
            f"HTTP import {args.notes} notes in batches of {args.batch}: {seconds:.2f} s = "
            f"{args.notes / seconds:.0f} notes/s"
        )
        return
    from benchmarks.setup import use_bench_database

    use_bench_database()
    from brain.embedding import current_model_label

    print(f"import through the API in-process (colony_bench), model {current_model_label()}")
    seconds = _run_in_process(items, args.batch)
    print(
        f"  {args.notes} notes, batches of {args.batch}: {seconds:.2f} s = "
        f"{args.notes / seconds:.0f} notes/s  (target >= 300; Mem0 add(infer=False) 45)"
    )


if __name__ == "__main__":
    main()
