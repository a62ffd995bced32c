"""Fit the calibrated relevance of brain/ranking.py on the dev rows of ``run.py --rows``.

    python -m benchmarks.retrieval.run --dataset both --split both --rows ROWS.jsonl
    python -m benchmarks.retrieval.calibrate ROWS.jsonl

A source's relevance is ``1 / (1 + exp(−z))`` with ``z`` a weighted sum of features the ranking has
at hand for every returned source (:func:`features`; the same as ``brain.ranking.relevance_features``).
The weights are a logistic regression fitted on the DEV rows of both datasets only (every returned
source of every question, no-answer prompts included: all of their sources are negatives); the test
rows are only scored. It prints the constants to paste into brain/ranking.py, a reliability table
(bins of predicted relevance against the observed share of evidence) for dev and for test, and the
injection trade-off per threshold: on the long-conversation set, silence on no-answer prompts (no
source of the top ``INJECT_K`` at or above the threshold) against answerable questions with an
evidence source injected, and the threshold the rule below picks on dev.

Rule for the injection threshold (fixed before looking at test): on longmem dev, the lowest threshold
whose silence is at least :data:`SILENCE_TARGET`; if none reaches it, the one maximising silence +
evidence injected.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from benchmarks.retrieval.run import INJECT_K, Injection
from brain import ranking

SILENCE_TARGET = 80.0
#: Printed in the trade-off table; the rule chooses among steps of 0.01.
THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 19)]
CHOICES = [round(0.01 * i, 2) for i in range(1, 100)]
NAMES = ("score", "similarity", "top_score", "log_position")


def features(source: dict, top_score: float) -> list[float]:
    return ranking.relevance_features(
        score=source["score"], similarity=source["cosine"] or 0.0, top_score=top_score, position=source["rank"]
    )


def matrix(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for row in rows:
        top = row["sources"][0]["score"] if row["sources"] else 0.0
        for source in row["sources"]:
            xs.append(features(source, top))
            ys.append(1 if source["evidence"] else 0)
    return np.array(xs, dtype=float), np.array(ys)


def predict(rows: list[dict], intercept: float, weights: list[float]) -> None:
    """Adds ``p`` to every source of ``rows``: brain.ranking.calibrated_relevance with these constants."""
    with _constants(intercept, weights):
        for row in rows:
            top = row["sources"][0]["score"] if row["sources"] else 0.0
            for source in row["sources"]:
                source["p"] = ranking.calibrated_relevance(features(source, top))


@contextmanager
def _constants(intercept: float, weights: list[float]):
    saved = ranking.RELEVANCE_INTERCEPT, ranking.RELEVANCE_WEIGHTS
    ranking.RELEVANCE_INTERCEPT, ranking.RELEVANCE_WEIGHTS = intercept, tuple(weights)
    try:
        yield
    finally:
        ranking.RELEVANCE_INTERCEPT, ranking.RELEVANCE_WEIGHTS = saved


def reliability(rows: list[dict], label: str) -> None:
    bins = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0001]
    print(f"\nreliability, {label}: predicted relevance vs observed share of evidence")
    print(f"{'bin':>11}  {'n':>5}  {'mean p':>6}  {'observed':>8}")
    for low, high in zip(bins, bins[1:], strict=False):
        inside = [s for r in rows for s in r["sources"] if low <= s["p"] < high]
        if inside:
            mean = sum(s["p"] for s in inside) / len(inside)
            seen = sum(s["evidence"] for s in inside) / len(inside)
            print(f"{low:>4.2f}-{min(high, 1.0):<5.2f}  {len(inside):>5}  {mean:>6.3f}  {seen:>8.3f}")


@dataclass(frozen=True)
class _Asked:
    """What :class:`run.Injection` reads of a question, from a row."""

    type: str
    evidence: tuple


def injection(rows: list[dict], threshold: float) -> tuple[float, float, float]:
    """(silence on no-answer prompts, evidence injected on answerable ones, mean sources injected), in %."""
    counted = Injection(threshold=threshold)
    for row in rows:
        turns = [source["turn_id"] for source in row["sources"]]
        counted.add(_Asked(row["type"], tuple(row["evidence"])), turns, [source["p"] for source in row["sources"]])
    return counted.mode_shares()


def choose(rows: list[dict]) -> float:
    curve = [(t, *injection(rows, t)) for t in CHOICES]
    reaching = [t for t, silence, _, _ in curve if silence >= SILENCE_TARGET]
    if reaching:
        return min(reaching)
    return max(curve, key=lambda point: (point[1] + point[2], -point[0]))[0]


def _part(rows: list[dict], dataset: str, split: str) -> list[dict]:
    return [r for r in rows if r["dataset"] == dataset and r["split"] == split]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", help="the JSON lines of run.py --rows (both datasets, both splits)")
    parser.add_argument("--current", action="store_true", help="score with brain/ranking.py's constants, fit nothing")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in open(args.rows, encoding="utf-8")]
    dev = [r for r in rows if r["split"] == "dev"]
    test = [r for r in rows if r["split"] == "test"]
    if args.current:
        intercept, weights = ranking.RELEVANCE_INTERCEPT, list(ranking.RELEVANCE_WEIGHTS)
    else:
        x, y = matrix(dev)
        model = LogisticRegression(C=10.0, max_iter=1000).fit(x, y)
        intercept, weights = float(model.intercept_[0]), [float(w) for w in model.coef_[0]]
    print(f"fitted on {len(dev)} dev questions ({sum(len(r['sources']) for r in dev)} sources)", file=sys.stderr)
    print(f"RELEVANCE_INTERCEPT = {intercept:.3f}")
    print("RELEVANCE_WEIGHTS = (" + ", ".join(f"{w:.3f}" for w in weights) + ")  # " + ", ".join(NAMES))
    predict(rows, intercept, weights)
    reliability(dev, "dev (both datasets)")
    reliability(test, "test (both datasets)")
    longmem = {split: _part(rows, "longmem", split) for split in ("dev", "test")}
    retrieval = {split: _part(rows, "retrieval", split) for split in ("dev", "test")}
    print(f"\ninjection trade-off (top {INJECT_K}, sources with relevance >= threshold), in %")
    print(f"{'threshold':>9}  {'longmem dev':>27}  {'longmem test':>27}  {'retrieval dev':>13}  {'retrieval test':>14}")
    print(
        f"{'':>9}  {'silence':>8} {'evidence':>8} {'mean n':>8}  {'silence':>8} {'evidence':>8} {'mean n':>8}  "
        f"{'evidence':>13}  {'evidence':>14}"
    )
    for t in THRESHOLDS:
        ld, lt = injection(longmem["dev"], t), injection(longmem["test"], t)
        rd, rt = injection(retrieval["dev"], t), injection(retrieval["test"], t)
        print(
            f"{t:>9.2f}  {ld[0]:>8.1f} {ld[1]:>8.1f} {ld[2]:>8.2f}  {lt[0]:>8.1f} {lt[1]:>8.1f} {lt[2]:>8.2f}  "
            f"{rd[1]:>13.1f}  {rt[1]:>14.1f}"
        )
    chosen = choose(longmem["dev"])
    print(
        f"\nINJECT_MIN_RELEVANCE = {chosen:.2f}  (rule: lowest threshold with longmem-dev silence >= "
        f"{SILENCE_TARGET:.0f}%, else max silence + evidence on longmem dev)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
