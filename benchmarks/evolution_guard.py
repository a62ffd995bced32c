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
import uuid
from pathlib import Path


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def run(*, corrections: int = 2000, thoughts: int = 20000, calls: int = 200, verbose: bool = False) -> list:
    """Returns [(label, samples in ms), ...] (the shape ``benchmarks.run`` tables); prints if verbose.

    Needs Django set up (``benchmarks.run`` does it for its database, :func:`main` for the configured one).
    """
    from benchmarks.stats import percentile, timed
    from brain.models import CorrectionSuggestion, Thought
    from brain.services import contradictions
    from brain.services.flags import correction_guard
    from core.models import Space

    rng = random.Random(7)
    space = Space.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="benchmark")
    rows: list = []
    try:
        thoughts_rows = [
            Thought(
                space=space,
                content=f"thought {i}",
                contributor_id="bench",
                contributor_name="bench",
                topic=f"topic-{i % 50}",
                embedding=unit(rng),
            )
            for i in range(thoughts)
        ]
        thoughts_rows += [
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
            for i in range(corrections)
        ]
        Thought.objects.bulk_create(thoughts_rows, batch_size=1000)
        if verbose:
            print(f"space {space.slug}: {thoughts} thoughts, {corrections} corrections")

        queries = [unit(rng) for _ in range(calls)]
        it = iter(queries * 2)
        guard = timed(lambda _i: correction_guard(space=space, vector=next(it)), calls)
        rows.append((f"correction_guard ({corrections} corrections)", guard))

        probe = thoughts_rows[0]
        candidates = timed(lambda _i: contradictions._candidates(probe), min(calls, 100))
        rows.append(
            (f"contradiction candidates (topic + {contradictions.NEIGHBOUR_CANDIDATES_LIMIT} HNSW)", candidates)
        )
        if verbose:
            for label, samples in rows:
                print(f"{label}: median {statistics.median(samples):.1f} ms, p95 {percentile(samples, 0.95):.1f} ms")
    finally:
        CorrectionSuggestion.objects.filter(space=space).delete()
        Thought.objects.filter(space=space).delete()
        space.delete()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corrections", type=int, default=2000)
    parser.add_argument("--thoughts", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    run(corrections=args.corrections, thoughts=args.thoughts, calls=args.calls, verbose=True)


if __name__ == "__main__":
    main()
