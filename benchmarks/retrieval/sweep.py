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
"""

from __future__ import annotations

import itertools

from benchmarks.retrieval.score import KS, LIMIT, Score

#: The setting brain/ranking.py ships (contrast and diversity are tried on top of it).
CHOSEN = {"LEXICAL_WEIGHT": 0.4}
SETTINGS = [
    # the lexical side's weight in the weighted sum
    *({"LEXICAL_WEIGHT": w} for w in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)),
    # diversity (maximal marginal relevance) on top of the chosen weight; lambda 1.0 is off
    *(
        {**CHOSEN, "DIVERSITY_LAMBDA": lam, "DIVERSITY_WINDOW": window}
        for lam, window in itertools.product((1.0, 0.9, 0.85, 0.8, 0.75, 0.7), (15, 20, 30))
    ),
    # contrast (a second round against the best hits' centroid) with and without diversity
    *(
        {**CHOSEN, "DIVERSITY_LAMBDA": lam, "DIVERSITY_WINDOW": 20, "CONTRAST_BETA": beta, "CONTRAST_SEEDS": seeds}
        for lam, beta, seeds in itertools.product((1.0, 0.85), (0.0, 0.2, 0.3, 0.5), (10, 30))
    ),
]
SWEPT = (
    "LEXICAL_WEIGHT",
    "PHEROMONE_BOOST_MAX",
    "DIVERSITY_LAMBDA",
    "DIVERSITY_WINDOW",
    "CONTRAST_BETA",
    "CONTRAST_SEEDS",
)


def asker(benches, questions):
    """A function that asks every dev question once through ``thought_search`` (Colony's retrieval and
    ranking as they stand when it is called; no reinforcement) and returns the overall
    :class:`~benchmarks.retrieval.score.Score` and one per question type. The questions are embedded once,
    here."""
    from brain import embedding
    from brain.selectors.search import thought_search

    if any(q.split != "dev" for q in questions):
        raise SystemExit("the sweep runs on the dev split only")
    questions = [q for q in questions if q.evidence]  # a no-answer prompt has nothing to find
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
            turns = bench.turns_for([c.id for c in result.candidates], question)
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
