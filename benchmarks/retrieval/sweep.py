"""The dev-only sweep of brain/ranking.py's fusion constants (``make bench-retrieval-sweep``).

Asks every dev question through ``brain.selectors.search.thought_search`` (Colony's retrieval and
ranking, without the endpoint's reinforcement, so settings don't bend each other) once per setting
and prints recall@1/5/10, MRR, stale>evid and the paraphrase questions' recall@10 per setting.
Refuses the test split: nothing is tuned on it.

    python -m benchmarks.retrieval.run --sweep            # one space per conversation (~35 thoughts)
    python -m benchmarks.retrieval.run --sweep --pooled   # the six dev conversations in ONE space

The standard protocol's recall@10 is near its ceiling on dev (a top 10 is a third of a space), so the
pooled protocol (~200 thoughts, distractors from every conversation) is the one that separates
methods; the rule for choosing is in benchmarks/retrieval/README.md ("Dev sweep").

:func:`signal_sweep` is the same dev-only asking with another similarity mixed into the dense side's
(the late-interaction and sentence-vector scripts measure theirs through it).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable

from benchmarks.retrieval.run import KS, LIMIT, Score

WEIGHTED = {"RRF_SHARE": 0.0}
#: The setting brain/ranking.py ships (the recency rows are tried on top of it).
CHOSEN = {"RRF_SHARE": 0.0, "RRF_K": 2, "LEXICAL_WEIGHT": 0.4}
SETTINGS = [
    # the calibrated weighted sum alone (the fusion before this sweep: LEXICAL_WEIGHT 0.6)
    *({**WEIGHTED, "LEXICAL_WEIGHT": w} for w in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)),
    # reciprocal-rank fusion alone, over the ranks among the query's candidates
    *({"RRF_SHARE": 1.0, "RRF_K": k} for k in (1, 2, 3, 5, 10, 60)),
    # the blend of both (share 0.25 and k 3 added for the int8 re-run of 2026-11-23)
    *(
        {"RRF_SHARE": share, "RRF_K": k, "LEXICAL_WEIGHT": w}
        for share, k, w in itertools.product((0.25, 0.5, 0.75), (1, 2, 3), (0.4, 0.6))
    ),
    # newer first among near-equals, on top of the chosen blend
    *({**CHOSEN, "RECENCY_BOOST_MAX": r} for r in (0.05, 0.1)),
]
SWEPT = ("RRF_SHARE", "RRF_K", "LEXICAL_WEIGHT", "RECENCY_BOOST_MAX", "PHEROMONE_BOOST_MAX")


def asker(benches, questions):
    """A function that asks every dev question once through ``thought_search`` (Colony's retrieval and
    ranking as they stand when it is called; no reinforcement) and returns the overall
    :class:`~benchmarks.retrieval.run.Score` and one per question type. The questions are embedded once,
    here."""
    from brain import embedding
    from brain.selectors.search import thought_search

    if any(q.split != "dev" for q in questions):
        raise SystemExit("the sweep runs on the dev split only")
    # Each question embedded alone, as the endpoint embeds it (the int8 model's vectors depend on what
    # shares their model run).
    texts = [q.question for q in questions]
    vectors = dict(zip([q.id for q in questions], embedding.embed_many(texts, batch_size=1), strict=True))
    bench_of = {conversation_id: b for b in benches for conversation_id in b.conversation_ids}

    def ask() -> tuple[Score, dict[str, Score]]:
        score, by_type = Score(), {}
        for question in questions:
            bench = bench_of[question.conversation]
            result = thought_search(
                space=bench.space, vector=vectors[question.id], query_text=question.question, limit=LIMIT
            )
            turns = [bench.turn_of_thought.get(c.id, "?") for c in result.candidates]
            score.add(turns, question)
            by_type.setdefault(question.type, Score()).add(turns, question)
        return score, by_type

    return ask


def run(benches, questions) -> None:
    from brain import ranking

    ask = asker(benches, questions)
    original = {name: getattr(ranking, name) for name in SWEPT}
    print(
        f"{'setting':52}  {'n':>4}  "
        + "  ".join(f"{'R@' + str(k):>5}" for k in KS)
        + f"  {'MRR':>5}  stale>evid  paraphrase R@10"
    )
    try:
        for setting in SETTINGS:
            for name, value in itertools.chain(original.items(), setting.items()):
                setattr(ranking, name, value)
            score, by_type = ask()
            paraphrase = by_type.get("paraphrase", Score())
            label = ", ".join(f"{k}={v}" for k, v in setting.items())
            recalls = "  ".join(f"{score.recall(k):>5.1f}" for k in KS)
            print(
                f"{label:52}  {len(score.ranks):>4}  {recalls}  {score.mrr():>5.3f}  {score.stale_share():>10}  "
                f"{paraphrase.recall(10):>15.1f}",
                flush=True,
            )
    finally:
        for name, value in original.items():
            setattr(ranking, name, value)


#: A per-candidate similarity computed beside Colony's (``signal_sweep``): given the question's text, its
#: vector and the candidates the search fetched, one value per candidate (None: keep the cosine).
Signal = Callable[[str, list[float], list], list[float | None]]


def signal_sweep(signal: Signal, grid: list[tuple[float, float]]) -> None:
    """Colony's ranking on dev with the dense side's cosine replaced by ``(1 - w) x cosine + w x signal``.

    The dev conversations are ingested through the real endpoint as ``make bench-retrieval`` does, then
    every dev question goes through ``thought_search`` (Colony's candidates, fusion and multipliers, no
    reinforcement) once per ``(w, LEXICAL_WEIGHT)`` of ``grid``; recall@1/10, MRR, stale>evid and
    recall@10 per question type are printed per setting. ``(0.0, ranking.LEXICAL_WEIGHT)`` is what Colony
    ships. The signal re-scores the candidates the search fetched (it brings none of its own), and the
    patches are undone afterwards: nothing here changes Colony."""
    from benchmarks.retrieval import run
    from benchmarks.retrieval.dataset import load

    dataset = load(haystack=True)
    run.setup_database(fresh=True)
    from brain import embedding, ranking

    embedding.embed("warm up")
    conversations = [c for c in dataset.conversations if c.split == "dev"]
    questions = [q for q in dataset.questions if q.split == "dev"]
    benches = run.ingest_split(conversations, split="dev", pooled=False)
    ask = asker(benches, questions)
    lexical_weight = ranking.LEXICAL_WEIGHT
    with signal_mixed_in(signal) as weight:
        try:
            for w, lexical in grid:
                weight["w"], ranking.LEXICAL_WEIGHT = w, lexical
                score, by_type = ask()
                print(
                    f"w {w:.1f} lexical {lexical:.1f}: R@1 {score.recall(1):5.1f}  R@10 {score.recall(10):5.1f}  "
                    f"MRR {score.mrr():.3f}  stale>evid {score.stale_share()}   "
                    + "  ".join(f"{t} {s.recall(10):5.1f}" for t, s in sorted(by_type.items())),
                    flush=True,
                )
        finally:
            ranking.LEXICAL_WEIGHT = lexical_weight


@contextlib.contextmanager
def signal_mixed_in(signal: Signal):
    """Within it, ``thought_search`` sets each fetched candidate's ``signal`` and ranks with
    ``(1 - w) x cosine + w x signal`` as the dense side's value (a candidate without either keeps the
    cosine). Yields ``{"w": 0.0}``, the mix's weight to set; this process's search and ranking
    functions are restored on leaving."""
    from brain import ranking
    from brain.selectors import search

    weight = {"w": 0.0}
    fetch, similarity = search._fetch, ranking._similarity

    def fetch_with_signal(**kwargs):
        candidates, vector, companion_row = fetch(**kwargs)
        values = signal(kwargs["query_text"], vector, candidates) if candidates else []
        for candidate, value in zip(candidates, values, strict=True):
            candidate.signal = value
        return candidates, vector, companion_row

    def mixed_similarity(candidate):
        value = similarity(candidate)
        if candidate.similarity is None or getattr(candidate, "signal", None) is None:
            return value
        return (1 - weight["w"]) * value + weight["w"] * candidate.signal

    search._fetch, ranking._similarity = fetch_with_signal, mixed_similarity
    try:
        yield weight
    finally:
        search._fetch, ranking._similarity = fetch, similarity


def dev_vectors(dev) -> tuple[dict, dict]:
    """The dev split's turn and question vectors by id (numpy), each text embedded alone as the endpoint
    embeds it (the int8 model's vector depends on what shares its model run): what the "worth
    building?" scripts compare their signals with."""
    import numpy as np

    from brain.embedding import embed_many

    turns = [t for c in dev.conversations for t in c.turns]
    print(f"embedding {len(turns)} dev turns and {len(dev.questions)} questions one by one ...", flush=True)
    turn_vectors = np.array(embed_many([t.text for t in turns], batch_size=1))
    question_vectors = np.array(embed_many([q.question for q in dev.questions], batch_size=1))
    return (
        dict(zip([t.id for t in turns], turn_vectors, strict=True)),
        dict(zip([q.id for q in dev.questions], question_vectors, strict=True)),
    )


def report_recall10(name: str, hits: dict[str, list[bool]], *, width: int = 24) -> None:
    """One line: recall@10 over every question of ``hits`` (question type -> found or not) and per type."""
    every = [h for values in hits.values() for h in values]
    per_type = "  ".join(f"{t} {100 * sum(v) / len(v):5.1f}" for t, v in sorted(hits.items()))
    print(f"{name:{width}} R@10 {100 * sum(every) / len(every):5.1f}   {per_type}", flush=True)


def dev_script_main(
    argv: list[str] | None, description: str, dense_variants: Callable[[], None], colony_sweep: Callable[[], None]
) -> int:
    """The entry point of a dev-only "worth building?" script: its dense variants without a database,
    or with ``--colony`` its signal inside Colony's ranking (:func:`signal_sweep`)."""
    import argparse
    import os
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--colony", action="store_true", help="inside Colony's ranking (ingests the dev split)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    if args.colony:
        colony_sweep()
        return 0
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    dense_variants()
    return 0
