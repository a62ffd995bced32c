"""Advisory quality flags (SPEC 2.5, seeds/000 sections 2d and 5b).

Flags never block a contribution: the thought is stored either way, and ranking and the response
guidance make the flag visible. Each rule is one small pure function with its threshold as a named
constant, so a rule can be read, tested and tuned on its own:

- ``keyword_echo`` — :func:`is_keyword_echo`, set at contribution time;
- ``orphaned_reference`` — :func:`is_orphaned_reference`, set at contribution time;
- ``near_duplicate`` — :func:`is_near_duplicate`, set by the memory orchestration, which knows the
  best similarity of the contribution to the existing thoughts;
- ``stale`` — :func:`is_stale`, set at contribution time for back-dated snapshots and every night by
  the periodic job ``brain.jobs.flag_stale_snapshots`` (:func:`thoughts_flag_stale`);
- ``contradicts_correction`` — :func:`correction_guard`, the re-contamination guard, set by the
  memory orchestration (it needs the contribution's vector);
- ``unverified`` — :func:`thoughts_flag_unverified`, daily (``quality.jobs.flag_unverified``): the
  quality loop decides which contradictions are unresolved (its turn items), this module applies the
  flag after UNVERIFIED_AFTER_DAYS.

Every threshold of every flag is a named constant here; ranking's penalty per flag is in
``brain/ranking.py`` (``QUALITY_FLAG_MULTIPLIERS``).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterable

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Exists, F, Func, Q, Value
from django.utils import timezone

from brain.choices import QualityFlag, ThoughtCategory
from brain.judging.cues import negation_cue
from brain.models import Thought
from brain.selectors.hnsw import hnsw_filtered_scan_select_sql
from brain.selectors.search import thought_from_row
from core.db import CORRECTION_LOCK_NAMESPACE, binary_vector, prepared_cursor
from core.models import Agent, Space

KEYWORD_ECHO_MIN_OVERLAP = 0.6
"""A contribution is a keyword echo when MORE than this share of its distinct words appears in one
recent query of the same agent (seeds/000 2d: ">60% of words"): search terms stored as a thought."""

ORPHANED_REFERENCE_PATTERN = re.compile(r"\bsee (the |my |our )?\w+\b", re.IGNORECASE)
"""The seed's "see X" pattern (seeds/000 5b): a pointer to knowledge kept elsewhere."""

ORPHANED_REFERENCE_MAX_CHARS = 150
"""A "see X" thought SHORTER than this has no room for the substance it points to; a longer one
is assumed to carry it (seeds/000 5b: ``prompt.length < 150``)."""

NEAR_DUPLICATE_MIN_SIMILARITY = 0.90
"""Cosine similarity to an existing thought ABOVE which a contribution is flagged near_duplicate
and the guidance suggests consolidating (seeds/000 2d; 0.85–0.90 only suggests a refinement)."""

REFINE_SUGGESTION_MIN_SIMILARITY = 0.85
"""Above this (and not a near duplicate) the contribution is not flagged, but the guidance suggests
sending it as a refinement of the existing thought (seeds/000 2d)."""

CORRECTION_GUARD_MIN_SIMILARITY = 0.85
"""A contribution more similar than this to a correction's ``corrected_fact`` repeats the wrong
fact (SPEC 2.5, seeds/000 7c). all-MiniLM-L6-v2 scores paraphrases of one statement 0.90–0.99."""

GUARD_CANDIDATES = 5
"""How many of the most similar corrections the guard reads before giving up (see ``text``)."""

UNVERIFIED_AFTER_DAYS = 14
"""A contradiction the quality loop raised and nobody resolved for this many days flags the thought
``unverified`` (SPEC 4.5)."""

RECENT_QUERIES_LIMIT = 20
"""At most this many of the agent's latest queries are compared (keeps the check O(1) per call)."""

RECENT_QUERIES_WINDOW = dt.timedelta(hours=24)
"""...and only those of the last 24 hours: an echo is of what the agent searched for just now, not
of a query from last month that happens to share words."""

_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’"


def flag_appended(flag: str) -> Func:
    """SQL for ``quality_flags`` with ``flag`` appended, for an ``.update()`` over rows that are
    filtered with ``.exclude(quality_flags__contains=[flag])`` (so the flag is never doubled)."""
    return Func(
        F("quality_flags"),
        Value(str(flag)),
        function="array_append",
        output_field=ArrayField(models.CharField(max_length=40)),
    )


