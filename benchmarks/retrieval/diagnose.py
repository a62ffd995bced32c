"""Dev only: the questions exact dense search answers in its top 10 and Colony's ranking does not.

    python -m benchmarks.retrieval.diagnose [--lexical-weight 0] [--correction-multiplier 1.0]

Ingests the dev conversations (one space each, through the real ``POST /api/v1/memory``), asks every
dev question through ``brain.selectors.search.thought_search`` (no reinforcement) and through exact
cosine over the space's stored vectors, and prints, for each question the dense side finds and
Colony misses, every evidence turn with its cosine, score and ranking reasons (lineage, flags,
boosts) and Colony's top 10 with theirs. The two options switch ranking constants off to isolate
the rest (both at their shipped values by default). Refuses the test split: nothing is read there.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lexical-weight", type=float, help="brain.ranking.LEXICAL_WEIGHT for this run")
    parser.add_argument("--correction-multiplier", type=float, help="brain.ranking.CORRECTION_MULTIPLIER")
    args = parser.parse_args(argv)

    from benchmarks.retrieval import run
    from benchmarks.retrieval.dataset import load

    dataset = load("dev")
    run.setup_database(fresh=True)
    from brain import embedding, ranking
    from brain.selectors.search import thought_search

    if args.lexical_weight is not None:
        ranking.LEXICAL_WEIGHT = args.lexical_weight
    if args.correction_multiplier is not None:
        ranking.CORRECTION_MULTIPLIER = args.correction_multiplier
    benches = run.ingest_split(dataset.conversations, split="dev", pooled=False)
    bench_of = {cid: bench for bench in benches for cid in bench.conversation_ids}
    baselines = {id(bench): run.Baselines(bench.space) for bench in benches}  # the harness's dense side
    missed = 0
    for question in dataset.questions:
        bench = bench_of[question.conversation]
        vector = embedding.embed(question.question)
        dense = [bench.turn_of_thought[i] for i in baselines[id(bench)].dense(vector)]
        found = thought_search(space=bench.space, vector=vector, query_text=question.question, limit=40).candidates
        colony = [bench.turn_of_thought.get(c.id, "?") for c in found[:10]]
        if not any(e in dense for e in question.evidence) or any(e in colony for e in question.evidence):
            continue
        missed += 1
        print(f"\n{question.id} {question.type}: {question.question}")
        for turn_id in question.evidence:
            candidate = next((c for c in found if bench.turn_of_thought.get(c.id) == turn_id), None)
            place = dense.index(turn_id) + 1 if turn_id in dense else None
            detail = (
                f"cosine {candidate.similarity:.3f}, score {candidate.score:.3f}, {candidate.reasons}"
                if candidate
                else "not among Colony's first 40"
            )
            print(f"  evidence {turn_id} (dense place {place}): {detail}\n    {dataset.turns[turn_id].text}")
        for candidate in found[:10]:
            turn_id = bench.turn_of_thought.get(candidate.id, "?")
            print(f"  top {turn_id} cosine {candidate.similarity:.3f} score {candidate.score:.3f} {candidate.reasons}")
    print(f"\n{missed} dev questions: in dense's top 10, not in Colony's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
