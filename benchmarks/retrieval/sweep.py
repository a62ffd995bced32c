"""The dev-only sweep of brain/ranking.py's fusion constants (``make bench-retrieval-sweep``).

Asks every dev question through ``brain.selectors.search.thought_search`` (Colony's retrieval and
ranking, without the endpoint's reinforcement, so settings don't bend each other) once per setting
and prints recall@1/5/10 and MRR per setting. Refuses the test split: nothing is tuned on it.
"""

from __future__ import annotations

import itertools

from benchmarks.retrieval.run import KS, LIMIT, Score

SETTINGS = [
    *({"FUSION": "weighted", "LEXICAL_WEIGHT": w} for w in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)),
    *({"FUSION": "rrf", "RRF_K": k} for k in (5, 10, 60)),
    *({"FUSION": "weighted", "LEXICAL_WEIGHT": 0.3, "RECENCY_BOOST_MAX": r} for r in (0.05, 0.1)),
    *({"FUSION": "weighted", "LEXICAL_WEIGHT": 0.3, "PHEROMONE_BOOST_MAX": p} for p in (0.0, 0.1)),
]
SWEPT = ("FUSION", "LEXICAL_WEIGHT", "RRF_K", "RECENCY_BOOST_MAX", "PHEROMONE_BOOST_MAX")


def run(benches, questions) -> None:
    from brain import embedding, ranking
    from brain.selectors.search import thought_search

    if any(q.split != "dev" for q in questions):
        raise SystemExit("the sweep runs on the dev split only")
    vectors = dict(zip([q.id for q in questions], embedding.embed_many([q.question for q in questions]), strict=True))
    by_conversation = {b.conversation.id: b for b in benches}
    original = {name: getattr(ranking, name) for name in SWEPT}
    print(f"{'setting':56}  {'n':>4}  " + "  ".join(f"{'R@' + str(k):>5}" for k in KS) + f"  {'MRR':>5}  stale>evid")
    try:
        for setting in SETTINGS:
            for name, value in itertools.chain(original.items(), setting.items()):
                setattr(ranking, name, value)
            score = Score()
            for question in questions:
                bench = by_conversation[question.conversation]
                result = thought_search(
                    space=bench.space, vector=vectors[question.id], query_text=question.question, limit=LIMIT
                )
                turns = [bench.turn_of_thought.get(c.id, "?") for c in result.candidates]
                score.add(turns, question)
            label = ", ".join(f"{k}={v}" for k, v in setting.items())
            recalls = "  ".join(f"{score.recall(k):>5.1f}" for k in KS)
            print(f"{label:56}  {len(score.ranks):>4}  {recalls}  {score.mrr():>5.3f}  {score.stale_share()}")
    finally:
        for name, value in original.items():
            setattr(ranking, name, value)