def flag_removed(flag: str) -> Func:
    """SQL for ``quality_flags`` without ``flag`` (every copy), for an ``.update()``."""
    return Func(
        F("quality_flags"),
        Value(str(flag)),
        function="array_remove",
        output_field=ArrayField(models.CharField(max_length=40)),
    )


def _words(text: str) -> set[str]:
    """Distinct lower-cased words, split on whitespace as the seed does, with edge punctuation
    stripped so that "patterns," and "patterns" are one word (inner dots stay: "PageIndex.ai")."""
    out = set()
    for token in text.lower().split():
        word = token.strip(_EDGE_PUNCTUATION)
        if word:
            out.add(word)
    return out


def is_keyword_echo(text: str, recent_queries: Iterable[str]) -> bool:
    """True when > KEYWORD_ECHO_MIN_OVERLAP of the distinct words of ``text`` appear in ONE query."""
    words = _words(text)
    if not words:
        return False
    for query in recent_queries:
        query_words = _words(query or "")
        if query_words and len(words & query_words) / len(words) > KEYWORD_ECHO_MIN_OVERLAP:
            return True
    return False


def is_orphaned_reference(text: str) -> bool:
    """True for a short "see X" thought: it points elsewhere instead of holding the knowledge."""
    stripped = text.strip()
    return len(stripped) < ORPHANED_REFERENCE_MAX_CHARS and ORPHANED_REFERENCE_PATTERN.search(stripped) is not None


def is_near_duplicate(top_similarity: float | None) -> bool:
    """True when the best similarity to an existing thought is above NEAR_DUPLICATE_MIN_SIMILARITY."""
    return top_similarity is not None and top_similarity > NEAR_DUPLICATE_MIN_SIMILARITY


def stale_cutoff(*, today: dt.date, days: int | None = None) -> dt.date:
    """Snapshots whose temporal_scope is before this date are stale."""
    return today - dt.timedelta(days=settings.STALE_SNAPSHOT_DAYS if days is None else days)


def is_stale(category: str | None, temporal_scope: dt.date | None, today: dt.date, days: int | None = None) -> bool:
    """True for a state snapshot whose ``temporal_scope`` is MORE than ``days`` before ``today``.

    ``days`` defaults to ``settings.STALE_SNAPSHOT_DAYS``. Only snapshots go stale: a decision or a
    learning stays true until it is corrected, a snapshot describes a moment.
    """
    if category != ThoughtCategory.STATE_SNAPSHOT or temporal_scope is None:
        return False
    return temporal_scope < stale_cutoff(today=today, days=days)


def is_refine_candidate(top_similarity: float | None) -> bool:
    """True when the guidance should suggest a refinement: above REFINE_SUGGESTION_MIN_SIMILARITY but
    not a near duplicate (that one suggests consolidating)."""
    return (
        top_similarity is not None
        and top_similarity > REFINE_SUGGESTION_MIN_SIMILARITY
        and not is_near_duplicate(top_similarity)
    )


def correction_guard(
    *, space: Space, vector: list[float], text: str | None = None, exclude: Iterable[uuid.UUID] = ()
) -> Thought | None:
    """The correction of ``space`` whose corrected (wrong) fact a new contribution repeats, or None.

    The correction that superseded a thought whose text ``text`` repeats (case, Unicode forms,
    whitespace and look-alike letters aside: ``brain.models.content_key``), else the most similar
    correction above CORRECTION_GUARD_MIN_SIMILARITY, found in SQL by cosine distance on
    ``corrected_fact_embedding``; the returned thought carries ``id``, ``corrected_fact``,
    ``correct_fact`` (other fields load on access) and ``guard_similarity``.
    A correction that a later correction superseded, or that was retracted, no longer guards: it is
    not the authority on that fact any more. A correction refined or consolidated into another thought
    still guards: the refinement rewords it, it does not make the wrong fact right (and is usually no
    correction itself, with no wrong fact to guard). A new correction is checked by the fact it declares
    right (``correct_fact``), not by its text, which names the wrong fact on purpose.

    Pass the contribution's ``text`` too: a sentence embedding barely sees "not", so "Thomas is NOT
    the certified coach" scores 0.96 against "Thomas is the certified coach". When the text negates
    the corrected fact (the judges' negation cue), it agrees with the correction and is not flagged.

    ``exclude``: corrections that don't count (those a new correction replaces).
    """
    return contribution_checks(
        space=space, agent=None, agent_ref=None, vector=vector, text=text, guard=True, exclude=exclude
    )[1]


