"""benchmarks/memory_profile.py's phases are exclusive: a phase that runs inside another (the query is
embedded inside the search's _fetch) is counted once, in the inner phase."""

import collections
import sys
import time
import types

from benchmarks.memory_profile import _wrap


def _burn(units: int) -> None:
    total = 0
    for i in range(units * 200_000):
        total += i


def test_an_inner_phase_is_taken_out_of_the_outer_one():
    module = types.ModuleType("profiled_for_test")
    module.inner = lambda: _burn(2)
    module.outer = lambda: (_burn(1), module.inner())
    sys.modules[module.__name__] = module
    try:
        spent: dict[str, float] = collections.defaultdict(float)
        nested: list[float] = []
        _wrap(spent, module.__name__, "inner", "inner", nested)
        _wrap(spent, module.__name__, "outer", "outer", nested)
        started = time.thread_time()
        for _ in range(3):
            module.outer()
        total = time.thread_time() - started
    finally:
        del sys.modules[module.__name__]
    assert nested == []
    # outer's own work is half of inner's; without the subtraction outer would count 1.5x inner
    assert 0.3 < spent["outer"] / spent["inner"] < 0.8
    assert abs(spent["outer"] + spent["inner"] - total) < 0.2 * total
