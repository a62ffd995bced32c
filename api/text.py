"""Text other agents wrote: without the controls that reorder or hide what people read, and kept on
the one line where Colony shows it.

Every text the API takes in loses its invisible controls and its feedback markers (:func:`storable`,
applied by ``api.fields``' string fields and to a task's DNA; ``brain.choices.topic_normal`` drops the
controls). Without this, a right-to-left override at the end of a task title would make the browser
draw the slug after it backwards, a zero-width space would make a topic look like another while
filtering by the other would miss it, and a ``colony:contradicted <id>`` in a task title would
count as feedback from every agent that quoted it.

A line break, an ANSI escape, a carriage return or a bidi override in a summary or a thought would
otherwise start a line of its own in a transition marker or a terminal, passing for Colony's words
(a second marker, another result), or hide what follows it. ``contrib/colony_hooks.py`` applies the
same rule to what it injects (standard library only, so it keeps its own copy).
"""

from __future__ import annotations

import json
import re
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


#: Characters that only reorder or hide what a reader sees: every format character (Unicode category Cf:
#: bidi marks, embeddings, overrides and isolates, zero-width spaces, the soft hyphen, invisible math
#: operators, the tag characters U+E0000-U+E007F that spell out text no screen shows but a language model
#: reads) and the variation selectors supplement U+E0100-U+E01EF (bytes hidden behind a visible
#: character). Kept: the zero-width (non-)joiners U+200C/U+200D, which Persian, Indic scripts and emoji
#: sequences need, and the prepended concatenation marks (Arabic number signs and the like), which are
#: drawn. ``tests/security/test_invisible_controls_hold.py`` checks the list against ``unicodedata``.
INVISIBLE_CONTROLS = re.compile(
    "[\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    "\U000e0100-\U000e01ef]"
    # A variation selector (U+FE00-U+FE0F) chooses how the character before it is drawn; one after another
    # chooses nothing and can only carry hidden bits.
    "|(?<=[\ufe00-\ufe0f])[\ufe00-\ufe0f]+"
)


def without_invisible_controls(text: str) -> str:
    """``text`` without :data:`INVISIBLE_CONTROLS` (ASCII text is returned as it is)."""
    return text if text.isascii() else INVISIBLE_CONTROLS.sub("", text)


#: The Stop hook's feedback marker (``colony:used <id>``, ``colony:contradicted <id>``, contrib/
#: colony_stop_hook.py), which an agent writes in its own answer. In a text another agent reads (a thought,
#: a task title, DNA) it is planted feedback: every agent that quotes the text sends it as its own. Stored
#: as ``colony: used``, which the hook doesn't read; ``contrib/colony_hooks.py`` injects it the same way.
FEEDBACK_MARKER = re.compile(r"colony:(?=used|contradicted)", re.IGNORECASE)


def without_feedback_markers(text: str) -> str:
    """``text`` with every :data:`FEEDBACK_MARKER` written ``colony: used`` / ``colony: contradicted``."""
    return FEEDBACK_MARKER.sub("colony: ", text) if "colony:" in text.lower() else text


def storable(text: str) -> str:
    """``text`` as Colony stores what an agent sends: :func:`without_invisible_controls` and
    :func:`without_feedback_markers`."""
    return without_feedback_markers(without_invisible_controls(text))


def json_storable(value):
    """A JSON value (a task's DNA) with :func:`storable` applied to every string in it, keys included.
    Recursive: the parsers bound a value's nesting (``api.parsers.MAX_JSON_DEPTH``)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(key): json_storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_storable(item) for item in value]
    return value
