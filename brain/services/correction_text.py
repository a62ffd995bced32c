"""How a correction words what it replaces (SPEC 2.5): the wrong fact a correction of a thought guards
against, and the text of a correction given none.

``POST /thoughts/{id}/correct`` (brain.services.corrections) and a correction suggestion's draft and
acceptance (brain.services.suggestions, which corrections imports) word a correction alike, so the
rules live here, below both.
"""

from __future__ import annotations

from brain.choices import ThoughtCategory
from brain.inputs import PROMPT_MAX_CHARS
from brain.models import Thought


def correction_default_content(*, corrected_fact: str, correct_fact: str) -> str:
    """The text of a correction when the caller gives none (seeds/000 2a example).

    At most PROMPT_MAX_CHARS, the longest text a thought takes: when the two facts don't fit, each keeps
    at least half of the room (a longer one takes what the other leaves) and is cut with "…". Both stay
    whole in their own fields."""
    wrong, right = corrected_fact.strip(), correct_fact.strip()
    room = PROMPT_MAX_CHARS - len("CORRECTION: It is wrong that  Correct: ")
    if len(wrong) + len(right) > room:
        wrong = _cut(wrong, max(room // 2, room - len(right)))
        right = _cut(right, room - len(wrong))
    return f"CORRECTION: It is wrong that {wrong} Correct: {right}"


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def correction_replaced_fact(thought: Thought) -> str:
    """The wrong fact a correction of ``thought`` guards against (its ``corrected_fact``): the thought's
    content, or for a correction the fact it said was correct (its whole text would guard against
    repeating the wrong and the right fact alike). ``/correct`` and an accepted suggestion use it."""
    return (thought.thought_category == ThoughtCategory.CORRECTION and thought.correct_fact) or thought.content
