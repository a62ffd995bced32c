"""Seed a space with realistic thoughts, with real embeddings, for benchmarks.

``seed_thoughts(space, n)`` tops the space up to ``n`` seeded thoughts (a second call with the same
``n`` adds nothing), embedding in batches with a progress bar. The texts are generated
deterministically from a few vocabularies, so two runs seed the same corpus.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from tqdm import tqdm

SEED_CONTRIBUTOR = "bench-seed"
COMPONENTS = [
    "the deploy pipeline",
    "the Celery worker",
    "the billing service",
    "the search index",
    "the auth gateway",
    "the nightly backup",
    "the web frontend",
    "the mobile app",
    "the data warehouse",
    "the CI runner",
    "the message broker",
    "the cache layer",
    "the reporting job",
    "the onboarding flow",
    "the API gateway",
    "the feature-flag service",
    "the email sender",
    "the payment webhook",
    "the audit log",
    "the load balancer",
]
ACTIONS = [
    "times out",
    "retries three times",
    "needs a restart",
    "drops messages",
    "runs out of memory",
    "slows down",
    "must be migrated first",
    "holds a lock",
    "loses its connection",
    "double-sends",
    "fails silently",
    "rejects the token",
    "logs too much",
    "skips a step",
    "blocks the release",
]
CONDITIONS = [
    "when traffic peaks on Mondays",
    "after a schema migration",
    "when Redis restarts",
    "during the nightly batch",
    "if the certificate expires",
    "when two agents write at once",
    "after a dependency upgrade",
    "when the disk is above 90%",
    "behind the corporate proxy",
    "on the first request after a deploy",
    "when the queue is longer than 10 000",
    "with more than 50 tenants",
    "if the clock drifts",
]
FIXES = [
    "raising the pool size fixed it",
    "we added a circuit breaker",
    "pinning the client version helped",
    "the fix is to drain the queue first",
    "a row lock in the service solved it",
    "we moved it to a Celery job",
    "an index on created_at cut it to 40 ms",
    "we now alert on it",
    "the runbook says to restart it by hand",
    "batching the writes solved it",
    "we cache the result for five minutes",
    "the timeout is now 30 s",
]
TOPICS = ["deploy", "billing", "search", "auth", "backup", "frontend", "data", "ci", "messaging", "ops"]
CATEGORIES = ["operational_learning", "decision_record", "task_outcome", "state_snapshot", "uncategorized"]


def seed_text(index: int) -> dict:
    rng = random.Random(index)
    component, action = rng.choice(COMPONENTS), rng.choice(ACTIONS)
    text = (
        f"{component[0].upper()}{component[1:]} {action} {rng.choice(CONDITIONS)}; {rng.choice(FIXES)} "
        f"(observation {index})."
    )
    return {
        "content": text,
        "topic": rng.choice(TOPICS),
        "thought_category": rng.choice(CATEGORIES),
        "tags": rng.sample(TOPICS, 2),
        "temporal_scope": date(2026, 1, 1) + timedelta(days=index % 120),
    }


def seed_thoughts(space, n: int, *, batch_size: int = 256) -> int:
    """Top ``space`` up to ``n`` seeded thoughts with real embeddings; returns how many were added."""
    from brain import embedding
    from brain.models import Thought

    existing = Thought.objects.filter(space=space, contributor_id=SEED_CONTRIBUTOR).count()
    if existing >= n:
        return 0
    label = embedding.current_model_label()
    added = 0
    with tqdm(total=n, initial=existing, unit="thought", desc="seeding") as bar:
        for start in range(existing, n, batch_size):
            rows = [seed_text(i) for i in range(start, min(n, start + batch_size))]
            vectors = embedding.embed_many([row["content"] for row in rows])
            Thought.objects.bulk_create(
                [
                    Thought(
                        space=space,
                        contributor_id=SEED_CONTRIBUTOR,
                        contributor_name="Benchmark seed",
                        embedding=vector,
                        embedding_model=label,
                        **row,
                    )
                    for row, vector in zip(rows, vectors, strict=True)
                ]
            )
            added += len(rows)
            bar.update(len(rows))
    return added
