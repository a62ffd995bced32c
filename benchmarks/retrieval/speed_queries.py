"""The speed issue's queries (benchmarks/compare.py) in process: does a fusion setting lose hit@10?

    python -m benchmarks.retrieval.speed_queries [--notes 2000] [--queries 300]

Loads ``--notes`` of benchmarks/compare.py's deterministic notes into one fresh space (database
``colony_speed_queries_bench``, re-created each run) through the real ``POST
/api/v1/thoughts/import``, then asks compare.py's ``--queries`` questions (each written for one
target note) through ``brain.selectors.search.thought_search`` (no reinforcement, so settings don't
bend each other) once per setting, and prints hit@10 and MRR of the target note for:

- dense: exact cosine of the stored vectors, the whole space (no index, no lexical side);
- each setting of brain/ranking.py's fusion constants listed in SETTINGS (the shipped one first).

A check, never used to choose a constant (the constants are chosen on the retrieval benchmark's dev
split). It needs no web server, unlike ``python -m benchmarks.compare``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

from benchmarks.compare import IMPORT_BATCH, notes, quality, queries

DATABASE = "colony_speed_queries_bench"
#: (label, constants set on brain.ranking); the shipped constants are restored afterwards.
SETTINGS = [
    ("Colony, shipped constants", {}),
    ("weighted 0.6, no RRF (before the blend)", {"RRF_SHARE": 0.0, "LEXICAL_WEIGHT": 0.6}),
    ("blend 0.75, k 1, lexical 0.4 (fp32 choice)", {"RRF_SHARE": 0.75, "RRF_K": 1, "LEXICAL_WEIGHT": 0.4}),
    ("blend 0.5, k 2, lexical 0.6", {"RRF_SHARE": 0.5, "RRF_K": 2, "LEXICAL_WEIGHT": 0.6}),
    ("blend 0.25, k 1, lexical 0.6", {"RRF_SHARE": 0.25, "RRF_K": 1, "LEXICAL_WEIGHT": 0.6}),
    ("Colony's multipliers on cosine alone", {"RRF_SHARE": 0.0, "LEXICAL_WEIGHT": 0.0}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args(argv)

    from core import embedded_db

    embedded_db.ensure_running()
    os.environ["BENCH_RETRIEVAL_DATABASE_URL"] = embedded_db.url(DATABASE)
    from benchmarks.retrieval.run import _client, _stored, setup_database

    setup_database(fresh=True)
    import numpy as np

    from brain import embedding, ranking
    from brain.selectors.search import thought_search
    from core.models import Space

    data, qs = notes(args.notes), queries(args.notes, args.queries)
    space = Space.objects.create(slug="bench-speed-queries", name="speed issue's notes")
    client = _client(space=space, name="bench-importer", role="dev")
    note_of: dict[str, int] = {}
    for start in range(0, len(data), IMPORT_BATCH):
        response = client.post("/api/v1/thoughts/import", data[start : start + IMPORT_BATCH], format="json")
        if response.status_code != 201:
            raise SystemExit(f"import answered {response.status_code}: {response.content[:500]!r}")
        for offset, thought_id in enumerate(response.json()["ids"]):
            note_of[thought_id] = start + offset
        print(f"  imported {len(note_of)}/{len(data)}", file=sys.stderr, flush=True)
    targets = [q["target"] for q in qs]
    vectors = embedding.embed_many([q["query"] for q in qs])

    ids, stored, _ = _stored(space)
    dense = []
    for vector in vectors:
        scores = stored @ np.asarray(vector, dtype=np.float64)
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:10]
        dense.append([note_of.get(ids[i], -1) for i in order])
    hit, mrr = quality(dense, targets)
    print(f"{'method (' + str(args.notes) + ' notes, ' + str(len(qs)) + ' queries)':52}  hit@10    MRR")
    print(f"{'dense (exact cosine)':52}  {100 * hit:5.1f}%  {mrr:.3f}")
    swept = sorted({name for _, constants in SETTINGS for name in constants})
    original = {name: getattr(ranking, name) for name in swept}
    try:
        for label, constants in SETTINGS:
            for name, value in itertools.chain(original.items(), constants.items()):
                setattr(ranking, name, value)
            ranked = []
            for q, vector in zip(qs, vectors, strict=True):
                result = thought_search(space=space, vector=vector, query_text=q["query"], limit=10)
                ranked.append([note_of.get(c.id, -1) for c in result.candidates])
            hit, mrr = quality(ranked, targets)
            print(f"{label:52}  {100 * hit:5.1f}%  {mrr:.3f}", flush=True)
    finally:
        for name, value in original.items():
            setattr(ranking, name, value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
