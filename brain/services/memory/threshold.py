"""The contribution threshold (SPEC 2.2): is a prompt knowledge worth storing?

``step_threshold`` (:mod:`brain.services.memory.steps`) applies it; refines, consolidates and a
correction bypass it.
"""

from __future__ import annotations

import re

MIN_CONTRIBUTION_CHARS = 50  # a contribution is longer than this, trimmed
LONE_QUESTION = re.compile(r"^[^.!]*\?$")
FOLLOW_UP_PREFIXES = ("based on", "you said", "you told me", "regarding your", "about your response")


def contribution_threshold_met(prompt: str) -> bool:
    """Whether a prompt is knowledge worth storing rather than a question or a follow-up.

    Longer than 50 characters once trimmed, not a lone question (``^[^.!]*\\?$``: one sentence
    ending in "?"), and not a follow-up to an earlier answer ("based on", "you said", ...).
    """
    text = prompt.strip()
    if len(text) <= MIN_CONTRIBUTION_CHARS:
        return False
    if LONE_QUESTION.match(text):
        return False
    return not text.lower().startswith(FOLLOW_UP_PREFIXES)
