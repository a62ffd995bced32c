"""benchmarks/idle_gap.py's loop: blocks rotate over the conditions, each call of a block follows its
condition, and a back-to-back block's first calls (which follow another condition) are not counted."""

from benchmarks.idle_gap import BACK_TO_BACK, WARM_CALLS_SKIPPED, measure


def test_blocks_rotate_and_each_call_follows_its_own_condition():
    events: list[str] = []

    def ask(text: str) -> float:
        events.append(f"ask {text}")
        return float(len(events))

    before = {
        BACK_TO_BACK: None,
        "idle": lambda position: events.append(f"idle {position}"),
        "other": lambda position: events.append(f"other {position}"),
    }
    out = measure(ask, ["a", "b", "c", "d"], before, blocks=6, block=4)

    assert [len(v) for v in out.values()] == [2 * (4 - WARM_CALLS_SKIPPED), 8, 8]
    # Block 1 (positions 4-7) is "idle": every call right after its own sleep; texts wrap with a suffix.
    assert events[4:12] == ["idle 4", "ask a (1)", "idle 5", "ask b (1)", "idle 6", "ask c (1)", "idle 7", "ask d (1)"]
    # Block 3 (12-15) is back to back again: nothing between its calls.
    assert events[20:24] == ["ask a (3)", "ask b (3)", "ask c (3)", "ask d (3)"]
    # The back-to-back samples are the calls after the first two of their blocks.
    assert out[BACK_TO_BACK] == [3.0, 4.0, 23.0, 24.0]
