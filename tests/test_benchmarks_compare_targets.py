"""bench-compare's verdicts: the speed targets for the run's size, judged on its figures;
and its ``--samples`` file."""

from __future__ import annotations

import json
import math

from benchmarks.compare import speed_target_checks, write_samples

NAN = float("nan")


def verdicts(n_notes, colony, mem0=None, contribute=(15.0,)):
    return dict(speed_target_checks(n_notes, colony_row=colony, mem0_row=mem0, contribute_ms=list(contribute)))


def test_at_10k_every_latency_target_is_judged():
    colony = ("Colony", 12.9, 15.3, 16.4, 551.0, 0.773, 0.426)
    mem0 = ("Mem0", 13.7, 15.6, 18.1, 73.0, 0.773, 0.404)
    assert verdicts(10_000, colony, mem0) == {
        "retrieve p50 <= 8 ms": False,
        "retrieve p95 <= 20 ms": True,
        "import >= 300 notes/s": True,
        "contribute+retrieve p50 <= 20 ms": True,
        "retrieve p50 at least 2x faster than Mem0": False,
        "import at least 6x Mem0's add rate": True,
    }


def test_at_100k_only_the_targets_the_issue_sets_there():
    # The issue sets p50 <= 12 ms at 100k; its p95 and contribute targets are for 10k (the label used
    # to say "(10k)" in a 100k run's report).
    colony = ("Colony", 11.7, 25.0, 30.0, 481.0, 0.28, 0.077)
    mem0 = ("Mem0", 15.8, 20.2, 23.3, 69.0, 0.237, 0.077)
    assert verdicts(100_000, colony, mem0, contribute=(30.0,)) == {
        "retrieve p50 <= 12 ms": True,
        "import >= 300 notes/s": True,
        "retrieve p50 at least 2x faster than Mem0": False,
        "import at least 6x Mem0's add rate": True,
    }


def test_a_reuse_run_judges_no_rate():
    colony = ("Colony", 13.0, 15.2, 15.8, NAN, 0.773, 0.43)
    mem0 = ("Mem0", 13.3, 15.6, 16.4, NAN, 0.773, 0.404)
    got = verdicts(10_000, colony, mem0)
    assert got["import >= 300 notes/s"] is None and got["import at least 6x Mem0's add rate"] is None
    assert math.isnan(colony[4])


def test_the_samples_file_keeps_every_call_in_the_order_asked(tmp_path):
    qs = [{"query": "first?", "target": 3}, {"query": "second?", "target": 7}]
    colony = {"search_ms": [9.5, 10.25], "contribute_ms": [12.0]}
    path = tmp_path / "samples.json"
    write_samples(path, qs, colony, {"search_ms": [11.0, 25.5]})
    assert json.loads(path.read_text()) == {
        "queries": ["first?", "second?"],
        "colony_ms": [9.5, 10.25],
        "mem0_ms": [11.0, 25.5],
        "contribute_ms": [12.0],
    }
    write_samples(path, qs, colony, None)  # --skip-mem0
    assert json.loads(path.read_text())["mem0_ms"] is None
