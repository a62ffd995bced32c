"""benchmarks/soak.py's verdict on its targets (a pure function over the run's figures)."""

from __future__ import annotations

from benchmarks.soak import targets_report


def _report(**overrides) -> str:
    figures = {
        "latencies": {"search": [20.0] * 95 + [80.0] * 5, "contribute": [40.0] * 100},
        "fivexx": 0,
        "unexpected": 0,
        "asked_rate": 50.0,
        "achieved_rate": 55.5,
        "machine_percent": 133.0,
        "cores": 2,
    }
    return "\n".join(targets_report(**(figures | overrides)))


def test_a_run_within_every_target_says_so_and_warns_of_nothing():
    report = _report()
    assert "NOT met" not in report and report.count("met ") == 4
    assert "saturated" not in report


def test_each_missed_target_is_named_with_its_figure():
    report = _report(
        latencies={"search": [20.0] * 100, "contribute": [40.0] * 90 + [140.0] * 10},
        fivexx=2,
        unexpected=1,
        asked_rate=40.0,
    )
    assert "NOT met  rate >= 50 requests/s (asked 40, answered 55.5/s)" in report
    assert "NOT met  p95 < 100 ms for every operation (over: contribute 140 ms)" in report
    assert "NOT met  zero 5xx outside the faults (2)" in report
    assert "NOT met  zero unexpected errors (1)" in report


def test_a_saturated_machine_is_pointed_out():
    report = _report(machine_percent=197.0, achieved_rate=43.4)
    assert "NOT met  rate >= 50 requests/s (asked 50, answered 43.4/s)" in report  # asked is not enough
    assert "saturated (the whole machine at 197% of 200%, 43.4 of 50 responses/s)" in report
    assert "run it at a lower --rate" in report


def test_with_faults_the_latency_target_is_not_judged():
    """Requests wait out the outages, so neither their latency nor the rate reached says anything."""
    report = _report(latencies={"search": [3000.0] * 100}, achieved_rate=25.8, machine_percent=157.0, faults=True)
    assert "not judged (faults injected)  p95 < 100 ms" in report
    assert "not judged (faults injected)  rate >= 50 requests/s" in report
    assert "saturated" not in report
