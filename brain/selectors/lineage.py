"""Lineage walks (seeds/001 4.4): ancestors through ``source_ids``, descendants through the GIN index.

Each direction is walked level by level (one query per level), down to one level below ``max_depth``.
A thought already reached is not walked again, so a cycle or a dense lattice of consolidations costs
one visit per thought, and the walk stops once it holds more than a lineage shows: each thought is
kept at its smallest depth. Nothing crosses the thought's space. A lineage holds at most
``LINEAGE_NODES_MAX`` thoughts besides the root, the nearest first (``truncated`` says when more were
left out): agents can build a lattice of consolidations of any width, and a memory call summarises its
best source's lineage every time.
"""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, F, Q
from django.db.models.functions import Left

from api.errors import NotFound
from api.paging import newest
from brain.choices import ThoughtCategory, ThoughtType
from brain.models import Thought, thought_defer_bulky
from brain.selectors import activity
from core.models import Space

DEFAULT_MAX_DEPTH = 10
MAX_MAX_DEPTH = 100
PREVIEW_CHARS = 80
#: Thoughts of one lineage besides its root, at most.
LINEAGE_NODES_MAX = 200
#: A thought's detail lists its newest related thoughts and corrections up to these (agents add links and
#: corrections without end); ``related_thoughts_count`` and ``corrected_by_count`` count them all.
DETAIL_RELATED_MAX = 200
DETAIL_CORRECTIONS_MAX = 20


def thought_get(*, space: Space, thought_id: str | uuid.UUID) -> Thought:
    """One thought of ``space``; unknown, malformed and other-space ids are all THOUGHT_NOT_FOUND."""
    try:
        key = uuid.UUID(str(thought_id))
    except ValueError:
        raise NotFound(f"No thought {thought_id!r}: not a thought id (UUID).", code="THOUGHT_NOT_FOUND") from None
    thought = (
        Thought.objects.filter(space=space, pk=key)
        .select_related("agent", "superseded_by", "refined_by", "contradicted_by")
        .defer(*thought_defer_bulky("", "superseded_by", "refined_by", "contradicted_by"))
        .annotate(has_embedding=ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField()))
        .first()
    )
    if thought is None:
        raise NotFound(f"No thought {key} in this space.", code="THOUGHT_NOT_FOUND")
    return thought


def thought_detail(*, space: Space, thought_id: str | uuid.UUID) -> Thought:
    """One thought (as :func:`thought_get`) with its correction history attached, for the thought page.

    ``related_thoughts``: the newest DETAIL_RELATED_MAX. ``corrected_by``: the newest
    DETAIL_CORRECTIONS_MAX corrections of the space that name it in ``supersedes`` (``superseded_by``
    holds only the latest one); both counted whole. ``corrects``: for a correction, the thoughts it
    superseded, with where each one stands now (a later correction may have taken over).
    """
    thought = thought_get(space=space, thought_id=thought_id)
    # The response lists related thoughts by id: read only their ids (not every column and vector).
    links = Thought.related_thoughts.through.objects.filter(from_thought_id=thought.pk)
    related = newest(
        links.order_by("-to_thought__created_at", "-to_thought_id").values_list("to_thought_id", flat=True),
        DETAIL_RELATED_MAX,
    )
    thought.related_ids, thought.related_thoughts_count = related.items, related.total
    corrections = newest(
        Thought.objects.filter(
            space=space, thought_category=ThoughtCategory.CORRECTION, supersedes__contains=[thought.id]
        )
        .only("id", "correct_fact", "corrected_fact", "agent_id", "contributor_name", "created_at")
        .annotate(agent_name=F("agent__name"))  # Thought.contributor: the agent's name now
        .order_by("-created_at", "-id"),
        DETAIL_CORRECTIONS_MAX,
    )
    thought.corrected_by, thought.corrected_by_count = corrections.items, corrections.total
    # accessed_by holds agents' ids: shown by the names they have now.
    names = activity.agent_names_by_id(space_id=space.pk, entries=thought.accessed_by) if thought.accessed_by else {}
    thought.accessed_by_names = activity.accessed_by_named(thought.accessed_by, names)
    thought.corrects = []
    if thought.thought_category == ThoughtCategory.CORRECTION and thought.supersedes:
        by_id = {
            t.id: t
            for t in Thought.objects.filter(space=space, id__in=thought.supersedes).only(
                "id", "content", "superseded", "superseded_by"
            )
        }
        thought.corrects = [by_id[i] for i in thought.supersedes if i in by_id]
    return thought


