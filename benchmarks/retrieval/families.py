"""The other fusion families tried on dev (benchmarks/retrieval/README.md, "Dev sweep"), dev only.

    python -m benchmarks.retrieval.families            # standard protocol and pooled, dev split

Each dev conversation is ingested (one space per conversation, then the six in one space) through
the real ``POST /api/v1/memory``; every dev question's candidates come from the one statement of
``brain.selectors.search`` (the pool a search for 10 results asks for), once. Each family then
replaces step 1 of ``brain.ranking.rank`` (relevance) with its own formula over the same candidates;
the multipliers, the replacement rule and the rest of ``rank`` are the shipped ones. Figures are
recall@1/5/10, MRR and stale>evid per family and protocol, plus the paraphrase questions' recall@10.
Refuses the test split: nothing is tuned on it.
"""

from __future__ import annotations

import copy
import math
import statistics
import sys
from collections.abc import Callable

from benchmarks.retrieval.run import KS, LIMIT, Score

Relevance = Callable[[list, dict], list[float]]  # (candidates, question context) -> relevance each


def _cos(candidate) -> float:
    from brain import ranking

    if candidate.similarity is None:
        return ranking.fulltext_only_similarity(candidate.lexical)
    return max(0.0, candidate.similarity)


def _places(values: list[float]) -> list[int]:
    from brain import ranking

    return ranking._places(values)


def weighted(w: float) -> Relevance:
    return lambda cands, ctx: [(1 - w) * _cos(c) + w * c.lexical for c in cands]


def minmax(w: float) -> Relevance:
    """Per-query min–max cosine, BM25 over the query's best BM25."""

    def relevance(cands, ctx):
        cos = [_cos(c) for c in cands]
        low, high = min(cos), max(cos)
        best = max(c.bm25 for c in cands) or 1.0
        return [
            (1 - w) * ((x - low) / (high - low) if high > low else 0.0) + w * c.bm25 / best
            for c, x in zip(cands, cos, strict=True)
        ]

    return relevance


def zscore(w: float) -> Relevance:
    def relevance(cands, ctx):
        cos = [_cos(c) for c in cands]
        bm25 = [c.bm25 for c in cands]
        mu, sd = statistics.mean(cos), statistics.pstdev(cos) or 1.0
        matched = [b for b in bm25 if b > 0]
        lmu, lsd = (statistics.mean(bm25), statistics.pstdev(bm25) or 1.0) if len(matched) >= 2 else (0.0, 1.0)
        return [(1 - w) * (x - mu) / sd + w * (b - lmu) / lsd for x, b in zip(cos, bm25, strict=True)]

    return relevance


def adaptive(w: float, full: float) -> Relevance:
    """Lexical weight × the query's best lexical coverage (full weight at ``full``)."""

    def relevance(cands, ctx):
        share = min(1.0, max((c.lexical for c in cands), default=0.0) / full)
        return [(1 - w * share) * _cos(c) + w * share * c.lexical for c in cands]

    return relevance


def maxblend(alpha: float) -> Relevance:
    return lambda cands, ctx: [max(_cos(c), c.lexical) + alpha * min(_cos(c), c.lexical) for c in cands]


def blend(
    *,
    share: float = 0.75,
    k: float = 1,
    w: float = 0.4,
    gate: float | None = None,
    corrections: float = 0.0,
    cos_gate: float | None = None,
) -> Relevance:
    """The blend of RRF and the weighted sum (defaults: the fp32-era choice); ``gate``: the lexical
    RRF term × min(1, coverage / gate); ``corrections``: live corrections as a third RRF list of that
    weight; ``cos_gate``: both lexical terms × min(1, cosine /
    cos_gate) (a shared word counts less in a thought far in meaning)."""

    def relevance(cands, ctx):
        cos = [_cos(c) for c in cands]
        dense, lexical = _places(cos), _places([c.bm25 for c in cands])
        live = [
            c.thought.thought_category == "correction" and not c.thought.superseded and x >= 0.2
            for c, x in zip(cands, cos, strict=True)
        ]
        third = _places([x if ok else -1.0 for x, ok in zip(cos, live, strict=True)])
        out = []
        for c, x, d, lx, ok, t in zip(cands, cos, dense, lexical, live, third, strict=True):
            g = min(1.0, c.lexical / gate) if gate else 1.0
            cg = min(1.0, max(0.0, x) / cos_gate) if cos_gate else 1.0
            rrf = 1 / (k + d) + (g * cg / (k + lx) if c.bm25 > 0 else 0.0) + (corrections / (k + t) if ok else 0.0)
            out.append(share * rrf * (k + 1) / 2 + (1 - share) * ((1 - w) * x + w * cg * c.lexical))
        return out

    return relevance


