"""A query-side linear adapter trained on the dev split: does it find paraphrases on test?

    python -m benchmarks.retrieval.query_adapter            # dev cross-validation, then test once (~8 min on 2 cores)

The stored thought vectors stay all-MiniLM-L6-v2's; only the question's vector is mapped, ``q ->
normalise(W q)`` with ``W = I + D`` (a 384 x 384 matrix, ~20 us per query), trained so that each
question's evidence turns outrank the other turns of its space: cross-entropy over the space's turns
at temperature ``tau``, plus ``lam * |D|^2`` keeping it near the identity, full-batch Adam. The data
(no database; turns and questions embedded one by one as the endpoint does, one space per
conversation as in the standard protocol):

1. **Choosing** (dev only): 4-fold cross-validation by conversation over the twelve dev conversations
   (train on nine, score the held-out three, every fold once); for each setting of ``GRID`` the
   held-out recall@10 pooled over the folds. The setting chosen is the highest, first in ``GRID``
   order on ties (the grid is ordered from the most to the least regularised within each step count).
2. **Reporting**, with the chosen setting trained on all of dev: recall@10 per type on test, and
   exact dense hit@10 over ``make bench-compare``'s 10,000 notes and 300 queries (issue 14's queries,
   which must not fall), each without and with the adapter.

Nothing here is used by Colony: it measures whether such an adapter is worth shipping.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
#: (lam, tau, steps), in the order ties are broken.
GRID = [
    (lam, tau, steps)
    for steps in (50, 150, 300)
    for lam in (0.1, 0.03, 0.01, 0.003, 0.001)
    for tau in (0.1, 0.05, 0.02)
]
FOLDS = 4
DIMENSIONS = 384


@dataclass
class Split:
    """One split's turns and questions as unit vectors; ``spans[conversation]`` is its turns' rows."""

    questions: list  # benchmarks.retrieval.dataset.Question
    turn_vectors: object  # torch tensor, one row per turn
    question_vectors: object
    spans: dict[str, tuple[int, int]]
    row_of: dict[str, int]  # turn id -> row

    def evidence_rows(self, index: int) -> list[int]:
        return [self.row_of[turn_id] for turn_id in self.questions[index].evidence]


def load_split(split: str) -> Split:
    import numpy as np
    import torch

    from benchmarks.retrieval.dataset import load
    from brain.embedding import embed_many

    data = load(split)
    turns = [t for c in data.conversations for t in c.turns]
    print(f"{split}: embedding {len(turns)} turns and {len(data.questions)} questions ...", flush=True)
    turn_vectors = torch.tensor(np.array(embed_many([t.text for t in turns], batch_size=1), dtype=np.float32))
    question_vectors = torch.tensor(
        np.array(embed_many([q.question for q in data.questions], batch_size=1), dtype=np.float32)
    )
    spans, start = {}, 0
    for c in data.conversations:
        spans[c.id] = (start, start + len(c.turns))
        start += len(c.turns)
    return Split(
        questions=data.questions,
        turn_vectors=turn_vectors,
        question_vectors=question_vectors,
        spans=spans,
        row_of={t.id: i for i, t in enumerate(turns)},
    )


def adapted(question_vectors, adapter):
    import torch

    if adapter is None:
        return question_vectors
    return torch.nn.functional.normalize(question_vectors @ adapter.T, dim=-1)


def recall_at_10(split: Split, indexes, adapter=None) -> dict[str, list[bool]]:
    """Per question type, whether an evidence turn is among the question's space's top 10 by cosine."""
    import torch

    queries = adapted(split.question_vectors, adapter)
    hits: dict[str, list[bool]] = {}
    for i in indexes:
        question = split.questions[i]
        start, end = split.spans[question.conversation]
        top = torch.argsort(-(split.turn_vectors[start:end] @ queries[i]), stable=True)[:10] + start
        hits.setdefault(question.type, []).append(bool(set(split.evidence_rows(i)) & set(top.tolist())))
    return hits


def train(split: Split, indexes, *, lam: float, tau: float, steps: int, lr: float = 1e-3):
    """``W = I + D`` minimising the evidence's cross-entropy among its space's turns + ``lam |D|^2``."""
    import torch

    identity = torch.eye(DIMENSIONS)
    adapter = identity.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([adapter], lr=lr)
    by_space: dict[str, list[int]] = {}
    for i in indexes:
        by_space.setdefault(split.questions[i].conversation, []).append(i)
    count = sum(len(v) for v in by_space.values())
    for _ in range(steps):
        optimiser.zero_grad()
        queries = adapted(split.question_vectors, adapter)
        loss = 0.0
        for conversation, members in by_space.items():
            start, end = split.spans[conversation]
            log_p = torch.log_softmax(queries[members] @ split.turn_vectors[start:end].T / tau, dim=-1)
            for row, i in enumerate(members):
                evidence = [r - start for r in split.evidence_rows(i)]
                loss = loss - torch.logsumexp(log_p[row, evidence], 0)
        loss = loss / count + lam * ((adapter - identity) ** 2).sum()
        loss.backward()
        optimiser.step()
    return adapter.detach()


def share(hits: dict[str, list[bool]]) -> float:
    every = [h for values in hits.values() for h in values]
    return 100 * sum(every) / len(every)


def line(name: str, hits: dict[str, list[bool]]) -> str:
    per_type = "  ".join(f"{t} {100 * sum(v) / len(v):5.1f}" for t, v in sorted(hits.items()))
    return f"{name:30} R@10 {share(hits):5.1f}   {per_type}"


def folds(split: Split) -> list[list[int]]:
    conversations = sorted(split.spans)
    groups = [set(conversations[k::FOLDS]) for k in range(FOLDS)]
    return [[i for i, q in enumerate(split.questions) if q.conversation in group] for group in groups]


def choose(dev: Split) -> tuple[float, float, int]:
    """The setting of ``GRID`` with the best pooled held-out recall@10 over the dev folds."""
    held_out = folds(dev)
    everyone = range(len(dev.questions))
    best, chosen = -1.0, GRID[0]
    for lam, tau, steps in GRID:
        pooled: dict[str, list[bool]] = {}
        for fold in held_out:
            kept = set(fold)
            adapter = train(dev, [i for i in everyone if i not in kept], lam=lam, tau=tau, steps=steps)
            for kind, values in recall_at_10(dev, fold, adapter).items():
                pooled.setdefault(kind, []).extend(values)
        print(line(f"dev CV lam {lam} tau {tau} x{steps}", pooled), flush=True)
        if share(pooled) > best:
            best, chosen = share(pooled), (lam, tau, steps)
    return chosen


def speed_queries_hit_at_10(adapter) -> tuple[float, float]:
    """Exact dense hit@10 of ``make bench-compare``'s 300 queries over its 10,000 notes, without and with."""
    import numpy as np
    import torch

    from benchmarks import compare
    from brain.embedding import embed_many

    notes, queries = compare.notes(10000), compare.queries(10000, 300)
    print("embedding bench-compare's 10,000 notes ...", flush=True)
    note_vectors = torch.tensor(np.array(embed_many([n["content"] for n in notes]), dtype=np.float32))
    query_vectors = torch.tensor(np.array(embed_many([q["query"] for q in queries], batch_size=1), dtype=np.float32))
    out = []
    for matrix in (query_vectors, adapted(query_vectors, adapter)):
        top = torch.argsort(-(matrix @ note_vectors.T), dim=1, stable=True)[:, :10].tolist()
        out.append(100 * sum(q["target"] in top[i] for i, q in enumerate(queries)) / len(queries))
    return out[0], out[1]


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(BASE_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    dev = load_split("dev")
    everyone = range(len(dev.questions))
    print(line("dev dense (no adapter)", recall_at_10(dev, everyone)), flush=True)
    lam, tau, steps = choose(dev)
    print(f"chosen on dev: lam {lam}, tau {tau}, {steps} steps; trained on all of dev, reported once:", flush=True)
    adapter = train(dev, everyone, lam=lam, tau=tau, steps=steps)
    print(line("dev, trained on (not a result)", recall_at_10(dev, everyone, adapter)))
    test = load_split("test")
    print(line("test dense", recall_at_10(test, range(len(test.questions)))))
    print(line("test dense + adapter", recall_at_10(test, range(len(test.questions)), adapter)))
    plain, with_adapter = speed_queries_hit_at_10(adapter)
    print(f"bench-compare's queries, exact dense hit@10: {plain:.1f}% without, {with_adapter:.1f}% with the adapter")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
