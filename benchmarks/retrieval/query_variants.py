"""Can the dense side itself find more? Variants of exact dense search on the dev split (dev only).

    python -m benchmarks.retrieval.query_variants

Issue 13's test target needs paraphrase questions found far more often than all-MiniLM-L6-v2's exact
cosine finds them (benchmarks/retrieval/README.md, "What the target asks of the model"). This script
measures, on the dev split only and with no database (the turns and questions embedded directly, one
space per conversation as in the standard protocol), recall@10 per question type of:

- ``dense``: the question's vector against every turn's (the dense-only baseline's ranking);
- ``prf k b``: pseudo-relevance feedback (Rocchio): the question's vector plus ``b`` times the mean of
  its top ``k`` turns' vectors, normalised, searched again;
- ``neighbours g``: each turn's vector plus ``g`` times its neighbours' in the same session (the turn
  said before and the one after), normalised: a turn carries some of its context;
- ``stripped``: the question without its question words ("How long do we keep ..." -> "keep ..."),
  closer in form to the statement that answers it; ``mix w``: the two vectors averaged, weight ``w``.

Nothing here is used by Colony: it tells whether a cheap change of the dense side is worth building.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]

QUESTION_WORDS = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how)( (much|many|long|often|quickly|soon|far|big))?"
    r"( (is|are|was|were|do|does|did|has|have|had|should|must|can|could|will|would|shall))?"
    r"( (we|they|the team|you|i|people|it))?\b[ ,]*",
    re.IGNORECASE,
)


def stripped(question: str) -> str:
    return QUESTION_WORDS.sub("", question.strip()).rstrip("?").strip() or question


def _unit(matrix):
    import numpy as np

    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(BASE_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import numpy as np

    from benchmarks.retrieval.dataset import load
    from brain.embedding import embed_many

    dev = load("dev")
    spaces = {c.id: c.turns for c in dev.conversations}
    turns = [t for c in dev.conversations for t in c.turns]
    print(f"embedding {len(turns)} dev turns and {len(dev.questions)} questions ...", flush=True)
    vectors = np.array(embed_many([t.text for t in turns], batch_size=1), dtype=np.float32)
    questions = np.array(embed_many([q.question for q in dev.questions], batch_size=1), dtype=np.float32)
    plain = np.array(embed_many([stripped(q.question) for q in dev.questions], batch_size=1), dtype=np.float32)
    offsets, start = {}, 0
    for c in dev.conversations:
        offsets[c.id] = (start, start + len(c.turns))
        start += len(c.turns)

    def neighbours(g: float):
        out = vectors.copy()
        for c in dev.conversations:
            a, b = offsets[c.id]
            for i in range(a, b):
                for j in (i - 1, i + 1):
                    if a <= j < b and turns[j].session == turns[i].session:
                        out[i] += g * vectors[j]
        return _unit(out)

    def report(name: str, query_vectors, turn_vectors=vectors, prf: tuple[int, float] | None = None) -> None:
        hits: dict[str, list[bool]] = {}
        for index, question in enumerate(dev.questions):
            a, b = offsets[question.conversation]
            space = turn_vectors[a:b]
            query = query_vectors[index]
            if prf:
                k, weight = prf
                top = np.argsort(-(space @ query), kind="stable")[:k]
                query = _unit(query + weight * space[top].mean(0))
            best = np.argsort(-(space @ query), kind="stable")[:10]
            found = {spaces[question.conversation][i].id for i in best}
            hits.setdefault(question.type, []).append(any(e in found for e in question.evidence))
        every = [h for values in hits.values() for h in values]
        per_type = "  ".join(f"{t} {100 * sum(v) / len(v):5.1f}" for t, v in sorted(hits.items()))
        print(f"{name:18} R@10 {100 * sum(every) / len(every):5.1f}   {per_type}", flush=True)

    report("dense", questions)
    for k, weight in ((3, 0.3), (3, 0.6), (5, 0.3), (5, 0.5), (10, 0.3)):
        report(f"prf {k} {weight}", questions, prf=(k, weight))
    for g in (0.1, 0.2, 0.3):
        report(f"neighbours {g}", questions, turn_vectors=neighbours(g))
    report("stripped", plain)
    for w in (0.3, 0.5, 0.7):
        report(f"mix {w}", _unit((1 - w) * questions + w * plain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