def corrections_inside(boost: float = 1.3) -> Relevance:
    """The correction boost applied inside the fusion (corrections climb both lists); run with the
    after-fusion CORRECTION_MULTIPLIER at 1.0 so it is not applied twice."""

    def relevance(cands, ctx):
        m = [boost if c.thought.thought_category == "correction" else 1.0 for c in cands]
        cos = [_cos(c) for c in cands]
        dense = _places([x * y for x, y in zip(cos, m, strict=True)])
        lexical = _places([c.bm25 * y for c, y in zip(cands, m, strict=True)])
        return [
            0.75 * (1 / (1 + d) + (1 / (1 + lx) if c.bm25 > 0 else 0.0)) + 0.25 * y * (0.6 * x + 0.4 * c.lexical)
            for c, x, d, lx, y in zip(cands, cos, dense, lexical, m, strict=True)
        ]

    return relevance


def newer_wins(tau: float) -> Relevance:
    """Under the blend: a newer candidate whose vector is within cosine ``tau`` of an older one's
    scores at least as high as it."""
    base = blend()

    def relevance(cands, ctx):
        rel = list(base(cands, ctx))
        vectors = [ctx["vectors"].get(c.id) for c in cands]
        order = sorted(range(len(cands)), key=lambda i: -rel[i])
        for i in order:
            for j in order:
                if vectors[i] is None or vectors[j] is None:
                    continue
                newer = cands[j].thought.created_at > cands[i].thought.created_at
                if newer and float(vectors[i] @ vectors[j]) >= tau and rel[j] < rel[i]:
                    rel[j] = rel[i] * 1.0001
        return rel

    return relevance


def bm25_b(b: float) -> Relevance:
    """Under the blend, with BM25 recomputed from the stored lexeme counts at length normalisation b."""
    base = blend()

    def relevance(cands, ctx):
        df, n, lengths, counts = ctx["df"], ctx["n"], ctx["lengths"], ctx["counts"]
        avgdl = sum(lengths.values()) / max(1, len(lengths))
        lexemes = set(ctx["lexemes"])
        idf = {lx: math.log(1 + (n - df.get(lx, 0) + 0.5) / (df.get(lx, 0) + 0.5)) for lx in lexemes}
        for c in cands:
            if c.id not in counts:
                continue
            tf_of = counts[c.id]
            c.bm25 = sum(
                idf[lx] * tf_of[lx] * 2.2 / (tf_of[lx] + 1.2 * (1 - b + b * lengths[c.id] / avgdl))
                for lx in lexemes
                if tf_of.get(lx)
            )
            c.idf_total = sum(idf.values())
        return base(cands, ctx)

    return relevance


FAMILIES: list[tuple[str, Relevance, dict]] = [
    ("weighted 0.6 (before)", weighted(0.6), {}),
    ("blend 0.75/1/0.4 (the fp32 choice)", blend(), {}),
    *((f"min-max, lexical {w}", minmax(w), {}) for w in (0.3, 0.6)),
    *((f"z-scores, lexical {w}", zscore(w), {}) for w in (0.3, 0.6)),
    *((f"adaptive lexical 0.6, full at {f}", adaptive(0.6, f), {}) for f in (0.3, 0.5)),
    *((f"max + {a}·min", maxblend(a), {}) for a in (0.3, 1.0)),
    *((f"blend, lexical RRF gated at {g}", blend(gate=g), {}) for g in (0.2, 0.3, 0.5)),
    ("corrections inside the fusion", corrections_inside(), {"CORRECTION_MULTIPLIER": 1.0}),
    *((f"blend + corrections list {wc}", blend(corrections=wc), {}) for wc in (0.25, 0.5)),
    *((f"blend + newer near-copy wins, {t}", newer_wins(t), {}) for t in (0.7, 0.8, 0.9)),
    *((f"blend, BM25 b {b}", bm25_b(b), {}) for b in (0.0, 0.25, 0.5, 0.75)),
    # with the haystack (2026-11-24): the lexical side gated by the candidate's cosine
    *(
        (f"blend {sh}/{k}/{w}, cosine gate {cg}", blend(share=sh, k=k, w=w, cos_gate=cg), {})
        for sh, k, w in ((0.25, 1, 0.6), (0.5, 2, 0.6), (0.0, 1, 0.4))
        for cg in (0.2, 0.3, 0.4)
    ),
]


