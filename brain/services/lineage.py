"""Refinement and consolidation (seeds/001): validation, weight inheritance, superseding.

A refinement says "here is a better version of that thought"; a consolidation merges several into
one. Either way the sources stay (never deleted) but are marked ``superseded`` with ``refined_by``
pointing at the newest thought built on them, so ranking can prefer the newer version. Neither may
name a transition marker (:func:`markers_refuse`) or a correction (:func:`corrections_refuse`: only
a correction supersedes a correction). What it replaces has to be what it is about
(:func:`unrelated_refuse`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from django.db import connection
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Now

from api.errors import Conflict, Forbidden, NotFound, ValidationFailed
from brain import embedding as embedder
from brain.choices import QualityFlag, SuggestionStatus, ThoughtCategory, ThoughtType
from brain.models import CorrectionSuggestion, Thought, content_key
from brain.services.suggestions import suggestions_close_superseded
from core.db import binary_vector, prepared_cursor
from core.models import Agent, Space

#: Inherited weight = max(INHERIT_FLOOR, source weight × INHERIT_FACTOR) (average for consolidations).
INHERIT_FACTOR = 0.5
INHERIT_FLOOR = 1.0
MIN_CONSOLIDATION = 2

#: A refinement, consolidation or correction takes the place of what it supersedes in every answer and
#: carries the lineage multipliers there (SPEC 2.3), so its text has to be about each thought it
#: supersedes: their cosine is at least this. Chosen on the retrieval benchmark's dev split (odd
#: conversations): the texts of its 63 corrections sit at 0.25 and more from what they correct, a round
#: figure below the lowest; on test (even ones) it keeps all 62 (0.36 and more) and refuses 74% of facts
#: from another conversation, and an instruction unrelated to the thought it names (cosine 0.03) is
#: refused. A correction's ``corrected_fact`` doesn't stand in for its text (a correction of a note
#: about lunch, whose text is about backups, would carry the correction multiplier into every answer
#: about backups), and one's own thoughts are checked too, for the same reason.
RELATED_FLOOR = 0.2

_SIMILARITY_SQL = """
SELECT t.id, 1 - (t.embedding <=> %(vector)s::vector) FROM brain_thought t
WHERE t.space_id = %(space)s AND t.id = ANY(%(ids)s::uuid[]) AND t.embedding IS NOT NULL
      AND t.embedding_model = %(model)s
