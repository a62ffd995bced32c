"""Brain benchmark: p50/p95 of the memory endpoint (retrieve-only, contribute+retrieve) and of the
lineage endpoint, through the whole DRF stack (token auth, validation, real embedding, PostgreSQL)."""

from __future__ import annotations

import random
import time

from benchmarks.seed import ACTIONS, COMPONENTS, CONDITIONS, FIXES, seed_thoughts
from benchmarks.setup import agent_client, bench_space
from benchmarks.stats import timed

BENCH_AGENT = "bench-agent"
LINEAGE_CONTRIBUTOR = "bench-lineage"
LINEAGE_CHAIN = 30


def _lineage_chain(space) -> list:
    """A chain of LINEAGE_CHAIN refinements (made once, reused)."""
    from brain import embedding
    from brain.models import Thought

    chain = list(Thought.objects.filter(space=space, contributor_id=LINEAGE_CONTRIBUTOR).order_by("created_at"))
    if len(chain) >= LINEAGE_CHAIN:
        return chain
    Thought.objects.filter(space=space, contributor_id=LINEAGE_CONTRIBUTOR).delete()
    texts = [f"Release checklist, version {i}: freeze, tag, migrate, deploy, verify." for i in range(LINEAGE_CHAIN)]
    vectors = embedding.embed_many(texts)
    chain = []
    for text, vector in zip(texts, vectors, strict=True):
        chain.append(
            Thought.objects.create(
                space=space,
                content=text,
                contributor_id=LINEAGE_CONTRIBUTOR,
                contributor_name="Benchmark lineage",
                thought_type="refinement" if chain else "original",
                source_ids=[chain[-1].id] if chain else [],
                embedding=vector,
                embedding_model=embedding.current_model_label(),
            )
        )
    Thought.objects.filter(pk__in=[t.pk for t in chain[:-1]]).update(superseded=True)
    return chain


def run(*, thoughts: int = 10_000, requests: int = 100) -> list[tuple[str, list[float]]]:
    from brain import embedding
    from brain.models import Thought

    space = bench_space()
    _, _, client = agent_client(space=space, name=BENCH_AGENT)
    seed_thoughts(space, thoughts)
    chain = _lineage_chain(space)
    rng = random.Random(7)

    def post(body: dict) -> dict:
        response = client.post("/api/v1/memory", body, format="json")
        if response.status_code != 200:
            raise RuntimeError(f"memory endpoint answered {response.status_code}: {response.content[:300]!r}")
        return response.json()

    def question(_: int) -> dict:
        return post({"prompt": f"Why does {rng.choice(COMPONENTS)} {rng.choice(ACTIONS)}?"})

    def statement(i: int) -> dict:
        text = (
            f"Benchmark finding {time.time_ns()}: {rng.choice(COMPONENTS)} {rng.choice(ACTIONS)} "
            f"{rng.choice(CONDITIONS)}, and {rng.choice(FIXES)}."
        )
        body = post({"prompt": text})
        assert body["trace"]["thought_id"], body["trace"]
        return body

    def lineage(i: int):
        node = chain[i % len(chain)]
        response = client.get(f"/api/v1/thoughts/{node.id}/lineage", {"max_depth": 10})
        if response.status_code != 200:
            raise RuntimeError(f"lineage endpoint answered {response.status_code}")

    for i in range(5):  # warm-up: model load, connections, plan caches
        question(i)
        lineage(i)
    total = Thought.objects.filter(space=space).count()
    print(f"\nbrain: {total} thoughts in space {space.slug!r} ({thoughts} seeded), {requests} requests per row")
    return [
        (
            "embedding of one prompt (model only)",
            timed(lambda i: embedding.embed(f"Why does query {i} fail?"), requests),
        ),
        ("POST /memory retrieve-only", timed(question, requests)),
        ("POST /memory contribute+retrieve", timed(statement, max(10, requests // 2))),
        (f"GET /thoughts/{{id}}/lineage (chain of {LINEAGE_CHAIN}, max_depth 10)", timed(lineage, requests)),
    ]
