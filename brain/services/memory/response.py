"""The memory endpoint's wire response (the seed brain's format), rendered from a finished call."""

from __future__ import annotations

from typing import Any

from api.text import quoted
from brain.choices import ThoughtType
from brain.ranking import Candidate
from brain.selectors.lineage import PREVIEW_CHARS
from brain.services.memory.call import MemoryCall

#: How much of the best source's text the response sentence quotes.
BEST_QUOTE_CHARS = 200


def source_render(candidate: Candidate) -> dict[str, Any]:
    thought = candidate.thought
    return {
        "thought_id": candidate.id,
        "contributor": thought.contributor,  # the agent's name now (read with the candidates)
        "score": round(candidate.score, 4),
        "relevance": round(candidate.probability, 4),
        "content_preview": thought.content[:PREVIEW_CHARS],
        "refined_by": str(thought.refined_by_id) if thought.refined_by_id else None,
        "superseded": thought.superseded,
        "thought_category": thought.thought_category,
        "topic": thought.topic,
        "temporal_scope": thought.temporal_scope.isoformat() if thought.temporal_scope else None,
        "quality_flags": list(thought.quality_flags or []),
        "matching_reason": candidate.matching_reason,
        "effective_confidence": thought.effective_confidence,
    }


def _response_text(call: MemoryCall) -> str:
    parts = []
    if call.thought is not None and call.superseded_count is not None:
        noun = "thought" if call.superseded_count == 1 else "thoughts"
        parts.append(f"Stored your correction as {call.thought.id}; it supersedes {call.superseded_count} {noun}.")
    elif call.thought is not None:
        kind = {ThoughtType.ORIGINAL: "thought"}.get(call.thought_type, call.thought_type)
        parts.append(f"Stored your {kind} as {call.thought.id}.")
    elif call.known_id is not None:
        parts.append(f"Already known as {call.known_id}: nothing new was stored; that thought was reinforced.")
    if call.sources:
        top = call.sources[0]
        parts.append(
            f"Found {len(call.sources)} relevant thought(s). Best ({top.score:.2f}, "
            f"{top.thought.contributor}): {quoted(top.thought.content[:BEST_QUOTE_CHARS])}"
        )
    else:
        parts.append("No relevant thoughts found in the brain yet.")
    return " ".join(parts)


def _str_or_none(value) -> str | None:
    return None if value is None else str(value)


def memory_render(call: MemoryCall) -> dict[str, Any]:
    return {
        "result": {
            "response": _response_text(call),
            "sources": [source_render(candidate) for candidate in call.sources],
            "highways_nearby": call.highways,
            "disambiguation": call.disambiguation,
            "guidance": "\n".join(call.guidance) if call.guidance else None,
            "pending_corrections": call.pending_corrections,
        },
        "trace": {
            "session_id": call.session_id,
            "operations": call.operations,
            "thoughts_retrieved": len(call.sources),
            "thoughts_contributed": 1 if call.thought is not None else 0,
            "contribution_threshold_met": call.threshold_met,
            "context_used": bool(call.request.get("context")),
            "retrieval_method": call.search.method if call.search else None,
            # The thought this call stored, or the live one that already says the same (already_known).
            "thought_id": str(call.thought.id) if call.thought is not None else _str_or_none(call.known_id),
            "already_known": call.known_id is not None,
            "lineage_summary": call.lineage_summary,
        },
    }
