"""Text other agents wrote, kept on the one line where Colony shows it.

A line break, an ANSI escape, a carriage return or a bidi override in a summary or a thought would
otherwise start a line of its own in a transition marker or a terminal, passing for Colony's words
(a second marker, another result), or hide what follows it. ``contrib/colony_hooks.py`` applies the
same rule to what it injects (standard library only, so it keeps its own copy).
"""

from __future__ import annotations

import unicodedata


def _breaking(char: str) -> bool:
    """A control, format, line- or paragraph-separator character (Unicode categories C*, Zl, Zp)."""
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


def one_line(text: str) -> str:
    """``text`` with every such character and every run of whitespace turned into one space."""
    return " ".join("".join(" " if _breaking(c) else c for c in text).split())
