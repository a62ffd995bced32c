"""Dense places kept in the page: can fusion stop losing what the dense side alone finds? Dev only.

    python -m benchmarks.retrieval.protected            # standard protocol and pooled, dev split (~3 min)

On the test split Colony's recall@10 fell below dense-only's (benchmarks/retrieval/README.md): a
word a paraphrase shares with some other turn by chance lifts that turn over the answer. Fusion can
be kept from losing dense's best: after ``brain.ranking.rank``, the dense side's ``P`` best live
candidates (by cosine, not superseded, not retracted) are sure of a place in the page of 10, taking
the places of the lowest-ranked others; the page keeps the ranked order. Recall@10 is then
at least dense's recall@P over live thoughts, while the fused order still decides the first places
(R@1, MRR). ``P = 0`` is the shipped ranking.

Every dev question's candidates come from the one statement (``families.collect``), ranked with the
shipped constants; only the page's selection changes. Refuses the test split.
"""

from __future__ import annotations

import sys

from benchmarks.retrieval.families import dev_rows, print_header, print_row, tally
from benchmarks.retrieval.run import LIMIT

#: The numbers of kept dense places tried.
PROTECTED = (0, 1, 2, 3, 4, 5, 6, 7, 8)


def protect(ranked: list, *, places: int, limit: int = LIMIT) -> list:
    """The page of ``limit`` from ``ranked`` (every candidate ``brain.ranking.rank`` kept, best first)
    in which the dense side's ``places`` best live candidates are sure of a place, in ranked order."""
    from brain.choices import QualityFlag

    if places <= 0:
        return ranked[:limit]
    live = [
        c
        for c in ranked
        if c.similarity is not None
        and not c.thought.superseded
        and QualityFlag.RETRACTED not in (c.thought.quality_flags or [])
    ]
    kept = {c.id for c in sorted(live, key=lambda c: (-c.similarity, c.id))[:places]}
    page = ranked[:limit]
    for candidate in (c for c in ranked[limit:] if c.id in kept):
        # the lowest-ranked page entry that is not kept itself gives up its place
        for index in range(len(page) - 1, -1, -1):
            if page[index].id not in kept:
                del page[index]
                break
        page.append(candidate)
    position = {c.id: index for index, c in enumerate(ranked)}
    return sorted(page, key=lambda c: position[c.id])


def evaluate(rows, places: int):
    from brain import ranking

    return tally(rows, lambda fresh, _ctx: protect(ranking.rank(fresh), places=places))


def main() -> int:
    rows = dev_rows()
    print_header("kept dense places (dev)", 24)
    for places in PROTECTED:
        for protocol, protocol_rows in rows.items():
            print_row(str(places), protocol, *evaluate(protocol_rows, places), width=24)
    return 0


if __name__ == "__main__":
    sys.exit(main())
