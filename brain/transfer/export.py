"""Colony's own export (``manage.py brain export FILE``): a header, then every thought (vectors
included), query-log row and correction suggestion of a space. Importing it into an empty space
gives back the same export, row for row."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from django.utils import timezone

from brain import embedding as embedder
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.selectors import activity
from brain.services import pheromones
from brain.transfer.serializers import ARRAY_REFS, FK_REFS, VALUE_FIELDS, VECTOR_FIELDS
from core.models import Space

EXPORT_FORMAT = "colony-export"
EXPORT_VERSION = 1


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, (dt.datetime, dt.date)) else value


def thought_export_row(
    thought: Thought, related: list[str], *, embeddings: bool = True, agent_names: dict[str, str] | None = None
) -> dict[str, Any]:
    """One thought's line. ``accessed_by`` (agents' ids, which mean nothing in another space) is written
    with each agent's name now (``agent_names``: ``activity.agent_names_by_id`` of the space, read here
    when not given); an import maps the names back to the ids of the target space's agents."""
    row: dict[str, Any] = {"kind": "thought", "id": str(thought.id)}
    row["agent"] = thought.agent.name if thought.agent_id else ""
    for name in VALUE_FIELDS:
        row[name] = _iso(getattr(thought, name))
    if agent_names is None:
        agent_names = activity.agent_names_by_id(space_id=thought.space_id, entries=thought.accessed_by)
    row["accessed_by"] = activity.accessed_by_named(thought.accessed_by, agent_names)
    for name in ARRAY_REFS:
        row[name] = [str(v) for v in getattr(thought, name)]
    for name in FK_REFS:
        value = getattr(thought, f"{name}_id")
        row[name] = str(value) if value else None
    row["related_thoughts"] = sorted(related)
    for name in VECTOR_FIELDS:
        vector = getattr(thought, name)
        row[name] = [float(v) for v in vector] if (embeddings and vector is not None) else None
    if not embeddings:
        row["embedding_model"] = ""
    return row


def space_export_counts(*, space: Space) -> dict[str, int]:
    return {
        "thoughts": Thought.objects.filter(space=space).count(),
        "query_logs": QueryLog.objects.filter(space=space).count(),
        "correction_suggestions": CorrectionSuggestion.objects.filter(space=space).count(),
    }


def space_export_rows(*, space: Space, embeddings: bool = True, chunk: int = 1000) -> Iterator[dict[str, Any]]:
    """Colony's own export, oldest first: header, thoughts, query logs, correction suggestions.

    The space's accesses not counted yet are folded first (``pheromones.reinforcement_fold_all``), so
    the thoughts written carry every access their query logs name, and the logs import as counted."""
    pheromones.reinforcement_fold_all(space=space)
    yield {
        "kind": "header",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "space": space.slug,
        "exported_at": timezone.now().isoformat(),
        "embedding_model": embedder.current_model_label(),
        "counts": space_export_counts(space=space),
    }
    through = Thought.related_thoughts.through
    agent_names = activity.agent_names_by_id(space_id=space.pk)
    thoughts = Thought.objects.filter(space=space).select_related("agent").order_by("created_at", "id")
    if not embeddings:
        thoughts = thoughts.defer("embedding", "corrected_fact_embedding")
    batch: list[Thought] = []

    def flush(batch: list[Thought]) -> Iterator[dict[str, Any]]:
        related: dict[Any, list[str]] = {}
        for a, b in through.objects.filter(from_thought_id__in=[t.id for t in batch]).values_list(
            "from_thought_id", "to_thought_id"
        ):
            related.setdefault(a, []).append(str(b))
        for thought in batch:
            yield thought_export_row(
                thought, related.get(thought.id, []), embeddings=embeddings, agent_names=agent_names
            )

    for thought in thoughts.iterator(chunk_size=chunk):
        batch.append(thought)
        if len(batch) >= chunk:
            yield from flush(batch)
            batch = []
    if batch:
        yield from flush(batch)
    for log in QueryLog.objects.filter(space=space).select_related("agent").order_by("created_at", "id").iterator():
        yield {
            "kind": "query_log",
            "agent": log.agent.name if log.agent_id else "",
            "agent_ref": log.agent_ref,
            "session_id": log.session_id,
            "query_text": log.query_text,
            "results": log.results,
            "stored_thought": str(log.stored_thought_id) if log.stored_thought_id else None,
            "created_at": log.created_at.isoformat(),
        }
    for s in CorrectionSuggestion.objects.filter(space=space).select_related("agent").order_by("created_at", "id"):
        yield {
            "kind": "correction_suggestion",
            "id": str(s.id),
            "thought": str(s.thought_id),
            "statement": s.statement,
            "contradicting_thought": str(s.contradicting_thought_id) if s.contradicting_thought_id else None,
            "draft": s.draft,
            "origin": s.origin,
            "confidence": s.confidence,
            "reason": s.reason,
            "agent": s.agent.name if s.agent_id else "",
            "session_id": s.session_id,
            "status": s.status,
            "created_at": s.created_at.isoformat(),
            "resolved_at": _iso(s.resolved_at),
            "resolved_by": s.resolved_by,
            "correction": str(s.correction_id) if s.correction_id else None,
        }
