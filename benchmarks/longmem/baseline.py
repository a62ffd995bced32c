"""Dense-only and lexical-only retrieval on the long-conversation benchmark, without the database.

    python -m benchmarks.longmem.baseline [--split dev|test|both] [--k 10]

Per conversation, every turn is a candidate; each question is scored against its own conversation's
turns only (as a space holds one team's memory).

- dense: Colony's embedding model (``brain.embedding.embed_many``), cosine top k. Turns are embedded
  in batches, each question alone (as the memory endpoint embeds a prompt).
- lexical: Okapi BM25 (k1 1.2, b 0.75) written here (``rank_bm25`` is not in the venv), over
  lower-cased word tokens without English stop words.

Printed per split and question type: recall@1/5/10 (a question is found at k when any of its evidence
turns is in the top k), all@10 (every evidence turn in the top 10) and MRR (first evidence turn).
No-answer prompts are not in recall; for them the score of the top hit is summarised, beside the
same for answerable questions, which is what a relevance threshold would have to separate.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
from collections import Counter

from benchmarks.longmem.dataset import QUESTION_TYPES, load

KS = (1, 5, 10)
K1, B = 1.2, 0.75
STOP = set(
    "a an the and or but if of to in on at for with by from up about into over after is are was were be been "
    "being have has had do does did will would can could should may might must shall it its this that these "
    "those i you he she we they me him her us them my your his our their what which who whom whose when where "
    "why how all any both each few more most other some such no nor not only own same so than too very just "
    "s t don now then there here as".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP]


class BM25:
    def __init__(self, docs: list[str]):
        self.docs = [Counter(tokens(d)) for d in docs]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.docs), 1) or 1.0
        df = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = tokens(query)
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            s = 0.0
            for w in terms:
                tf = doc.get(w)
                if tf:
                    s += self.idf[w] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / self.avg))
            out.append(s)
        return out


def dense_scorer(texts: list[str]):
    import django
    import numpy as np

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from brain.embedding import embed_many

    matrix = np.asarray(embed_many(texts), dtype=np.float32)

    def score(query: str) -> list[float]:
        return (matrix @ np.asarray(embed_many([query])[0], dtype=np.float32)).tolist()

    return score


def evaluate(ds, method: str) -> dict:
    """{question type: [(rank of first evidence or None, all evidence in top 10, top score)]}"""
    results: dict[str, list] = {t: [] for t in QUESTION_TYPES}
    for conversation in ds.conversations:
        turns = conversation.turns
        ids = [t.id for t in turns]
        texts = [t.text for t in turns]
        score = dense_scorer(texts) if method == "dense" else BM25(texts).scores
        for q in ds.questions_for(conversation.id):
            scores = score(q.question)
            order = sorted(range(len(ids)), key=lambda i: -scores[i])
            ranked = [ids[i] for i in order]
            top = scores[order[0]]
            if q.type == "noanswer":
                results[q.type].append((None, False, top))
                continue
            ranks = [ranked.index(e) + 1 for e in q.evidence]
            results[q.type].append((min(ranks), max(ranks) <= 10, top))
    return results


def _row(label: str, rows: list) -> str:
    n = len(rows)
    cells = [f"{100 * sum(1 for r, _, _ in rows if r <= k) / n:5.1f}" for k in KS]
    cells.append(f"{100 * sum(1 for _, a, _ in rows if a) / n:5.1f}")
    cells.append(f"{sum(1 / r for r, _, _ in rows) / n:.3f}")
    return f"  {label:<14}{n:>5}  " + "  ".join(cells)


def _dist(label: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=10)
    return (
        f"  {label:<14}{len(values):>5}  min {min(values):.3f}  p10 {q[0]:.3f}  p50 {statistics.median(values):.3f}"
        f"  p90 {q[8]:.3f}  max {max(values):.3f}"
    )


def report(split: str, method: str) -> None:
    ds = load(split)
    results = evaluate(ds, method)
    print(f"\n{method} on {split}")
    print(f"  {'type':<14}{'n':>5}  {'R@1':>5}  {'R@5':>5}  {'R@10':>5}  {'all10':>5}  {'MRR':>5}")
    answerable = []
    for qtype in QUESTION_TYPES:
        if qtype != "noanswer" and results[qtype]:
            print(_row(qtype, results[qtype]))
            answerable += results[qtype]
    print(_row("answerable", answerable))
    print("  top-hit score")
    print(_dist("answerable", [s for _, _, s in answerable]))
    print(_dist("noanswer", [s for _, _, s in results["noanswer"]]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument("--method", choices=("dense", "lexical", "both"), default="both")
    args = parser.parse_args()
    for split in ("dev", "test") if args.split == "both" else (args.split,):
        for method in ("dense", "lexical") if args.method == "both" else (args.method,):
            report(split, method)


if __name__ == "__main__":
    main()
