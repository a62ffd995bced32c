"""The dev-only kept-dense-places script: which candidates are sure of a place in the page."""

from types import SimpleNamespace

from benchmarks.retrieval.protected import protect


def _candidate(name: str, similarity: float | None, *, superseded: bool = False, flags=()):
    return SimpleNamespace(
        id=name, similarity=similarity, thought=SimpleNamespace(superseded=superseded, quality_flags=list(flags))
    )


def test_the_dense_sides_best_live_candidates_replace_the_lowest_ranked_others():
    a, b, c, d, e = (_candidate(n, s) for n, s in zip("abcde", (0.1, 0.2, 0.3, 0.9, 0.8), strict=True))
    ranked = [a, b, c, d, e]  # fusion's order: d and e (dense's best) fell below the page of 3
    assert [x.id for x in protect(ranked, places=0, limit=3)] == ["a", "b", "c"]
    assert [x.id for x in protect(ranked, places=1, limit=3)] == ["a", "b", "d"]
    assert [x.id for x in protect(ranked, places=2, limit=3)] == ["a", "d", "e"]


def test_superseded_retracted_and_pending_candidates_are_never_kept():
    a, b = _candidate("a", 0.1), _candidate("b", 0.2)
    old = _candidate("old", 0.99, superseded=True)
    gone = _candidate("gone", 0.98, flags=["retracted"])
    pending = _candidate("pending", None)
    ranked = [a, b, old, gone, pending]
    assert [x.id for x in protect(ranked, places=3, limit=2)] == ["a", "b"]
