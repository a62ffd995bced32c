"""The steps of the memory endpoint (SPEC 2.2), in order: :data:`MEMORY_STEPS`.

A step reads and writes the :class:`~brain.services.memory.call.MemoryCall` only; guidance is a
list of messages joined at the end. Adding a step means writing one function and putting it at its
place in the list.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections import Counter
from typing import Any

from django.db import transaction
from django.utils import timezone

from api.errors import ServiceFailure, ValidationFailed
from api.text import quoted
from brain import embedding as embedder
from brain import ranking
from brain.choices import QualityFlag, ThoughtCategory, ThoughtType
from brain.models import QueryLog, Thought
from brain.selectors import activity, search
from brain.selectors.lineage import PREVIEW_CHARS, lineage_summary
from brain.services import flags, lineage, pheromones
from brain.services.categories import STRUCTURED_FIELDS, category_validate
from brain.services.corrections import (
    correction_guidance,
    correction_supersede_guidance,
    thought_correct,
)
from brain.services.memory.call import MemoryCall
from brain.services.memory.threshold import contribution_threshold_met
from brain.services.pipeline import thought_schedule_followups
from brain.services.suggestions import suggestions_pending_items
from brain.services.thoughts import thought_create, thought_known

logger = logging.getLogger("colony.brain")

# --- guidance -------------------------------------------------------------------------------------
# The near-duplicate and refine thresholds are flag rules: brain.services.flags.
DISAMBIGUATION_MIN_RESULTS = 10
DISAMBIGUATION_MIN_TAGS = 3
PENDING_CORRECTIONS_RETURNED = 20  # newest first; the rest stay listed by GET /api/v1/corrections

DEFAULT_LIMIT = 10
#: seeds/000 3c, "map, not breadcrumbs": a topic filter that finds at least this many live fragments
#: of the topic and no live state snapshot gets a ready ``consolidates`` call in the guidance.
MAP_MIN_FRAGMENTS = 3


def step_validate(call: MemoryCall) -> None:
    """Category fields, lineage rules and every referenced id, before anything is written.

    (Types are the serializer's.) A categorized contribution without its required fields is refused
    with 400 MISSING_CATEGORY_FIELDS naming them; an uncategorized one needs none, as before.
    """
    request = call.request
    category_validate(category=call.category, fields={name: request.get(name) for name in STRUCTURED_FIELDS})
    writes = [name for name in ("refines", "consolidates", "supersedes", "thought_category") if request.get(name)]
    if request.get("store") is True:
        writes.append("store")
    if (request.get("contribute") is False or request.get("store") is False) and writes:
        raise ValidationFailed(
            f"'contribute: false' stores nothing, but {', '.join(writes)} asks to store; drop one of them.",
            code="MUTUAL_EXCLUSION",
        )
    as_lineage = bool(request.get("supersedes")) and not call.is_correction  # read as refines/consolidates
    _supersedes_as_lineage(call)
    call.lineage_ids = lineage.lineage_validate(
        refines=request.get("refines"), consolidates=request.get("consolidates")
    )
    if call.is_correction and call.lineage_ids:
        raise ValidationFailed(
            "A correction supersedes the thoughts listed in 'supersedes'; it can't also refine or consolidate.",
            code="MUTUAL_EXCLUSION",
        )
    lineage_field = "refines" if request.get("refines") is not None else "consolidates"
    sources = lineage.thoughts_require(space=call.space, ids=call.lineage_ids, field=lineage_field)
    # Only a correction supersedes a correction: refused here, before the prompt is embedded
    # (lineage_lock_sources refuses it again under the rows' locks).
    lineage.corrections_refuse(sources, field="supersedes" if as_lineage else lineage_field)
    lineage.thoughts_require(space=call.space, ids=request.get("related_thoughts") or [], field="related_thoughts")
    lineage.thoughts_require(space=call.space, ids=request.get("supersedes") or [], field="supersedes")
    call.operations.append("validate")


def _supersedes_as_lineage(call: MemoryCall) -> None:
    """``supersedes`` on a contribution that is not a correction: the new thought replaces those, as
    ``refines`` (one id) or ``consolidates`` (several) say; the request is read as saying that.

    seeds/000 2a lists ``supersedes`` among a state snapshot's fields and 3a updates a snapshot by
    refining it. Given with ``refines`` or ``consolidates`` it is a 400 (which of the two would win is
    the caller's to say).
    """
    request = call.request
    ids = list(dict.fromkeys(request.get("supersedes") or []))
    if call.is_correction or not ids:
        return
    if request.get("refines") is not None or request.get("consolidates") is not None:
        raise ValidationFailed(
            "'supersedes' on a thought that is not a correction replaces those thoughts as 'refines' (one id) "
            "or 'consolidates' (several) does; give one of them.",
            code="MUTUAL_EXCLUSION",
        )
    if len(ids) == 1:
        request["refines"] = ids[0]
    else:
        request["consolidates"] = ids
    call.operations.append("supersedes:as_" + ("refines" if len(ids) == 1 else "consolidates"))


def step_session(call: MemoryCall) -> None:
    given = call.request.get("session_id")
    call.new_session = not given
    call.session_id = given or str(uuid.uuid4())
    call.operations.append("session:new" if call.new_session else "session:continue")


def step_threshold(call: MemoryCall) -> None:
    """Decide whether this call stores its prompt.

    ``contribute: false`` (or ``store: false``) never stores: a pure search that still retrieves,
    reinforces and logs. Otherwise the prompt is stored when the threshold is met, or whatever its
    length when the caller means it: ``refines`` / ``consolidates`` / a correction, an explicit
    ``store: true``, or a ``thought_category`` given (a categorized item is knowledge by intent). The
    threshold keeps guarding free-form prompts, which is what it was made for.
    """
    request = call.request
    call.threshold_met = contribution_threshold_met(call.prompt)
    if request.get("contribute") is False or request.get("store") is False:
        call.contribute = False
        call.operations.append("contribute:false")
        return
    if request.get("refines") is not None:
        call.bypass = "refines"
    elif request.get("consolidates") is not None:
        call.bypass = "consolidates"
    elif request.get("thought_category") == ThoughtCategory.CORRECTION:
        call.bypass = "correction"
    elif request.get("store") is True:
        call.bypass = "store"
    elif request.get("thought_category"):
        call.bypass = "category"
    call.contribute = call.threshold_met or call.bypass is not None
    if call.bypass:
        call.operations.append(f"threshold:bypassed({call.bypass})")
    else:
        call.operations.append("threshold:met" if call.threshold_met else "threshold:not_met")


def _write_moves_the_search(call: MemoryCall) -> bool:
    """Whether this call's own write changes what its search must see: a correction supersedes the
    thoughts it corrects, a refinement or consolidation its sources, and the answer ranks them as
    superseded. Any other write only adds the new thought, which the search leaves out anyway."""
    return call.contribute and (call.is_correction or bool(call.lineage_ids))


def step_retrieve_first(call: MemoryCall) -> None:
    """Search before anything is written, unless the write moves the search (see step_retrieve).

    The query is embedded here, while the database runs the search's lexical side
    (``search.thought_search`` with a callable vector): a retrieve-only call and a plain contribution
    need the vector for nothing before the search, the contribution's flags then read its vector and
    its nearest thought from what the search fetched (``step_flags``), and nothing has been written
    when the embedding or the search fails."""
    if not _write_moves_the_search(call):
        _retrieve(call)


def step_embed(call: MemoryCall) -> None:
    """Embed the prompt once: the same vector is the query and the stored thought's embedding (a
    call whose search ran first embedded there)."""
    if call.contribute and call.vector is None:
        _embed(call)


def _embed(call: MemoryCall) -> list[float]:
    try:
        call.vector = embedder.embed(call.prompt)
    except embedder.EmbeddingError as exc:
        logger.error("Embedding failed: %s", exc)
        raise ServiceFailure(f"Could not embed the prompt: {exc}", code="EMBEDDING_FAILED") from exc
    call.operations.append("embed")
    return call.vector


def step_flags(call: MemoryCall) -> None:
    """The contribution's advisory flags, decided before it is stored (never blocking).

    keyword_echo / orphaned_reference / stale by the rules of ``brain.services.flags``; the agent's
    recent queries are read here, before ``step_reinforce`` logs this call's own query.
    near_duplicate compares with the nearest existing thought (not the ones being refined or
    consolidated). contradicts_correction, the re-contamination guard, is decided where the thought is
    stored, under the correction lock (``_guard_under_the_correction_lock``).
    """
    if not call.contribute:
        return
    recent, _ = flags.contribution_checks(
        space=call.space, agent=call.agent, agent_ref=call.agent_ref, vector=call.vector, text=call.prompt, guard=False
    )
    call.flags = flags.contribution_flags(
        text=call.prompt,
        recent_queries=recent,
        category=call.category,
        temporal_scope=call.request.get("temporal_scope"),
    )
    if not call.is_correction:
        call.nearest = _nearest(call)
        if call.nearest is not None and flags.is_near_duplicate(call.nearest[1]):
            call.flags.append(QualityFlag.NEAR_DUPLICATE.value)
    call.operations.append(f"flags:{','.join(call.flags) or 'none'}")


def _nearest(call: MemoryCall) -> tuple[Thought, float] | None:
    """The live thought most similar to the contribution (not one it refines or consolidates).

    Superseded thoughts don't count: a new version of a retracted or replaced thought duplicates
    nothing that is served, and "merge with" or "refine" a thought that was withdrawn is no advice.

    When the search ran first over the whole space (no topic or category filter), its rows already
    hold it: the dense side's HNSW scan reads the nearest thoughts, with at least the ef_search a scan
    of its own would use, and every fetched row carries its exact cosine similarity. Otherwise one
    scan of its own (``search.thought_nearest``)."""
    request = call.request
    if call.search is not None and not (request.get("filter_topic") or request.get("filter_category")):
        scored = [c for c in call.search.fetched if c.similarity is not None and not c.thought.superseded]
        best = max(scored, key=lambda c: c.similarity, default=None)
        return None if best is None else (best.thought, best.similarity)
    nearest = search.thought_nearest(space=call.space, vector=call.vector, exclude_ids=call.lineage_ids, limit=1)
    return nearest[0] if nearest else None


def _thought_fields(call: MemoryCall) -> dict[str, Any]:
    request = call.request
    metadata: dict[str, Any] = {"session_id": call.session_id}
    if request.get("context"):
        metadata["context"] = request["context"]
    for wire, key in (("agent_id", "claimed_agent_id"), ("agent_name", "claimed_agent_name")):
        if request.get(wire):
            metadata[key] = request[wire]
    return {
        "context_metadata": metadata,
        "thought_category": call.category,
        "topic": request.get("topic") or "",
        "temporal_scope": request.get("temporal_scope"),
        "source_ref": request.get("source_ref"),
        "alternatives_considered": request.get("alternatives_considered") or "",
        "corrected_fact": request.get("corrected_fact") or "",
        "correct_fact": request.get("correct_fact") or "",
        "supersedes": list(request.get("supersedes") or []),
        "tags": list(dict.fromkeys(request.get("tags") or [])),
        "quality_flags": list(call.flags),
        "contradicted_by": call.contradicted_by,
    }


def step_contribute(call: MemoryCall) -> None:
    """Store the prompt as a thought.

    refines/consolidates inherit weight and supersede their sources; a correction supersedes every
    id of ``supersedes`` in the same transaction (all or nothing). Any other thought is checked for
    contradictions with existing facts by a Celery job, sent once it is committed and the answer is
    out (off the request path). A plain contribution that a live thought already says
    (``_one_row_per_fact``, ``thoughts.thought_known``) stores nothing: ``call.known_id`` names that
    thought, which ``step_reinforce`` reinforces.
    """
    if not call.contribute:
        return
    if call.is_correction:
        _contribute_correction(call)
        return
    # The contradiction check is sent after the answer (call.after_response), once the thought is
    # committed; inside a caller's transaction that commits later, at that commit as before.
    defer = None if transaction.get_connection().in_atomic_block else call.after_response.append
    with transaction.atomic():
        _guard_under_the_correction_lock(call)
        if _one_row_per_fact(call):
            call.known_id = thought_known(space=call.space, content=call.prompt, sources=list(call.lineage_ids))
            if call.known_id is not None:
                call.guidance.append(
                    f"already known: {call.known_id} says the same (case and spacing aside), so nothing new was "
                    "stored and that thought was reinforced. To change what it says, send "
                    f'"refines": "{call.known_id}".'
                )
                call.operations.append("contribute:already_known")
                return
        lineage.unrelated_refuse(
            space=call.space,
            agent=call.agent,
            vector=call.vector,
            source_ids=call.lineage_ids,
            field="refines" if call.thought_type == ThoughtType.REFINEMENT else "consolidates",
        )
        sources = lineage.lineage_lock_sources(space=call.space, source_ids=call.lineage_ids)
        weight = lineage.lineage_inherited_weight(
            thought_type=call.thought_type, source_weights=[s.pheromone_weight for s in sources]
        )
        reported = lineage.quality_inherited(space=call.space, agent=call.agent, sources=sources, content=call.prompt)
        if reported.pop("unverified", False):
            _flag_added(call, QualityFlag.UNVERIFIED)
        call.thought = thought_create(
            space=call.space,
            content=call.prompt,
            **call.contributor,
            agent=call.agent,
            thought_type=call.thought_type,
            embedding=call.vector,
            source_ids=list(call.lineage_ids),
            pheromone_weight=weight,
            related_thoughts=list(call.request.get("related_thoughts") or []),
            **reported,
            **_thought_fields(call),
        )
        thought_schedule_followups(thought=call.thought, detect_contradictions=True, defer=defer)
        if call.lineage_ids:
            lineage.lineage_supersede(thought=call.thought, source_ids=call.lineage_ids)
        if reported.get("effective_confidence", 1.0) < 1.0:
            call.guidance.append(
                f"This restates your own claim, which teammates reported wrong: it keeps what they reported "
                f"(effective confidence {reported['effective_confidence']:.2f}). If it fixes a wrong fact, send "
                "the fix as a correction (POST /api/v1/thoughts/{id}/correct): a correction starts afresh."
            )
    call.operations.append(f"contribute:{call.thought_type}")
    call.operations.append("contradiction_check:scheduled")


def _guard_under_the_correction_lock(call: MemoryCall) -> None:
    """The re-contamination guard: hold the space's correction lock shared until the contribution is
    stored, and look under it for the correction whose corrected (wrong) fact the contribution repeats
    (flagged ``contradicts_correction``, the warning quoting the correct fact goes out at once). Under the
    lock, a correction committed meanwhile is seen here, or waits for this row and flags it in its sweep."""
    found = flags.correction_guard_under_lock(space=call.space, vector=call.vector, text=call.prompt)
    if found is not None:
        call.contradicted_by = found
        _flag_added(call, QualityFlag.CONTRADICTS_CORRECTION)
        call.guidance.append(correction_guidance(call.contradicted_by))


def _flag_added(call: MemoryCall, flag: QualityFlag) -> None:
    """Add ``flag``, decided where the contribution is stored; the trace's one line of flags says it too
    (``step_flags`` wrote that line before)."""
    call.flags.append(flag.value)
    call.operations = [f"flags:{','.join(call.flags)}" if op.startswith("flags:") else op for op in call.operations]


def _one_row_per_fact(call: MemoryCall) -> bool:
    """Whether a contribution that repeats a live thought of the space (the same text once case,
    Unicode forms and whitespace are normalised: ``thoughts.thought_known``) stores nothing and
    reinforces that thought instead; a refinement or a consolidation only when a live thought already
    supersedes the same sources with that text (the same refinement sent twice). Not one that repeats
    a corrected fact: that one is stored, flagged ``contradicts_correction``, with the warning
    (``step_flags``), and never reinforces what it repeats. Corrections don't come here
    (``_contribute_correction``)."""
    return call.contradicted_by is None


def _contribute_correction(call: MemoryCall) -> None:
    request = call.request
    fields = _thought_fields(call)
    call.thought, call.superseded_count = thought_correct(
        space=call.space,
        agent=call.agent,
        content=call.prompt,
        topic=request["topic"],
        corrected_fact=request["corrected_fact"],
        correct_fact=request["correct_fact"],
        supersedes=list(request["supersedes"]),
        source_ref=request.get("source_ref"),
        vector=call.vector,
        **call.contributor,
        context_metadata=fields["context_metadata"],
        tags=fields["tags"],
        related_thoughts=list(request.get("related_thoughts") or []),
        quality_flags=list(call.flags),
    )
    call.guidance.append(
        correction_supersede_guidance(count=call.superseded_count, repeats=call.thought.repeats_flagged)
    )
    if call.thought.contradicted_by is not None:
        call.contradicted_by = call.thought.contradicted_by
        call.flags.append(QualityFlag.CONTRADICTS_CORRECTION.value)
        call.guidance.append(correction_guidance(call.contradicted_by))
    call.operations.append("contribute:correction")
    call.operations.append(f"supersede:{call.superseded_count}")


def step_retrieve(call: MemoryCall) -> None:
    """Ranked retrieval after the write, when the write moves the search (a correction, a refinement
    or a consolidation: the answer must rank what it superseded as superseded); every other call
    searched first (``step_retrieve_first``)."""
    if _write_moves_the_search(call):
        _retrieve(call)


def _retrieve(call: MemoryCall) -> None:
    """Ranked retrieval without the thought this call stored (it would always match itself)."""
    request = call.request
    call.search = search.thought_search(
        space=call.space,
        vector=call.vector if call.vector is not None else functools.partial(_embed, call),
        query_text=call.prompt,
        limit=request.get("limit") or DEFAULT_LIMIT,
        filter_topic=request.get("filter_topic") or None,
        filter_category=request.get("filter_category") or None,
        exclude_ids=[call.thought.id] if call.thought else [],
        # searching before storing (step_retrieve_first): score as if the prompt were stored already
        pending_text=call.prompt if call.contribute and call.thought is None else None,
        companion=None if call.contribute or call.read_only else _log_with_the_search(call),
    )
    if call.search.companion_row is not None:
        _logged(call, pheromones.retrieval_record(call.search.companion_row))
    floor = _min_relevance(request)
    if floor is not None:
        kept = [c for c in call.search.candidates if c.probability >= floor]
        # A superseded source goes only with its replacement: one whose replacement falls below the floor
        # goes too (what replaced it was ranked above it, and the answer never shows the old without the new).
        below = {c.id for c in call.search.candidates} - {c.id for c in kept}
        call.search.candidates = [c for c in kept if c.live_replacement_id not in below]
    call.operations.append(f"retrieve:{len(call.sources)}")


def _min_relevance(request: dict) -> float | None:
    """The lowest calibrated relevance a source may have: ``min_relevance`` when given, else
    ``ranking.INJECT_MIN_RELEVANCE`` in the injection mode (``inject: true``), else none."""
    if request.get("min_relevance") is not None:
        return request["min_relevance"]
    return ranking.INJECT_MIN_RELEVANCE if request.get("inject") else None


def _log_fields(call: MemoryCall) -> dict:
    """Who asked what where: the query-log row's fields both ways of writing it take."""
    return {
        "space": call.space,
        "agent": call.agent,
        "agent_ref": call.agent_ref,
        "session_id": call.session_id,
        "query_text": call.prompt,
    }


def _log_with_the_search(call: MemoryCall):
    """A retrieve-only call's query-log row, written by its search (see step_reinforce)."""
    return pheromones.retrieval_log_begin(**_log_fields(call))


def _logged(call: MemoryCall, record: pheromones.RetrievalRecord) -> None:
    call.query_log = QueryLog(
        pk=record.query_log_id, space=call.space, agent=call.agent, session_id=call.session_id, query_text=call.prompt
    )
    call.first_query = not record.queried_before
    call.suggestions_pending = record.suggestions_pending


def step_reinforce(call: MemoryCall) -> None:
    """Every retrieval leaves a query-log row and every access reinforces (SPEC 2.3, 2.6).

    A contribution's log is written now, in one statement that also tells whether this is the
    agent's first call (``step_onboarding``) and whether a pending correction suggestion concerns it
    (``step_pending_corrections``); the workflow's memory gates read it, so it is there before the
    answer is. The row names what the call returned, and reinforcing those thoughts is counted from
    it: after the response is sent (``call.after_response``) this process folds the rows logged since
    its last fold if that was over ``REINFORCEMENT_FOLD_SECONDS`` ago
    (``pheromones.reinforcement_fold_due``: one statement for many calls, each row counted once,
    exact under concurrency).

    A retrieve-only call's row was written by its search already (``_log_with_the_search``: the same
    round trip as the search statement, so the answer waits for the database once less), with its
    results to follow: they are named first thing after the response is sent
    (``pheromones.retrieval_results``), before any fold. A turn reported in that instant waits for them
    (``quality.services.turns``).

    A read-only call (a URL token's) logs and reinforces nothing: its row would count as the agent's
    query for the workflow's ``memory_query_session`` gate and move pheromones on a link's say-so."""
    if call.read_only:
        return
    results = [{"id": candidate.id, "score": round(candidate.score, 4)} for candidate in call.sources]
    if call.known_id is not None and str(call.known_id) not in {result["id"] for result in results}:
        # The repeated thought is named by the answer (trace.thought_id): it counts as returned, and so
        # gets one access's reinforcement, like every source (a filter may have kept it out of them).
        results.append({"id": str(call.known_id), "score": None})
    if call.query_log is not None:
        call.after_response.append(
            functools.partial(pheromones.retrieval_results, query_log_id=call.query_log.pk, results=results)
        )
    else:
        _logged(
            call,
            pheromones.retrieval_log(
                **_log_fields(call),
                stored_thought_id=call.thought.id if call.thought is not None else call.known_id,
                results=results,
            ),
        )
    if results:
        call.after_response.append(pheromones.reinforcement_fold_due)
    call.operations.append(f"reinforce:{len(results)}")


def step_disambiguation(call: MemoryCall) -> None:
    """Many results spread over several tags: offer the tags to narrow the question."""
    if len(call.sources) < DISAMBIGUATION_MIN_RESULTS:
        return
    by_tag: dict[str, list[str]] = {}
    for candidate in call.sources:
        for tag in dict.fromkeys(candidate.thought.tags or []):
            by_tag.setdefault(tag, []).append(candidate.id)
    if len(by_tag) < DISAMBIGUATION_MIN_TAGS:
        return
    counts = Counter({tag: len(ids) for tag, ids in by_tag.items()})
    call.disambiguation = {
        "message": f"Your query matches thoughts under {len(by_tag)} different tags; "
        "narrow it (e.g. with filter_topic or more specific words) if you meant one of them.",
        "options": [{"tag": tag, "count": count, "thought_ids": by_tag[tag]} for tag, count in counts.most_common()],
    }
    call.operations.append("disambiguation")


def step_onboarding(call: MemoryCall) -> None:
    """An agent's first memory call gets the house rules."""
    if not call.first_query:
        return
    call.guidance.append(
        f"Welcome to the shared brain, {call.agent.name}. Query it before you start work; contribute what you "
        "learned as self-contained statements of more than 50 characters (questions are not stored); reuse "
        'trace.session_id within one conversation; improve an existing thought with "refines": "<id>" and '
        'merge duplicates with "consolidates": ["<id>", "<id>"].'
    )
    call.operations.append("onboarding")


def step_near_duplicate(call: MemoryCall) -> None:
    """A new thought very close to an existing one: suggest refining it, or (flagged near_duplicate
    in ``step_flags``) suggest merging them; a correction is neither refined nor merged
    (``lineage.corrections_refuse``), so near one the guidance says how a correction is replaced."""
    if call.thought is None or call.nearest is None:
        return
    other, similarity = call.nearest
    near_duplicate = flags.is_near_duplicate(similarity)
    if not near_duplicate and not flags.is_refine_candidate(similarity):
        return
    preview = quoted(other.content[:PREVIEW_CHARS])
    if other.thought_category == ThoughtCategory.CORRECTION:
        flagged = " Yours is flagged near_duplicate." if near_duplicate else ""
        call.guidance.append(
            f"Correction {other.id} says almost the same (similarity {similarity:.2f}): "
            f"{preview}.{flagged} Only a correction supersedes a correction. "
            + lineage.correction_replacement_hint([str(other.id)])
        )
        call.operations.append("near_duplicate:correction")
    elif near_duplicate:
        call.guidance.append(
            f"Near-duplicate: thought {other.id} says almost the same (similarity {similarity:.2f}): "
            f"{preview}. Yours is flagged near_duplicate; merge them with "
            f'"consolidates": ["{other.id}", "{call.thought.id}"].'
        )
        call.operations.append("near_duplicate:consolidate")
    else:
        call.guidance.append(
            f"A similar thought exists: {other.id} (similarity {similarity:.2f}): "
            f'{preview}. If yours updates it, send it with "refines": "{other.id}".'
        )
        call.operations.append("near_duplicate:refine")


def step_topic_map(call: MemoryCall) -> None:
    """Map, not breadcrumbs (seeds/000 3c): a topic that is only fragments gets a ready consolidation.

    When a ``filter_topic`` search returns MAP_MIN_FRAGMENTS or more live thoughts of that topic and
    none of them is a live state snapshot, the guidance says so and carries the memory call that
    merges them into one self-contained ``state_snapshot`` (fill in the text and the source).
    """
    topic = call.request.get("filter_topic")
    if not topic:
        return
    live = [c.thought for c in call.sources if c.thought.topic == topic and not c.thought.superseded]
    if any(t.thought_category == ThoughtCategory.STATE_SNAPSHOT for t in live):
        return
    skip = {ThoughtCategory.TRANSITION_MARKER, ThoughtCategory.CORRECTION}
    fragments = [t for t in live if t.thought_category not in skip]
    if len(fragments) < MAP_MIN_FRAGMENTS:
        return
    today = timezone.localdate().isoformat()
    suggested = {
        "prompt": f"{topic} state {today}: <current status>. <key decisions>. <blockers>. Next: <next actions>.",
        "consolidates": [str(t.id) for t in fragments],
        "thought_category": ThoughtCategory.STATE_SNAPSHOT.value,
        "topic": topic,
        "temporal_scope": today,
        "source_ref": {"type": "task", "value": "<task slug>"},
    }
    call.guidance.append(
        f"Topic {topic!r} is {len(fragments)} fragments and no current state snapshot: a map beats breadcrumbs. "
        "Merge them into one self-contained snapshot (the fragments become superseded) with this memory call "
        f"(MCP: memory_contribute with content=prompt and the same fields): {json.dumps(suggested)}"
    )
    call.operations.append(f"topic_map:{len(fragments)}")


def step_implicit_feedback(call: MemoryCall) -> None:
    """An agent that contributes after being shown thoughts in the session probably used them: +0.02 each.

    Like reinforcement it changes nothing in the answer, so it runs after the response is sent
    (``call.after_response``; one statement, exact under concurrency): the trace says it was
    scheduled, not how many thoughts it rewarded (~0.8 ms of a session's contribution saved)."""
    if call.thought is None or call.new_session:
        return
    call.after_response.append(
        functools.partial(
            pheromones.session_feedback,
            space=call.space,
            agent=call.agent,
            session_id=call.session_id,
            before_id=call.query_log.pk,
            stored_id=call.thought.id,
        )
    )
    call.operations.append("implicit_feedback:after_response")


def step_highways(call: MemoryCall) -> None:
    """Highways near the query: among what the search fetched (no query of its own)."""
    call.highways = activity.highways_among(
        call.search.fetched if call.search else [],
        accessed_ids={candidate.id for candidate in call.sources},
        agent_id=str(call.agent.pk),
    )
    call.operations.append(f"highways:{len(call.highways)}")


def step_pending_corrections(call: MemoryCall) -> None:
    """Correction suggestions addressed to this agent or this session (SPEC 4.5), newest first; none for
    a read-only call (a URL token names any session it likes, and a link is no place for review work)."""
    if call.read_only or not call.suggestions_pending:  # the common case, answered by step_reinforce's statement
        return
    call.pending_corrections = suggestions_pending_items(
        space=call.space, agent=call.agent, session_id=call.session_id, limit=PENDING_CORRECTIONS_RETURNED
    )
    if call.pending_corrections:
        call.guidance.append(
            f"{len(call.pending_corrections)} pending correction suggestion(s) concern your work: "
            "see result.pending_corrections and accept or dismiss them."
        )
        call.operations.append(f"pending_corrections:{len(call.pending_corrections)}")


def step_lineage_summary(call: MemoryCall) -> None:
    """trace.lineage_summary for the stored thought, else for the best source that has lineage."""
    subject = call.thought if call.thought is not None and call.thought.source_ids else None
    if subject is None:
        subject = next(
            (c.thought for c in call.sources if c.thought.superseded or c.thought.source_ids),
            None,
        )
    if subject is not None:
        call.lineage_summary = lineage_summary(space=call.space, thought=subject)


MEMORY_STEPS = [
    step_validate,
    step_session,
    step_threshold,
    step_retrieve_first,
    step_embed,
    step_flags,
    step_contribute,
    step_retrieve,
    step_reinforce,
    step_disambiguation,
    step_onboarding,
    step_near_duplicate,
    step_topic_map,
    step_implicit_feedback,
    step_highways,
    step_pending_corrections,
    step_lineage_summary,
]
