"""The retrieval benchmark's metrics: recall@k, MRR and stale>evid over the ranks of evidence turns."""

from __future__ import annotations

from dataclasses import dataclass, field

KS = (1, 5, 10)
#: Every method returns its top LIMIT; MRR counts a first evidence turn within it.
LIMIT = 10


@dataclass
class Score:
    ranks: list[int | None] = field(default_factory=list)  # rank (1-based) of the first evidence hit
    stale_above: list[bool] = field(default_factory=list)

    def add(self, ranked_turns: list[str], question) -> None:
        evidence = [i for i, turn in enumerate(ranked_turns) if turn in question.evidence]
        first = evidence[0] + 1 if evidence else None
        self.ranks.append(first)
        if question.stale:
            stale = [i for i, turn in enumerate(ranked_turns) if turn in question.stale]
            self.stale_above.append(bool(stale) and (first is None or stale[0] + 1 < first))

    def recall(self, k: int) -> float:
        return 100.0 * sum(1 for r in self.ranks if r is not None and r <= k) / max(1, len(self.ranks))

    def mrr(self) -> float:
        return sum(1.0 / r for r in self.ranks if r is not None and r <= LIMIT) / max(1, len(self.ranks))

    def stale_share(self) -> str:
        if not self.stale_above:
            return "-"
        return f"{100.0 * sum(self.stale_above) / len(self.stale_above):.1f}"

    def as_dict(self) -> dict:
        return {
            "n": len(self.ranks),
            **{f"recall@{k}": round(self.recall(k), 1) for k in KS},
            "mrr": round(self.mrr(), 3),
            "stale_above_evidence": self.stale_share(),
        }
