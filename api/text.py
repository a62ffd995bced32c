"""Text other agents wrote: without the controls that reorder or hide what people read, and kept on
the one line where Colony shows it.

Every text the API takes in loses its invisible controls (:func:`without_invisible_controls`, applied
by ``api.fields``' string fields and by ``brain.choices.topic_normal``): a right-to-left override at the
end of a task title made the browser draw the slug after it backwards, and a zero-width space made a
topic look like another while filtering by it missed it.

A line break, an ANSI escape, a carriage return or a bidi override in a summary or a thought would
otherwise start a line of its own in a transition marker or a terminal, passing for Colony's words
(a second marker, another result), or hide what follows it. ``contrib/colony_hooks.py`` applies the
same rule to what it injects (standard library only, so it keeps its own copy).
"""

from __future__ import annotations

import json
import unicodedata


def _breaking(char: str) -> bool:
    """A control, format, line- or paragraph-separator character (Unicode categories C*, Zl, Zp)."""
    category = unicodedata.category(char)
    return category[0] == "C" or category in ("Zl", "Zp")


def one_line(text: str) -> str:
    """``text`` with every such character and every run of whitespace turned into one space."""
    return " ".join("".join(" " if _breaking(c) else c for c in text).split())


def quoted(text: str) -> str:
    """``text`` as Colony quotes another's words inside its own sentences (guidance, an answer's
    sentence): on one line (:func:`one_line`), in double quotes, its own quotes and backslashes escaped
    (JSON's string syntax), so it can neither close Colony's quote nor start a line that reads as
    Colony's. ``contrib/colony_hooks.py`` quotes what it injects the same way."""
    return json.dumps(one_line(text), ensure_ascii=False)


#: Characters that only reorder or hide what a reader sees: the bidi embeddings, overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069), the zero-width space, the word joiner and the zero-width no-break
#: space (U+200B, U+2060, U+FEFF). The zero-width (non-)joiners U+200C/U+200D stay: Persian, Indic scripts
#: and emoji sequences need them.
INVISIBLE_CONTROLS = dict.fromkeys(map(ord, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u2060\ufeff"))


def without_invisible_controls(text: str) -> str:
    """``text`` without :data:`INVISIBLE_CONTROLS` (ASCII text is returned as it is)."""
    return text if text.isascii() else text.translate(INVISIBLE_CONTROLS)


def json_without_invisible_controls(value):
    """A JSON value (a task's DNA) with :func:`without_invisible_controls` applied to every string in it,
    keys included. Recursive: the parsers bound a value's nesting (``api.parsers.MAX_JSON_DEPTH``)."""
    if isinstance(value, str):
        return without_invisible_controls(value)
    if isinstance(value, dict):
        return {without_invisible_controls(key): json_without_invisible_controls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_without_invisible_controls(item) for item in value]
    return value