"""


def unrelated_refuse(
    *, space: Space, agent: Agent | None, vector: list[float], source_ids: list[uuid.UUID], field: str
) -> None:
    """400 UNRELATED_SOURCE naming the sources of ``field`` that ``vector`` (the new text's) is not within
    :data:`RELATED_FLOOR` of, the agent's own included. A human's write (``agent`` None) is not checked,
    nor a source without a vector of this process's model yet (its embedding job has not run, or its
    vector is another model's until ``reembed``)."""
    if agent is None or not source_ids:
        return
    params = {"vector": binary_vector(vector), "space": space.pk, "ids": list(source_ids),
              "model": embedder.current_model_label()}  # fmt: skip
    with prepared_cursor() as cursor:
        cursor.execute(_SIMILARITY_SQL, params)
        best = dict(cursor.fetchall())
    unrelated = [str(pk) for pk in source_ids if pk in best and best[pk] < RELATED_FLOOR]
    if unrelated:
        raise ValidationFailed(
            f"'{field}' names thoughts that this text is not about (cosine below {RELATED_FLOOR}): "
            f"{', '.join(unrelated[:5])}{' and more' if len(unrelated) > 5 else ''}. It would take their place in "
            "every answer; contribute it as a new thought, or name only the thoughts it replaces.",
            code="UNRELATED_SOURCE",
            extra={"ids": unrelated},
        )


def lineage_validate(*, refines: uuid.UUID | None, consolidates: list[uuid.UUID] | None) -> list[uuid.UUID]:
    """The distinct source ids of an explicit iteration, or [] for an ordinary call.

    Raises MUTUAL_EXCLUSION when both are given and MIN_CONSOLIDATION for fewer than two distinct
    ids, before anything is looked up or written.
    """
    if refines is not None and consolidates is not None:
        raise ValidationFailed(
            "Give either 'refines' (one thought) or 'consolidates' (several thoughts), not both.",
            code="MUTUAL_EXCLUSION",
        )
    if consolidates is not None:
        distinct = list(dict.fromkeys(consolidates))
        if len(distinct) < MIN_CONSOLIDATION:
            raise ValidationFailed(
                f"'consolidates' needs at least {MIN_CONSOLIDATION} different thought ids; "
                "use 'refines' to build on a single thought.",
                code="MIN_CONSOLIDATION",
            )
        return distinct
    return [refines] if refines is not None else []


def markers_refuse(thoughts: Iterable[Thought], *, action: str) -> None:
    """403 MARKER_NOT_RETRACTABLE (retraction's refusal) when one of ``thoughts`` is a transition
    marker: markers are the workflow's audit trail, and nothing retracts, refines, consolidates,
    corrects or otherwise supersedes them (SPEC 6)."""
    markers = [str(t.pk) for t in thoughts if t.thought_category == ThoughtCategory.TRANSITION_MARKER]
    if markers:
        raise Forbidden(
            f"Transition markers are the workflow's audit trail and can't be {action}: {', '.join(markers)}.",
            code="MARKER_NOT_RETRACTABLE",
            extra={"markers": markers},
        )


def corrections_refuse(thoughts: Iterable[Thought], *, field: str | None = None) -> None:
    """409 CORRECTION_NEEDS_CORRECTION when one of ``thoughts``, the sources of a refinement or a
    consolidation (``field``: the request field that named them), is a correction.

    Only a correction supersedes a correction (SPEC 6: "corrections, not votes, supersede"). A
    refinement of a correction needs no ``corrected_fact`` or ``correct_fact`` and can say anything,
    the wrong fact included, yet it would become the correction's live replacement, ranked above it:
    one agent, or a prompt injection steering it, would bury the correction. What the refusal says to
    send instead is a correction that supersedes it (:func:`correction_replacement_hint`).
    """
    thoughts = list(thoughts)
    ids = [str(t.pk) for t in thoughts if t.thought_category == ThoughtCategory.CORRECTION]
    if not ids:
        return
    one = len(ids) == 1
    named = f"'{field}' names" if field else "A refinement or consolidation names"
    message = (
        f"{named} {'a correction' if one else 'corrections'} ({', '.join(ids)}), and only a correction "
        f"supersedes a correction. {correction_replacement_hint(ids)}"
    )
    if len(ids) < len(thoughts):
        message += f" To build on the other thoughts, leave {'it' if one else 'them'} out."
    raise Conflict(message + " Nothing was stored.", code="CORRECTION_NEEDS_CORRECTION", extra={"corrections": ids})


def correction_replacement_hint(ids: list[str]) -> str:
    """How to replace the corrections ``ids``: a correction that supersedes them (the memory call's
    fields, the correct endpoint, the MCP tool and the CLI command)."""
    one = len(ids) == 1
    path = f"POST /api/v1/thoughts/{ids[0] if one else '<id>'}/correct"
    return (
        f"If what {'it says' if one else 'they say'} is wrong or out of date, send a correction instead: a memory "
        'call (POST /api/v1/memory) with "thought_category": "correction", "topic", "corrected_fact" (what is '
        f'wrong), "correct_fact" and "supersedes": {json.dumps(ids)}, or {path} with "correct_fact" (MCP '
        "memory_correct, CLI brain correct)."
    )


def thoughts_require(*, space: Space, ids: Iterable[uuid.UUID], field: str) -> list[Thought]:
    """The thoughts of ``space`` with these ids, in the given order; THOUGHT_NOT_FOUND names the missing."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    found = {
        t.id: t
        for t in Thought.objects.filter(space=space, id__in=wanted).only("id", "pheromone_weight", "thought_category")
    }
    missing = [str(i) for i in wanted if i not in found]
    if missing:
        raise NotFound(
            f"'{field}' names thoughts that don't exist in this space: {', '.join(missing)}.", code="THOUGHT_NOT_FOUND"
        )
    return [found[i] for i in wanted]


def lineage_inherited_weight(*, thought_type: str, source_weights: list[float]) -> float:
    """seeds/001 4.1: refinement max(1, w·0.5); consolidation max(1, avg(w)·0.5); original 1.0."""
    if thought_type == ThoughtType.ORIGINAL or not source_weights:
        return INHERIT_FLOOR
    if thought_type == ThoughtType.REFINEMENT:
        return max(INHERIT_FLOOR, source_weights[0] * INHERIT_FACTOR)
    return max(INHERIT_FLOOR, sum(source_weights) / len(source_weights) * INHERIT_FACTOR)


def lineage_lock_sources(*, space: Space, source_ids: list[uuid.UUID]) -> list[Thought]:
    """Lock the sources (in id order, so concurrent iterations can't deadlock) and read their weights.

    Must run inside the transaction that stores the new thought: the weight it inherits and the
    superseding it writes then see the same, current rows. A transition marker among them is refused
    (:func:`markers_refuse`), and so is a correction (:func:`corrections_refuse`), before anything is
    stored.
    """
    if not source_ids:  # a plain contribution: nothing to lock (and no query to build)
        return []
    rows = {
        t.id: t
        for t in Thought.objects.select_for_update()
        .filter(space=space, id__in=source_ids)
        .order_by("id")
        .only("id", "pheromone_weight", "thought_category", "agent_id", "quality_flags", *QUALITY_FIELDS)
    }
    missing = [str(i) for i in source_ids if i not in rows]
    if missing:
        raise NotFound(f"Thoughts no longer exist in this space: {', '.join(missing)}.", code="THOUGHT_NOT_FOUND")
    markers_refuse(rows.values(), action="refined or consolidated")
    corrections_refuse(rows[i] for i in source_ids)
    return [rows[i] for i in source_ids]


def lineage_supersede(*, thought: Thought, source_ids: list[uuid.UUID]) -> int:
    """Mark the sources superseded by ``thought`` (the newest refiner); returns how many rows changed.

    Their pending correction suggestions are closed (``suggestions_close_superseded``), except those on
    the author's own sources: a restated claim keeps what was reported about it (:func:`quality_inherited`),
    so they move to ``thought`` and stay pending for a reviewer (its author can't dismiss them)."""
    count = (
        Thought.objects.filter(id__in=source_ids)
        .filter(~Q(id=thought.id))
        .update(superseded=True, refined_by=thought, superseded_at=Coalesce("superseded_at", Now()))
    )
    if thought.agent_id is not None:
        own = Thought.objects.filter(id__in=source_ids, agent_id=thought.agent_id).exclude(id=thought.id)
        CorrectionSuggestion.objects.filter(thought__in=own, status=SuggestionStatus.PENDING).update(thought=thought)
    suggestions_close_superseded(
        space_id=thought.space_id, thought_ids=[pk for pk in source_ids if pk != thought.id], by=thought
    )
    return count


#: How many versions a thought's own lineage is walked, back for its reports or forward to its latest
#: version (a bound on a walk an agent's refinements lengthen, not a design limit).
OWN_VERSIONS_DEPTH = 50

_OWN_EARLIER_VERSIONS_SQL = """
WITH RECURSIVE earlier(latest, id, agent_id, depth) AS (
    SELECT t.id, t.id, t.agent_id, 0 FROM brain_thought t WHERE t.id = ANY(%(ids)s::uuid[]) AND t.agent_id IS NOT NULL
    UNION ALL
    SELECT e.latest, s.id, e.agent_id, e.depth + 1
    FROM earlier e JOIN brain_thought s ON s.refined_by_id = e.id
    WHERE s.agent_id = e.agent_id AND e.depth < %(depth)s
)
SELECT id, latest FROM earlier WHERE depth > 0
"""


def own_earlier_versions(thought_ids: list) -> dict:
    """``{earlier version: thought}`` for each of ``thought_ids``: the thoughts its author's refinements
    and consolidations replaced with it, down its own lineage (``refined_by``, the same agent)."""
    with connection.cursor() as cursor:
        cursor.execute(_OWN_EARLIER_VERSIONS_SQL, {"ids": [str(pk) for pk in thought_ids], "depth": OWN_VERSIONS_DEPTH})
        return dict(cursor.fetchall())


_OWN_LATEST_VERSIONS_SQL = """
WITH RECURSIVE later(earliest, id, agent_id, depth) AS (
    SELECT t.id, t.id, t.agent_id, 0 FROM brain_thought t WHERE t.id = ANY(%(ids)s::uuid[]) AND t.agent_id IS NOT NULL
    UNION ALL
    SELECT l.earliest, r.id, l.agent_id, l.depth + 1
    FROM later l JOIN brain_thought t ON t.id = l.id JOIN brain_thought r ON r.id = t.refined_by_id
    WHERE r.agent_id = l.agent_id AND l.depth < %(depth)s
)
SELECT l.earliest, l.id FROM later l JOIN brain_thought h ON h.id = l.id WHERE l.depth > 0 AND NOT h.superseded
"""


def own_latest_versions(thought_ids: list) -> dict:
    """``{thought: its latest version}`` for each of ``thought_ids`` its author replaced with a refinement or
    consolidation of its own, followed up ``refined_by`` while the author stays the same, to a live thought;
    a thought whose own lineage ends in a superseded one (a correction, another agent's refinement) is left out."""
    with connection.cursor() as cursor:
        cursor.execute(_OWN_LATEST_VERSIONS_SQL, {"ids": [str(pk) for pk in thought_ids], "depth": OWN_VERSIONS_DEPTH})
        return dict(cursor.fetchall())


#: What the quality loop has said about a thought (its EMAs and the confidence ranking multiplies by).
QUALITY_FIELDS = ("usage_score", "contradiction_score", "effective_confidence")


def quality_inherited(*, space: Space, agent: Agent | None, sources: list[Thought], content: str) -> dict:
    """What a new thought of ``agent`` starts with from the quality loop: what was reported about the claim
    it restates, where it restates its author's own claim (SPEC 6: reports, not re-sends, decide). Its own
    sources (a refinement or consolidation of its own thoughts) and its own withdrawn thought of the same
    text (retracted, then sent again: ``brain.models.content_key``) pass on the EMAs and effective
    confidence of the one that stands lowest; the reports made about its own sources count for the new
    one's floor and ceiling too (``quality.services.scoring``: its own lineage; a re-sent copy has no
    lineage and passes on its scores only). An ``unverified`` flag on any of them passes on as
    ``"unverified": True`` (the caller adds the flag). Another agent's thoughts pass on nothing: improving
    a teammate's statement starts afresh, and only a correction starts a fact afresh for its author. ``{}``
    when nothing is passed on."""
    if agent is None:
        return {}
    own = [source for source in sources if source.agent_id == agent.id]
    withdrawn = (
        Thought.objects.filter(space=space, agent=agent, superseded=True, superseded_by=None, refined_by=None)
        .alias(key=content_key(F("content")))
        .filter(key=content_key(Value(content)))
        .only("id", "quality_flags", *QUALITY_FIELDS)
    )
    reported = [t for t in [*own, *withdrawn] if t.usage_score is not None or t.contradiction_score is not None]
    if not reported:
        return {}
    lowest = min(reported, key=lambda t: t.effective_confidence)
    inherited = {name: getattr(lowest, name) for name in QUALITY_FIELDS}
    if any(QualityFlag.UNVERIFIED.value in t.quality_flags for t in reported):
        inherited["unverified"] = True
    return inherited


#: Retracted links a release follows down at most (a chain of withdrawn replacements); deeper rows stay as
#: they are (nothing bounded by an agent's input should make one retraction walk without end).
RELEASE_DEPTH_MAX = 100


def lineage_release(*, withdrawn: Thought, locked: list[Thought]) -> list[uuid.UUID]:
    """Hand back what ``withdrawn`` (just retracted) superseded; returns the ids that are live again.

    ``locked`` are the rows whose ``refined_by`` or ``superseded_by`` is ``withdrawn``, locked by the
    caller in the same transaction. Each pointer moves to the newest other thought that still
    supersedes the row the same way (a refinement or consolidation naming it in ``source_ids``, a
    correction naming it in ``supersedes``, neither retracted); a row nothing supersedes any more is
    live again (``superseded=false``, ``superseded_at`` cleared), unless it was retracted itself. A
    withdrawn refinement, consolidation or correction no longer buries what it replaced.

    A retracted row left with no successor carries nothing on, so what it superseded is handed back the
    same way, down the chain (at most RELEASE_DEPTH_MAX links): an agent that replaced another's thought,
    replaced its own replacement, then withdrew both leaves the first thought live again.
    """
    live_again: list[uuid.UUID] = []
    space_id, gone = withdrawn.space_id, {withdrawn.pk}
    for _ in range(RELEASE_DEPTH_MAX):
        if not locked:
            break
        dead_ends = _release_step(space_id=space_id, gone=gone, locked=locked, live_again=live_again)
        gone = {row.pk for row in dead_ends}
        held = Q(refined_by_id__in=gone) | Q(superseded_by_id__in=gone)
        locked = (
            list(Thought.objects.select_for_update().filter(held, space_id=space_id).order_by("pk")) if gone else []
        )
    return live_again


#: The thought types that replace what their ``source_ids`` name.
REFINING_TYPES = (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION)


def _release_step(
    *, space_id, gone: set[uuid.UUID], locked: list[Thought], live_again: list[uuid.UUID]
) -> list[Thought]:
    """One step of :func:`lineage_release`: ``locked`` point at the withdrawn rows ``gone``; returns the
    retracted rows among them left with no successor."""
    ids = [t.pk for t in locked]
    others = (
        Thought.objects.filter(space_id=space_id)
        .filter(
            Q(thought_type__in=REFINING_TYPES, source_ids__overlap=ids)
            | Q(thought_category=ThoughtCategory.CORRECTION, supersedes__overlap=ids)
        )
        .exclude(pk__in=gone)
        .exclude(quality_flags__contains=[QualityFlag.RETRACTED])
        .order_by("-created_at")
        .only("id", "thought_type", "source_ids", "supersedes", "thought_category")
    )
    refiners: dict[uuid.UUID, uuid.UUID] = {}
    correctors: dict[uuid.UUID, uuid.UUID] = {}
    # Newest first: the first one seen for a row is its newest. Only a refinement or consolidation
    # replaces what its source_ids name (an original imported with source_ids merely cites them), and no
    # thought replaces itself.
    for other in others:
        if other.thought_type in REFINING_TYPES:
            for pk in other.source_ids:
                if pk != other.pk:
                    refiners.setdefault(pk, other.pk)
        if other.thought_category == ThoughtCategory.CORRECTION:
            for pk in other.supersedes:
                if pk != other.pk:
                    correctors.setdefault(pk, other.pk)
    dead_ends = []
    for row in locked:
        if row.refined_by_id in gone:
            row.refined_by_id = refiners.get(row.pk)
        if row.superseded_by_id in gone:
            row.superseded_by_id = correctors.get(row.pk)
        if row.refined_by_id or row.superseded_by_id:
            continue
        if QualityFlag.RETRACTED in row.quality_flags:
            dead_ends.append(row)
        else:
            row.superseded, row.superseded_at = False, None
            live_again.append(row.pk)
    Thought.objects.bulk_update(locked, ["refined_by", "superseded_by", "superseded", "superseded_at"])
    return dead_ends
