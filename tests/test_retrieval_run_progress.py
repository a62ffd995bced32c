"""The retrieval benchmark's ingestion progress: a bar redrawn in place on a terminal, a few whole lines in a log."""

import io

from benchmarks.retrieval import run


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _drive(monkeypatch, *, tty: bool, total: int) -> str:
    stream = _Stream(tty)
    monkeypatch.setattr(run.sys, "stderr", stream)
    show = run._progress_bar("c01")
    for done in range(1, total + 1):
        show(done, total)
    return stream.getvalue()


def test_a_log_gets_one_line_per_tenth_and_no_carriage_returns(monkeypatch):
    out = _drive(monkeypatch, tty=False, total=153)
    assert "\r" not in out
    lines = out.split("\n")[:-1]
    assert len(lines) == 10
    assert lines[-1].endswith("153/153 turns")
    assert lines[0].endswith("16/153 turns")  # the first tenth reached


def test_a_short_conversation_in_a_log_still_ends_with_its_total(monkeypatch):
    out = _drive(monkeypatch, tty=False, total=3)
    assert "\r" not in out
    lines = out.split("\n")[:-1]
    assert len(lines) == 3 and lines[-1].endswith("3/3 turns")


def test_a_terminal_gets_the_bar_redrawn_in_place(monkeypatch):
    out = _drive(monkeypatch, tty=True, total=20)
    assert out.count("\r") == 20
    assert out.endswith("20/20 turns\n") and out.count("\n") == 1
