"""Lineage walks (seeds/001 4.4): ancestors through ``source_ids``, descendants through the GIN index.

Each level is one query, a visited set makes the walk safe against cycles (which normal operations
can't create, but an admin edit could), and nothing crosses the thought's space.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from brain.choices import ThoughtType
from brain.models import Thought
from core.errors import NotFound
from core.models import Space

DEFAULT_MAX_DEPTH = 10
MAX_MAX_DEPTH = 100
PREVIEW_CHARS = 80


def thought_get(*, space: Space, thought_id: str | uuid.UUID) -> Thought:
    """One thought of ``space``; unknown, malformed and other-space ids are all THOUGHT_NOT_FOUND."""
    try:
        key = uuid.UUID(str(thought_id))
    except ValueError:
        raise NotFound(f"No thought {thought_id!r}: not a thought id (UUID).", code="THOUGHT_NOT_FOUND") from None
    thought = (
        Thought.objects.filter(space=space, pk=key)
        .select_related("agent", "superseded_by", "refined_by", "contradicted_by")
        .first()
    )
    if thought is None:
        raise NotFound(f"No thought {key} in this space.", code="THOUGHT_NOT_FOUND")
    return thought


def _node(thought: Thought, depth: int) -> dict:
    return {
        "thought_id": str(thought.id),
        "thought_type": thought.thought_type,
        "content_preview": thought.content[:PREVIEW_CHARS],
        "contributor": thought.contributor_name,
        "created_at": thought.created_at.isoformat(),
        "source_ids": [str(i) for i in thought.source_ids],
        "depth": depth,
        "superseded": thought.superseded,
        "refined_by": str(thought.refined_by_id) if thought.refined_by_id else None,
    }


def _fields():
    return ("id", "thought_type", "content", "contributor_name", "created_at", "source_ids", "superseded", "refined_by")


def _parents(space: Space, frontier: Iterable[Thought], seen: set) -> list[Thought]:
    ids = {source for thought in frontier for source in thought.source_ids} - seen
    if not ids:
        return []
    return list(Thought.objects.filter(space=space, id__in=ids).only(*_fields()).order_by("created_at"))


def _children(space: Space, frontier: Iterable[Thought], seen: set) -> list[Thought]:
    ids = [thought.id for thought in frontier]
    if not ids:
        return []
    return list(
        Thought.objects.filter(space=space, source_ids__overlap=ids)
        .exclude(id__in=seen)
        .only(*_fields())
        .order_by("created_at")
    )


def _walk(space: Space, root: Thought, max_depth: int, step, sign: int, seen: set) -> tuple[list[dict], bool]:
    nodes: list[dict] = []
    frontier = [root]
    for depth in range(1, max_depth + 1):
        frontier = step(space, frontier, seen)
        if not frontier:
            return nodes, False
        for thought in frontier:
            seen.add(thought.id)
            nodes.append(_node(thought, sign * depth))
    # The depth cap was reached: is there more beyond it?
    return nodes, bool(frontier) and bool(step(space, frontier, seen))


def thought_lineage(*, space: Space, thought_id: str | uuid.UUID, max_depth: int = DEFAULT_MAX_DEPTH) -> dict:
    """The chain around one thought: ancestors (negative depth), itself (0), descendants (positive).

    ``truncated`` says that the chain goes on beyond ``max_depth`` in at least one direction.
    """
    root = thought_get(space=space, thought_id=thought_id)
    seen = {root.id}
    ancestors, up_truncated = _walk(space, root, max_depth, _parents, -1, seen)
    descendants, down_truncated = _walk(space, root, max_depth, _children, 1, seen)
    chain = sorted([*ancestors, _node(root, 0), *descendants], key=lambda n: (n["depth"], n["created_at"]))
    return {"thought_id": str(root.id), "chain": chain, "truncated": up_truncated or down_truncated}


def lineage_summary(*, space: Space, thought: Thought) -> dict | None:
    """trace.lineage_summary (seeds/001): None when the thought has neither ancestors nor descendants."""
    lineage = thought_lineage(space=space, thought_id=thought.id)
    chain = lineage["chain"]
    if len(chain) < 2:
        return None
    deepest = min(chain, key=lambda n: (n["depth"], n["created_at"]))
    iterations = [n for n in chain if n["thought_type"] in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION)]
    latest = max(iterations, key=lambda n: n["created_at"]) if iterations else None
    return {
        "thought_id": str(thought.id),
        "has_lineage": True,
        "chain_length": len(chain),
        "deepest_ancestor": deepest["thought_id"],
        "latest_refinement": latest["thought_id"] if latest else None,
        "truncated": lineage["truncated"],
    }
