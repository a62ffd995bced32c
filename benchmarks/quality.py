"""Benchmark of the quality loop's database paths: logging turns, scoring them, the daily rollup.

    .venv/bin/python -m benchmarks.quality [--turns 1000] [--items 10] [--scored 200]

Runs against the configured database (the embedded one by default) in a throw-away space that is
removed afterwards. Prints figures; asserts nothing. The judge is a trivial in-process one, so the
scoring figure is Colony's own cost per turn (locks, EMA updates, suggestions), not a model's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid


class _Verdict:
    def __init__(self, verdict: bool):
        self.verdict, self.confidence, self.reason = verdict, 0.9, "benchmark"


class CoinJudge:
    """Deterministic pseudo-random verdicts: 70% on topic, 40% used, 5% contradicted."""

    name = "benchmark"

    def __init__(self, seed: int = 7):
        self.random = random.Random(seed)

    def on_topic(self, prompt, item):
        return _Verdict(self.random.random() < 0.7)

    def used(self, response, item):
        return _Verdict(self.random.random() < 0.4)

    def contradicts(self, a, b):
        return _Verdict(self.random.random() < 0.05)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--items", type=int, default=10, help="injected items per turn")
    parser.add_argument("--scored", type=int, default=200, help="turns scored through turn_score")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    run(turns=args.turns, items=args.items, scored=args.scored, verbose=True)


def run(*, turns: int = 1000, items: int = 10, scored: int = 200, verbose: bool = False) -> list:
    """Returns [(label, samples in ms), ...] (the shape ``benchmarks.run`` tables); prints if verbose."""
    from types import SimpleNamespace

    args = SimpleNamespace(turns=turns, items=items, scored=scored)
    say = print if verbose else (lambda *a, **k: None)
    samples: list = []
    from django.db import transaction
    from django.test.utils import override_settings
    from django.utils import timezone

    from benchmarks.setup import agent_client
    from benchmarks.stats import percentile
    from brain.models import CorrectionSuggestion, QueryLog, Thought
    from core.models import Agent, Space
    from quality import jobs
    from quality.models import ConfidenceChange, QualityRollup, TurnItem, TurnLog
    from quality.selectors import quality_metrics
    from quality.services.rollups import quality_rollup_day
    from quality.services.scoring import turn_score

    space = Space.objects.create(slug=f"bench-quality-{uuid.uuid4().hex[:8]}", name="quality benchmark")
    agent, _, client = agent_client(space=space, name="bench")
    rng = random.Random(1)
    try:
        thoughts = Thought.objects.bulk_create(
            [
                Thought(
                    space=space,
                    content=f"Benchmark fact {n}: " + "the CI pipeline caches the virtualenv between runs. " * 3,
                    contributor_id="bench",
                    contributor_name="bench",
                    embedding=[rng.random() for _ in range(384)],
                )
                for n in range(200)
            ]
        )
        sessions = [f"bench-{n}" for n in range(args.turns)]
        QueryLog.objects.bulk_create(
            [
                QueryLog(
                    space=space,
                    agent=agent,
                    agent_ref="bench",
                    session_id=session,
                    query_text="benchmark",
                    results=[
                        {"id": str(t.id), "score": round(rng.random(), 3)} for t in rng.sample(thoughts, args.items)
                    ],
                )
                for session in sessions
            ]
        )
        jobs.score_turn.delay = lambda turn_log_id: None  # measure the request path alone
        latencies = []
        body = {
            "turn_id": "1",
            "user_prompt": "Why is the CI job slow? " * 20,
            "assistant_response": "The virtualenv cache was cold; I warmed it and reran the job. " * 30,
            "tool_calls": [{"name": "Bash", "input": {"command": "make test"}}] * 5,
        }
        started = time.perf_counter()
        for session in sessions:
            t0 = time.perf_counter()
            response = client.post("/api/v1/turns", {**body, "session_id": session}, format="json")
            latencies.append((time.perf_counter() - t0) * 1000)
            if response.status_code != 202:
                raise SystemExit(f"POST /api/v1/turns answered {response.status_code}: {response.content[:300]}")
        total = time.perf_counter() - started
        samples.append(("POST /api/v1/turns", latencies))
        items = TurnItem.objects.filter(turn__space=space).count()
        say(f"POST /api/v1/turns: {args.turns} turns, {items} items in {total:.1f}s ({args.turns / total:.0f}/s)")
        say(
            f"  latency ms: p50 {percentile(latencies, 0.5):.1f}  p95 {percentile(latencies, 0.95):.1f}  "
            f"max {max(latencies):.1f}  mean {statistics.mean(latencies):.1f}"
        )

        judge = CoinJudge()
        turn_ids = list(TurnLog.objects.filter(space=space).values_list("pk", flat=True))
        to_score = turn_ids[: args.scored]
        score_ms = []
        with override_settings(QUALITY_JUDGE="benchmark"):
            t0 = time.perf_counter()
            for turn_id in to_score:
                t1 = time.perf_counter()
                turn_score(turn_log_id=str(turn_id), judge=judge)
                score_ms.append((time.perf_counter() - t1) * 1000)
            elapsed = time.perf_counter() - t0
        samples.append((f"turn_score ({args.items} items, trivial judge)", score_ms))
        say(
            f"turn_score: {len(to_score)} turns x {args.items} items in {elapsed:.1f}s "
            f"({elapsed / max(1, len(to_score)) * 1000:.1f} ms/turn, trivial judge)"
        )

        # The other turns: outcomes written directly, so the rollup sees every item scored.
        with transaction.atomic():
            rest = TurnItem.objects.filter(turn_id__in=turn_ids[args.scored :])
            rest.update(on_topic=True, used=False, contradicted=False, verdict_source="judge")
            TurnLog.objects.filter(pk__in=turn_ids[args.scored :]).update(status="scored", scored_at=timezone.now())
        t0 = time.perf_counter()
        rows = quality_rollup_day(day=timezone.now().date())
        elapsed = time.perf_counter() - t0
        samples.append((f"rollup of one day ({items} items)", [elapsed * 1000]))
        say(f"rollup of one day ({items} items; every space recomputed): {elapsed * 1000:.0f} ms, {rows} rows")
        t0 = time.perf_counter()
        quality_metrics(space=space, days=90)
        metrics_ms = (time.perf_counter() - t0) * 1000
        samples.append(("metrics selector (90 days)", [metrics_ms]))
        say(f"metrics selector, 90 days of history: {metrics_ms:.1f} ms")
    finally:
        turn_ids = TurnLog.objects.filter(space=space).values_list("pk", flat=True)
        ConfidenceChange.objects.filter(space=space).delete()
        TurnItem.objects.filter(turn_id__in=turn_ids).delete()
        TurnLog.objects.filter(space=space).delete()
        QualityRollup.objects.filter(space=space).delete()
        CorrectionSuggestion.objects.filter(space=space).delete()
        QueryLog.objects.filter(space=space).delete()
        Thought.objects.filter(space=space).delete()
        Agent.objects.filter(space=space).delete()
        space.delete()
        quality_rollup_day(day=timezone.now().date())  # today's rows without the benchmark space
    return samples


if __name__ == "__main__":
    main()
