"""Pending correction suggestions (SPEC 2.5, 4.5): something contradicts a stored thought.

Two producers raise them — the brain's contradiction detector (a new thought vs existing facts) and
the quality loop's judge (an agent's response contradicted an injected thought) — and both go
through :func:`suggestion_create`, so a thought gets one pending suggestion per contradicting
statement however often it is raised.
"""

from __future__ import annotations

from django.db import transaction

from brain.choices import SuggestionStatus, ThoughtCategory
from brain.models import CorrectionSuggestion, Thought
from core.models import Agent


def suggestion_draft(*, thought: Thought, statement: str) -> dict:
    """The memory-endpoint payload of the correction that accepting the suggestion would create."""
    return {
        "prompt": f"CORRECTION: {statement}",
        "thought_category": ThoughtCategory.CORRECTION.value,
        "topic": thought.topic or "general",
        "corrected_fact": thought.content,
        "correct_fact": statement,
        "supersedes": [str(thought.id)],
    }


@transaction.atomic
def suggestion_create(
    *,
    thought: Thought,
    statement: str,
    origin: str,
    confidence: float = 0.0,
    reason: str = "",
    agent: Agent | None = None,
    session_id: str = "",
    contradicting_thought: Thought | None = None,
) -> tuple[CorrectionSuggestion, bool]:
    """Raise a pending suggestion; returns (suggestion, created). An identical pending one is reused."""
    # Lock the thought row so two workers raising the same contradiction don't both insert.
    Thought.objects.select_for_update().filter(pk=thought.pk).first()
    existing = CorrectionSuggestion.objects.filter(
        thought=thought, statement=statement, status=SuggestionStatus.PENDING
    ).first()
    if existing is not None:
        return existing, False
    suggestion = CorrectionSuggestion.objects.create(
        space_id=thought.space_id,
        thought=thought,
        statement=statement,
        contradicting_thought=contradicting_thought,
        draft=suggestion_draft(thought=thought, statement=statement),
        origin=origin,
        confidence=confidence,
        reason=reason,
        agent=agent,
        session_id=session_id,
    )
    return suggestion, True