def correction_guard_under_lock(*, space: Space, vector: list[float], text: str) -> Thought | None:
    """Take the space's correction lock shared until the transaction ends (a correction takes it
    exclusive: it waits for this contribution, then its sweep for repeats sees it), then
    :func:`correction_guard`, which sees any correction committed before the lock: both in one round
    trip (pipeline mode; the lookup's snapshot is taken once the lock is granted)."""
    lock = "SELECT pg_advisory_xact_lock_shared(%(namespace)s, %(space)s)"
    params = {
        "namespace": CORRECTION_LOCK_NAMESPACE,
        "space": space.pk,
        "vector": binary_vector(vector),
        "max_distance": 1.0 - CORRECTION_GUARD_MIN_SIMILARITY,
        "limit": GUARD_CANDIDATES,
        "text": text,
        "exclude": [],
    }
    with prepared_cursor() as lock_cursor, prepared_cursor() as guard_cursor:
        with guard_cursor.connection.pipeline():
            lock_cursor.execute(lock, params)
            guard_cursor.execute(_GUARD_SQL, params)
        return _guard_pick(guard_cursor.fetchall(), text=text)


#: At most this many stored thoughts that repeat a corrected fact are flagged when the correction is
#: stored (nearest first): a correction names the copies it knows in ``supersedes``; this catches the
#: ones its author missed.
REPEATS_FLAG_LIMIT = 50

#: The HNSW candidate list of that search (the space and liveness filters apply after the index).
REPEATS_EF_SEARCH = 100


def thoughts_flag_repeating(*, correction: Thought, fact_vector: list[float]) -> list[uuid.UUID]:
    """Flag ``contradicts_correction`` on the live thoughts already stored that repeat the wrong fact
    of ``correction`` (just stored, its ``supersedes`` superseded); returns their ids, nearest first.

    The guard's rule (similarity to ``corrected_fact`` above CORRECTION_GUARD_MIN_SIMILARITY, the
    negation cue exempting a thought that agrees with the correction) applied to what is stored
    already, not only to what comes later: a copy the correction's author did not name would otherwise
    stay live and unflagged, answering beside the correction. Corrections and transition markers are
    never flagged. Run it inside the transaction that stores the correction.
    """
    params = {
        "space": correction.space_id,
        "vector": binary_vector(fact_vector),
        "max_distance": 1.0 - CORRECTION_GUARD_MIN_SIMILARITY,
        "skipped": [ThoughtCategory.CORRECTION.value, ThoughtCategory.TRANSITION_MARKER.value],
        "limit": REPEATS_FLAG_LIMIT,
    }
    with prepared_cursor() as cursor:
        cursor.execute(hnsw_filtered_scan_select_sql(ef_search="%(ef)s"), {"ef": str(REPEATS_EF_SEARCH)})
        cursor.execute(_REPEATS_SQL, params)
        rows = cursor.fetchall()
    repeating = [pk for pk, content in rows if not negation_cue(correction.corrected_fact, content)]
    if repeating:
        (
            Thought.objects.filter(pk__in=repeating)
            .exclude(quality_flags__contains=[QualityFlag.CONTRADICTS_CORRECTION.value])
            .update(quality_flags=flag_appended(QualityFlag.CONTRADICTS_CORRECTION), contradicted_by=correction)
        )
    return repeating


def thoughts_unflag_contradicting(*, correction: Thought, heir: Thought | None = None) -> int:
    """When ``correction`` is retracted: the thoughts whose flag it set (``contradicted_by``) are flagged
    by ``heir`` instead, the live correction that now stands for the same thought (the one that replaced
    ``correction``, or the earlier one handed back), else the flag comes off: the authority that
    flagged them is withdrawn. Returns how many changed."""
    flagged = Thought.objects.filter(contradicted_by=correction)
    if heir is not None:
        return flagged.update(contradicted_by=heir)
    return flagged.update(quality_flags=flag_removed(QualityFlag.CONTRADICTS_CORRECTION), contradicted_by=None)


#: Live thoughts of a space nearest to a corrected (wrong) fact, within the guard's distance.
_REPEATS_SQL = """
SELECT r.id, r.content FROM (
    SELECT t.id, t.content, t.embedding <=> %(vector)s::vector AS distance
    FROM brain_thought t
    WHERE t.space_id = %(space)s AND NOT t.superseded AND t.embedding IS NOT NULL
          AND t.thought_category <> ALL(%(skipped)s::text[])
    ORDER BY t.embedding <=> %(vector)s::vector LIMIT %(limit)s
) r
WHERE r.distance < %(max_distance)s
ORDER BY r.distance
"""


