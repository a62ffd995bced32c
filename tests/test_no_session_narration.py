"""Code, tests and docs say what is true now; which work session measured or changed what belongs
in git history and closing notes.

The check looks for narration of *work* sessions: an ordinal with "session" ("the twenty-first
session", "3rd session"), and "this/earlier/previous/last session" used as a point in the project's
history. User and agent sessions (``session_id``, "this session's last memory call", "the agent's
earlier session") are the product's vocabulary and pass.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
    r"(?:thir|four|fif|six|seven|eigh|nine)teenth|(?:twen|thir|for|fif)tieth|"
    r"(?:twenty|thirty|forty|fifty)-(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)|"
    r"\d+(?:st|nd|rd|th))"
)
NARRATION = re.compile(
    rf"\b{ORDINAL}(?:\s+to\s+(?:the\s+)?{ORDINAL})?(?:'s)?\s+sessions?\b"
    r"|\b(?:this|earlier|previous|last|an earlier|a later|later) (?:work )?sessions?(?:'s)? "
    r"(?:run|runs|figures?|measured|measurement|printed|tried|built|found|fixed|changed|added|notes?|closing)\b"
    r"|\b(?:since|until|before) (?:this|an earlier|the previous|the last|earlier) sessions?\b"
    r"|\bsessions? (?:ago|before this one)\b",
    re.IGNORECASE,
)
SCANNED_SUFFIXES = {".py", ".md", ".html", ".txt", ".toml", ".cfg", ".sh", ""}
SKIPPED = {"tests/test_no_session_narration.py"}


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [
        ROOT / name
        for name in names
        if name not in SKIPPED and Path(name).suffix in SCANNED_SUFFIXES and "/data/" not in name
    ]


def narration_in(text: str) -> list[tuple[int, str]]:
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in NARRATION.finditer(text)]


def test_the_pattern_tells_work_sessions_from_agent_sessions():
    assert narration_in("measured in the twenty-first session")
    assert narration_in("the 3rd session's figures")
    assert narration_in('("Forty-sixth\n    session")')
    assert narration_in("since this session the harness embeds each question alone")
    assert narration_in("this session's run printed the same rows")
    assert narration_in("an earlier session found it")
    assert not narration_in("the sources of this session's last memory call")
    assert not narration_in("suggestions addressed to this agent or this session")
    assert not narration_in("a turn's session_id belongs to the agent that first used it")
    assert not narration_in("thoughts this session was shown earlier")
    assert not narration_in("a memory call of this agent in this session returned")


def test_code_tests_and_docs_do_not_narrate_work_sessions():
    found = []
    for path in tracked_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {words!r}" for line, words in narration_in(text)]
    assert not found, "history belongs in git, not in the tree:\n" + "\n".join(found[:60])
