"""A vector per sentence beside the turn's own, on the dev split: worth building?

    python -m benchmarks.retrieval.sentence_vectors            # dense variants, no database (~30 s)
    python -m benchmarks.retrieval.sentence_vectors --colony   # inside Colony's ranking (~1 min)

Issue 13's test target needs paraphrases found more often than the model's own exact cosine finds
them (benchmarks/retrieval/README.md, "What the target asks of the model"). A turn often says two or
three things; its one mean-pooled vector is the average of them, and a question about one of them
may be closer to that sentence alone. The multi-vector idea at sentence grain (late interaction is
the same idea at token grain): each turn of two or more parts (:func:`parts`) also gets one vector
per part, and a turn's "best part" similarity is the highest cosine of the question with the turn or
any of its parts. Dev split only:

- without ``--colony``: recall@10 per question type of exact dense search, the best part alone, and
  ``(1 - w) x cosine + w x best part``;
- ``--colony``: the same mix replacing the dense side's cosine inside Colony's ranking
  (``benchmarks.retrieval.sweep.signal_sweep``), for a grid of ``w`` and ``LEXICAL_WEIGHT``.

Nothing here is used by Colony: it measures whether storing a vector per sentence (a second table
with its own HNSW index, ~1.7 more vectors per dev turn) is worth it.
"""

from __future__ import annotations

import re

from benchmarks.retrieval.sweep import dev_script_main, report_recall10, signal_sweep

#: Where a turn is cut: after a sentence's end, a semicolon or a colon; around a dash between spaces;
#: before a clause opened by a comma and a conjunction.
BOUNDARY = re.compile(r"(?<=[.!?;])\s+|:\s+|\s+-\s+|,\s+(?=(?:and|but|so|which|because)\b)")
#: A part shorter than this many words (an "OK." or a "Thanks, Ada.") is not a part of its own.
MIN_PART_WORDS = 3
#: (w, LEXICAL_WEIGHT) settings of ``--colony``; (0.0, 0.4) is what Colony ships.
COLONY_GRID = [
    (0.0, 0.4),
    *((w, 0.4) for w in (0.3, 0.5, 0.7, 1.0)),
    *((w, lexical) for lexical in (0.2, 0.3) for w in (0.5, 0.7)),
    (0.5, 0.0),
]


def parts(text: str) -> list[str]:
    """The parts of a turn that get vectors of their own: none when it says one thing only."""
    found = [part for part in BOUNDARY.split(text.strip()) if len(part.split()) >= MIN_PART_WORDS]
    return found if len(found) > 1 else []


def best_part(query, turn: float, part_vectors) -> float:
    """The question's highest cosine with the turn (``turn``) or any of its parts (rows of
    ``part_vectors``, None for a turn of one part)."""
    if part_vectors is None:
        return turn
    return max(turn, float((part_vectors @ query).max()))


class PartVectors:
    """Each text's part vectors (None for a text of one part), embedded once per text."""

    def __init__(self) -> None:
        self.cache: dict[str, object] = {}

    def __call__(self, texts: list[str]) -> list:
        import numpy as np

        from brain.embedding import embed_many

        for text in dict.fromkeys(texts):
            if text not in self.cache:
                cut = parts(text)
                self.cache[text] = np.array(embed_many(cut, batch_size=32), dtype=np.float32) if cut else None
        return [self.cache[text] for text in texts]


def dense_variants() -> None:
    import numpy as np

    from benchmarks.retrieval.dataset import load
    from brain.embedding import embed_many

    dev = load("dev")
    turns = {c.id: c.turns for c in dev.conversations}
    texts = [t.text for c in dev.conversations for t in c.turns]
    split = PartVectors()
    split(texts)
    cut = [split.cache[text] for text in texts]
    print(
        f"{len(texts)} dev turns, {sum(1 for c in cut if c is not None)} of them of two or more parts, "
        f"{sum(len(c) for c in cut if c is not None)} part vectors; {len(dev.questions)} questions",
        flush=True,
    )
    vectors = {t: np.array(v, dtype=np.float32) for t, v in zip(texts, embed_many(texts, batch_size=32), strict=True)}
    queries = embed_many([q.question for q in dev.questions], batch_size=32)
    scores = []
    for question, query in zip(dev.questions, queries, strict=True):
        query = np.array(query, dtype=np.float32)
        space = turns[question.conversation]
        dense = np.array([vectors[t.text] @ query for t in space])
        best = np.array([best_part(query, d, split.cache[t.text]) for t, d in zip(space, dense, strict=True)])
        scores.append((question, space, dense, best))

    def run(name: str, combine) -> None:
        hits: dict[str, list[bool]] = {}
        for question, space, dense, best in scores:
            found = {space[i].id for i in np.argsort(-combine(dense, best), kind="stable")[:10]}
            hits.setdefault(question.type, []).append(any(e in found for e in question.evidence))
        report_recall10(name, hits, width=18)

    run("dense", lambda dense, best: dense)
    run("best part", lambda dense, best: best)
    for w in (0.3, 0.5, 0.7):
        run(f"mix {w}", lambda dense, best, w=w: (1 - w) * dense + w * best)


def colony_sweep() -> None:
    import numpy as np

    split = PartVectors()

    def best(_query_text: str, vector, candidates) -> list[float | None]:
        query = np.array(vector, dtype=np.float32)
        return [
            None if c.similarity is None else best_part(query, c.similarity, v)
            for c, v in zip(candidates, split([c.thought.content for c in candidates]), strict=True)
        ]

    signal_sweep(best, COLONY_GRID)


def main(argv: list[str] | None = None) -> int:
    return dev_script_main(argv, __doc__, dense_variants, colony_sweep)


if __name__ == "__main__":
    raise SystemExit(main())