def _guard_pick(rows, *, text: str | None) -> Thought | None:
    for pk, corrected_fact, correct_fact, distance, same_text, _created_at in rows:
        if text and not same_text and negation_cue(corrected_fact, text):
            continue
        correction = thought_from_row(["id", "corrected_fact", "correct_fact"], [pk, corrected_fact, correct_fact])
        correction.guard_similarity = 1.0 - distance
        return correction
    return None


#: The guarding correction (live, or superseded by a refinement or consolidation only) that superseded
#: a thought of the space with the text's key (``content_key``, an index probe of
#: ``thought_space_superseded_key``): the corrected thought's own words sent again repeat what the
#: correction corrected, however short its ``corrected_fact`` is beside them.
_GUARD_SAME_TEXT_SQL = """
SELECT c.id, c.corrected_fact, c.correct_fact, 0.0::float8 AS distance, true AS same_text, c.created_at
FROM brain_thought old JOIN brain_thought c ON c.id = old.superseded_by_id
WHERE old.space_id = %(space)s AND old.superseded
      AND brain_content_key(old.content) = brain_content_key(%(text)s)
      AND c.thought_category = 'correction' AND NOT c.id = ANY(%(exclude)s::uuid[])
      AND (NOT c.superseded
           OR (c.refined_by_id IS NOT NULL AND c.superseded_by_id IS NULL AND NOT 'retracted' = ANY(c.quality_flags)))
ORDER BY c.created_at DESC LIMIT 1
"""

#: The guarding corrections of a space nearest to a vector by their corrected (wrong) fact (exact scan:
#: corrections are few, and one must guard at once, whatever an approximate index would return), after
#: the one that corrected the same text.
_GUARD_SQL = f"""
({_GUARD_SAME_TEXT_SQL})
UNION ALL
(SELECT t.id, t.corrected_fact, t.correct_fact, t.corrected_fact_embedding <=> %(vector)s::vector AS distance,
        false AS same_text, t.created_at
 FROM brain_thought t
 WHERE t.space_id = %(space)s AND t.thought_category = 'correction' AND NOT t.id = ANY(%(exclude)s::uuid[])
       AND (NOT t.superseded
            OR (t.refined_by_id IS NOT NULL AND t.superseded_by_id IS NULL AND NOT 'retracted' = ANY(t.quality_flags)))
       AND t.corrected_fact_embedding IS NOT NULL
       AND (t.corrected_fact_embedding <=> %(vector)s::vector) < %(max_distance)s
 ORDER BY distance, t.created_at DESC LIMIT %(limit)s)
ORDER BY distance, same_text DESC, created_at DESC
"""  # noqa: S608 - a constant of this module


def contribution_flags(
    *,
    text: str,
    recent_queries: Iterable[str],
    category: str | None = None,
    temporal_scope: dt.date | None = None,
    today: dt.date | None = None,
) -> list[str]:
    """The flags a new contribution gets before it is stored, in a stable order.

    near_duplicate and contradicts_correction need the contribution's vector and are added by the
    orchestration (:func:`is_near_duplicate`, :func:`correction_guard`).
    """
    flags = []
    if is_keyword_echo(text, recent_queries):
        flags.append(QualityFlag.KEYWORD_ECHO.value)
    if is_orphaned_reference(text):
        flags.append(QualityFlag.ORPHANED_REFERENCE.value)
    if is_stale(category, temporal_scope, today or timezone.localdate()):
        flags.append(QualityFlag.STALE.value)
    return flags


def _recent_queries_statement(*, space: Space, agent: Agent | None, agent_ref: str | None) -> tuple[str, dict] | None:
    if agent is None and not agent_ref:
        return None
    params = {
        "space": space.pk,
        "since": timezone.now() - RECENT_QUERIES_WINDOW,
        "agent": agent.pk if agent is not None else agent_ref,
        "limit": RECENT_QUERIES_LIMIT,
    }
    return _RECENT_QUERIES_SQL.format(agent="agent_id" if agent is not None else "agent_ref"), params