def _context(bench) -> dict:
    """Per space: vectors (for newer_wins) and lexeme counts (for bm25_b) of its thoughts."""
    from benchmarks.retrieval.run import _stored

    ids, vectors, counts = _stored(bench.space)
    df: dict[str, int] = {}
    for c in counts:
        for lexeme in c:
            df[lexeme] = df.get(lexeme, 0) + 1
    return {
        "vectors": dict(zip(ids, vectors, strict=True)),
        "counts": dict(zip(ids, counts, strict=True)),
        "lengths": {i: sum(c.values()) for i, c in zip(ids, counts, strict=True)},
        "df": df,
        "n": len(ids),
    }


def collect(benches, questions) -> list[tuple]:
    """Every question's candidates from the one statement, with what the families need."""
    from benchmarks.retrieval.run import query_lexemes_cached
    from brain import embedding
    from brain.selectors import search

    if any(q.split != "dev" for q in questions):
        raise SystemExit("the families run on the dev split only")
    bench_of = {cid: b for b in benches for cid in b.conversation_ids}
    contexts = {id(b): _context(b) for b in benches}
    vectors = embedding.embed_many([q.question for q in questions])
    rows = []
    for question, vector in zip(questions, vectors, strict=True):
        bench = bench_of[question.conversation]
        candidates, _vector, _companion = search._fetch(
            space=bench.space,
            vector=vector,
            query_text=question.question,
            pool=max(search.MIN_POOL, LIMIT * search.POOL_FACTOR),
            filter_topic=None,
            filter_category=None,
            exclude_ids=[],
        )
        ctx = dict(contexts[id(bench)], lexemes=query_lexemes_cached(question.question))
        rows.append((question, bench, candidates, ctx))
    return rows


def tally(rows, page: Callable[[list, dict], list]) -> tuple[Score, Score]:
    """Every question's page (``page(candidates, ctx)``: a fresh copy of its candidates in, the ranked
    page out) scored: all questions, and the paraphrase ones alone."""
    score, paraphrase = Score(), Score()
    for question, bench, candidates, ctx in rows:
        turns = [bench.turn_of_thought.get(c.id, "?") for c in page(copy.deepcopy(candidates), ctx)]
        score.add(turns, question)
        if question.type == "paraphrase":
            paraphrase.add(turns, question)
    return score, paraphrase


def evaluate(rows, relevance: Relevance, constants: dict) -> tuple[Score, Score]:
    from brain import ranking

    original = ranking.relevances
    saved = {name: getattr(ranking, name) for name in constants}

    def page(fresh: list, ctx: dict) -> list:
        values = dict(zip([id(c) for c in fresh], relevance(fresh, ctx), strict=True))
        ranking.relevances = lambda cands: [values[id(c)] for c in cands]
        try:
            return ranking.rank(fresh, limit=LIMIT)
        finally:
            ranking.relevances = original

    try:
        for name, value in constants.items():
            setattr(ranking, name, value)
        return tally(rows, page)
    finally:
        for name, value in saved.items():
            setattr(ranking, name, value)


def dev_rows() -> dict[str, list[tuple]]:
    """The dev split ingested under both protocols, and every question's candidates (:func:`collect`)."""
    from benchmarks.retrieval.dataset import load
    from benchmarks.retrieval.run import ingest_split, setup_database

    dataset = load("dev")
    setup_database(fresh=True)
    conversations = dataset.conversations
    protocols = {
        "standard": ingest_split(conversations, split="dev", pooled=False),
        "pooled": ingest_split(conversations, split="dev", pooled=True),
    }
    return {name: collect(benches, dataset.questions) for name, benches in protocols.items()}


def print_header(title: str, width: int) -> None:
    print(f"{title:{width}}  {'protocol':8}  " + "  ".join(f"{'R@' + str(k):>5}" for k in KS), end="")
    print(f"  {'MRR':>5}  stale>evid  paraphrase R@10")


def print_row(label: str, protocol: str, score: Score, paraphrase: Score, width: int) -> None:
    recalls = "  ".join(f"{score.recall(k):>5.1f}" for k in KS)
    print(
        f"{label:{width}}  {protocol:8}  {recalls}  {score.mrr():>5.3f}  {score.stale_share():>10}  "
        f"{paraphrase.recall(10):>15.1f}",
        flush=True,
    )


def main() -> int:
    rows = dev_rows()
    print_header("family (dev)", 40)
    for label, relevance, constants in FAMILIES:
        for protocol, protocol_rows in rows.items():
            print_row(label, protocol, *evaluate(protocol_rows, relevance, constants), width=40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