def _node(thought: Thought, depth: int) -> dict:
    preview = thought.__dict__.get("preview")  # rows of a walk carry only the preview of their content
    return {
        "thought_id": str(thought.id),
        "thought_type": thought.thought_type,
        "content_preview": preview if preview is not None else thought.content[:PREVIEW_CHARS],
        "contributor": thought.contributor,
        "created_at": thought.created_at.isoformat(),
        "source_ids": [str(i) for i in thought.source_ids],
        "depth": depth,
        "superseded": thought.superseded,
        "refined_by": str(thought.refined_by_id) if thought.refined_by_id else None,
    }


_PARENTS_SQL = """
SELECT DISTINCT unnest(source_ids) AS id FROM brain_thought WHERE space_id = %(space)s AND id = ANY(%(level)s::uuid[])
"""
_CHILDREN_SQL = """
SELECT id FROM brain_thought WHERE space_id = %(space)s AND source_ids && %(level)s::uuid[]
"""


def _depths(sql: str, *, space: Space, root: uuid.UUID, max_depth: int) -> dict[uuid.UUID, int]:
    """{thought id: smallest distance from the root}, the root left out, including the level just below
    the cap; the nearest LINEAGE_NODES_MAX + 1 (one more than a lineage holds: enough to know it was
    cut), ties broken by id. ``sql`` gives the next level's ids from one level's (``level``)."""
    found: dict[uuid.UUID, int] = {}
    level, depth = [root], 0
    with connection.cursor() as cursor:
        while level and depth <= max_depth and len(found) <= LINEAGE_NODES_MAX:
            depth += 1
            cursor.execute(sql, {"space": space.pk, "level": [str(pk) for pk in level]})
            fresh = sorted({row[0] for row in cursor.fetchall()} - found.keys() - {root}, key=str)
            fresh = fresh[: LINEAGE_NODES_MAX + 1 - len(found)]
            found.update((pk, depth) for pk in fresh)
            level = fresh
    # source_ids may name a thought deleted since, or of no thought: only thoughts of the space count.
    present = set(Thought.objects.filter(space=space, id__in=list(found)).values_list("id", flat=True))
    return {pk: d for pk, d in found.items() if pk in present}


def thought_lineage(*, space: Space, thought_id: str | uuid.UUID, max_depth: int = DEFAULT_MAX_DEPTH) -> dict:
    """The chain around one thought: ancestors (negative depth), itself (0), descendants (positive).

    ``truncated`` says that the chain goes on beyond ``max_depth`` in at least one direction.
    """
    root = thought_get(space=space, thought_id=thought_id)
    return thought_lineage_of(space=space, root=root, max_depth=max_depth)


def thought_lineage_of(*, space: Space, root: Thought, max_depth: int = DEFAULT_MAX_DEPTH) -> dict:
    """:func:`thought_lineage` for a thought of ``space`` the caller already holds, so the row isn't read twice."""
    up = _depths(_PARENTS_SQL, space=space, root=root.id, max_depth=max_depth)
    up.pop(root.id, None)
    down = _depths(_CHILDREN_SQL, space=space, root=root.id, max_depth=max_depth)
    for seen in (root.id, *up):  # a cycle can lead back to the root or to an ancestor
        down.pop(seen, None)
    truncated = any(depth > max_depth for depth in (*up.values(), *down.values()))
    signed = {i: -d for i, d in up.items() if d <= max_depth} | {i: d for i, d in down.items() if d <= max_depth}
    if len(signed) > LINEAGE_NODES_MAX:  # the nearest, both directions together
        truncated = True
        signed = dict(sorted(signed.items(), key=lambda item: (abs(item[1]), str(item[0])))[:LINEAGE_NODES_MAX])
    rows = (
        Thought.objects.filter(space=space, id__in=list(signed))
        .only(
            "id", "thought_type", "agent_id", "contributor_name", "created_at", "source_ids", "superseded", "refined_by"
        )
        .annotate(preview=Left("content", PREVIEW_CHARS), agent_name=F("agent__name"))
    )
    chain = sorted(
        [_node(root, 0), *(_node(t, signed[t.id]) for t in rows)], key=lambda n: (n["depth"], n["created_at"])
    )
    return {"thought_id": str(root.id), "chain": chain, "truncated": truncated}


def lineage_summary(*, space: Space, thought: Thought) -> dict | None:
    """trace.lineage_summary (seeds/001): None when the thought has neither ancestors nor descendants."""
    lineage = thought_lineage_of(space=space, root=thought)
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
