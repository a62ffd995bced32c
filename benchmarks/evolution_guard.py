"""Latency of the request-path pieces of knowledge evolution, on the configured database.

    .venv/bin/python benchmarks/evolution_guard.py [--corrections 2000] [--thoughts 20000] [--calls 200]

Creates a throw-away space with N corrections (random corrected-fact vectors) and M thoughts,
then prints the median and p95 of ``correction_guard`` (on the request path of every contribution)
and of the candidate query of the contradiction job. Deletes the space's rows at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from brain.models import CorrectionSuggestion, Thought  # noqa: E402
from brain.services import contradictions  # noqa: E402
from brain.services.corrections import correction_guard  # noqa: E402
from core.models import Space  # noqa: E402


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def timed(fn, calls: int) -> tuple[float, float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corrections", type=int, default=2000)
    parser.add_argument("--thoughts", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(7)
    space = Space.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="benchmark")
    try:
        rows = [
            Thought(
                space=space,
                content=f"thought {i}",
                contributor_id="bench",
                contributor_name="bench",
                topic=f"topic-{i % 50}",
                embedding=unit(rng),
            )
            for i in range(args.thoughts)
        ]
        rows += [
            Thought(
                space=space,
                content=f"correction {i}",
                contributor_id="bench",
                contributor_name="bench",
                thought_category="correction",
                topic=f"topic-{i % 50}",
                corrected_fact=f"wrong {i}",
                correct_fact=f"right {i}",
                embedding=unit(rng),
                corrected_fact_embedding=unit(rng),
            )
            for i in range(args.corrections)
        ]
        Thought.objects.bulk_create(rows, batch_size=1000)
        print(f"space {space.slug}: {args.thoughts} thoughts, {args.corrections} corrections")

        queries = [unit(rng) for _ in range(args.calls)]
        it = iter(queries * 2)
        median, p95 = timed(lambda: correction_guard(space=space, vector=next(it)), args.calls)
        print(f"correction_guard: median {median:.1f} ms, p95 {p95:.1f} ms")

        probe = rows[0]
        median, p95 = timed(lambda: contradictions._candidates(probe), min(args.calls, 100))
        print(
            f"contradiction candidates (topic + {contradictions.NEIGHBOUR_CANDIDATES_LIMIT} HNSW neighbours): "
            f"median {median:.1f} ms, p95 {p95:.1f} ms"
        )
    finally:
        CorrectionSuggestion.objects.filter(space=space).delete()
        Thought.objects.filter(space=space).delete()
        space.delete()


if __name__ == "__main__":
    main()
