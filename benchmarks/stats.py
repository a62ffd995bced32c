"""The statistics every benchmark prints: nearest-rank percentiles and timed calls."""

from __future__ import annotations

import time
from collections.abc import Callable


def percentile(samples: list[float], share: float) -> float:
    """The sample at ``share`` (0.5 = p50, 0.95 = p95) of the sorted samples, nearest rank; 0.0 for none."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed(call: Callable[[int], object], n: int) -> list[float]:
    """Wall milliseconds of ``call(0)`` .. ``call(n - 1)``, one sample each."""
    samples = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def print_table(rows: list[tuple[str, str, list[float]]]) -> None:
    """One p50/p95/max table: ``[(benchmark, label, samples in ms), ...]``."""
    name_width = max(len("benchmark"), *(len(name) for name, _, _ in rows))
    width = max(len(label) for _, label, _ in rows)
    print(f"{'benchmark':{name_width}}  {'':{width}}  {'n':>5}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}")
    for name, label, samples in rows:
        print(
            f"{name:{name_width}}  {label:{width}}  {len(samples):>5}  {percentile(samples, 0.5):>8.1f}  "
            f"{percentile(samples, 0.95):>8.1f}  {max(samples):>8.1f}"
        )