def contribution_checks(
    *,
    space: Space,
    agent: Agent | None,
    agent_ref: str | None,
    guard: bool,
    vector: list[float] | None = None,
    text: str | None = None,
    exclude: Iterable[uuid.UUID] = (),
) -> tuple[list[str], Thought | None]:
    """What a contribution's flags read, in one round trip: the agent's recent queries, for the
    keyword-echo rule, and, with ``guard``, the correction its ``vector`` and ``text`` repeat
    (:func:`correction_guard`, which is this function asked for that half; not one in ``exclude``).

    The recent queries are the texts of the agent's last RECENT_QUERIES_LIMIT queries in ``space``
    within RECENT_QUERIES_WINDOW, newest first. Memory calls that stored a thought don't count: their
    text was knowledge, not search terms, and an agent restating its own earlier contribution is a
    near-duplicate, not a keyword echo. The agent is the authenticated one (``agent``) when known,
    else the wire ``agent_id`` (``agent_ref``); with neither there is no "same agent" and the list is
    empty. Call it BEFORE this request's own query is logged, or every contribution would echo itself.

    Both statements are sent before either result is read (psycopg's pipeline mode) rather than one
    after the other (~0.4 ms each), and both are read after the pipeline's Sync, with which they come
    back: a read inside the pipeline would ask for a flush and wait, and the Sync would wait again."""
    recent_statement = _recent_queries_statement(space=space, agent=agent, agent_ref=agent_ref)
    if recent_statement is None and not guard:
        return [], None
    with prepared_cursor() as recent_cursor, prepared_cursor() as guard_cursor:
        with recent_cursor.connection.pipeline():
            if recent_statement is not None:
                recent_cursor.execute(*recent_statement)
            if guard:
                guard_cursor.execute(
                    _GUARD_SQL,
                    {
                        "space": space.pk,
                        "vector": binary_vector(vector),
                        "max_distance": 1.0 - CORRECTION_GUARD_MIN_SIMILARITY,
                        "limit": GUARD_CANDIDATES,
                        "text": text,
                        "exclude": list(exclude),
                    },
                )
        recent = [query for (query,) in recent_cursor.fetchall()] if recent_statement is not None else []
        correction = _guard_pick(guard_cursor.fetchall(), text=text) if guard else None
    return recent, correction


#: The agent's latest queries (not contributions) in the space within the window; the agent by its
#: id when authenticated (``agent_id``), else by the wire ``agent_id`` (``agent_ref``).
_RECENT_QUERIES_SQL = """
SELECT q.query_text FROM brain_querylog q
WHERE q.space_id = %(space)s AND q.created_at >= %(since)s AND q.stored_thought_id IS NULL
      AND q.{agent} = %(agent)s
ORDER BY q.created_at DESC LIMIT %(limit)s
"""


def thoughts_flag_stale(*, today: dt.date, days: int | None = None) -> int:
    """Add the ``stale`` flag to every state snapshot older than the cutoff; returns how many changed.

    One UPDATE in the database (array_append on rows not flagged yet): idempotent, safe against
    concurrent writers of other flags, and it never removes a flag (a snapshot does not become
    fresh again; a new one is contributed instead).
    """
    return (
        Thought.objects.filter(
            thought_category=ThoughtCategory.STATE_SNAPSHOT,
            temporal_scope__lt=stale_cutoff(today=today, days=days),
        )
        .exclude(quality_flags__contains=[QualityFlag.STALE.value])
        .update(quality_flags=flag_appended(QualityFlag.STALE))
    )


def unverified_cutoff(*, now: dt.datetime) -> dt.datetime:
    """Contradictions raised before this moment and still unresolved flag their thought."""
    return now - dt.timedelta(days=UNVERIFIED_AFTER_DAYS)


def thought_unflag_unverified(*, thought_id: uuid.UUID) -> int:
    """Take ``unverified`` off a thought a reviewer checked (a dismissed suggestion resolves every
    contradiction raised before it); returns 1 when the flag was there, else 0."""
    return Thought.objects.filter(pk=thought_id, quality_flags__contains=[QualityFlag.UNVERIFIED.value]).update(
        quality_flags=flag_removed(QualityFlag.UNVERIFIED)
    )


def thoughts_flag_unverified(*, unresolved_contradiction: Exists | Q) -> int:
    """Add ``unverified`` to every live (not superseded) thought for which ``unresolved_contradiction``
    (a subquery over ``OuterRef("pk")``, raised before :func:`unverified_cutoff`, or the ids found so)
    holds; returns how many were newly flagged. One UPDATE, idempotent, never removes a flag (a dismissed
    suggestion does: :func:`thought_unflag_unverified`)."""
    return (
        Thought.objects.filter(unresolved_contradiction, superseded=False)
        .exclude(quality_flags__contains=[QualityFlag.UNVERIFIED.value])
        .update(quality_flags=flag_appended(QualityFlag.UNVERIFIED))
    )
