"""Pheromones (SPEC 2.3, 2.6): reinforcement on access, implicit feedback, hourly decay.

Every write here is one UPDATE computed by PostgreSQL from the current row (never a value read
into Python and written back), so concurrent requests can't lose each other's increments. Rows are
locked in id order first, so two requests touching overlapping sets can't deadlock.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from brain.choices import SuggestionStatus
from brain.models import QueryLog, Thought
from brain.ranking import PHEROMONE_MAX
from core.db import asynchronous_commit, is_deadlock, prepared_cursor
from core.models import Agent, Space

REINFORCE_STEP = 0.05  # per access, capped at PHEROMONE_MAX
CO_RETRIEVAL_PARTNERS_MAX = 50  # partners kept per thought: the current ones, then the most frequent
FEEDBACK_STEP = 0.02  # implicit feedback: the session contributed after being shown the thought
DECAY_FACTOR = 0.995
DECAY_FLOOR = 0.1
DECAY_IDLE = timedelta(hours=1)

_REINFORCE_SET = """
    access_count = t.access_count + 1,
    pheromone_weight = LEAST(%(max)s, t.pheromone_weight + %(step)s),
    last_accessed = %(now)s,
    accessed_by = CASE WHEN %(agent)s::varchar = ANY(t.accessed_by) THEN t.accessed_by
                       ELSE array_append(t.accessed_by, %(agent)s::varchar) END,
    co_retrieved_with = (
        SELECT COALESCE(jsonb_object_agg(kept.k, kept.c), '{}'::jsonb) FROM (
            SELECT merged.k, SUM(merged.c)::int AS c FROM (
                SELECT key AS k, (value #>> '{}')::int AS c, 0 AS now FROM jsonb_each(t.co_retrieved_with)
                UNION ALL
                SELECT partner, 1, 1 FROM unnest(%(ids)b::text[]) AS partner WHERE partner <> t.id::text
            ) AS merged
            GROUP BY merged.k
            ORDER BY MAX(merged.now) DESC, SUM(merged.c) DESC, merged.k
            LIMIT %(cap)s
        ) AS kept
    )
"""
# One access to each returned thought, one statement: lock them in id order (two calls with
# overlapping results can't deadlock), then reinforce them, every increment computed from the current
# row (no increment is lost). The ids are one binary array parameter (``%(ids)b``: no per-id text quoting).
_REINFORCE_SQL = f"""
WITH locked AS (
    SELECT id FROM brain_thought
    WHERE space_id = %(space)s AND id = ANY(%(ids)b::uuid[])
    ORDER BY id FOR UPDATE
), reinforced AS (
    UPDATE brain_thought AS t SET {_REINFORCE_SET}
    WHERE t.id IN (SELECT id FROM locked)
    RETURNING 1
)
SELECT (SELECT count(*) FROM reinforced)
"""
# A memory call's query-log row, one statement, which also says whether the agent had queried this
# space before (the statement's snapshot does not see its own insert) and whether a pending
# correction suggestion concerns the agent or the session.
_LOG_SQL = """
WITH logged AS (
    INSERT INTO brain_querylog
        (space_id, agent_id, agent_ref, session_id, query_text, results, stored_thought_id, created_at)
    VALUES (%(space)s, %(agent_id)s, %(agent_ref)s, %(session_id)s, %(query_text)s, %(results)s::jsonb,
            %(stored_thought_id)s, %(now)s)
    RETURNING id
)
SELECT (SELECT id FROM logged),
       EXISTS (SELECT 1 FROM brain_querylog WHERE space_id = %(space)s AND agent_id = %(agent_id)s),
       EXISTS (SELECT 1 FROM brain_correctionsuggestion
               WHERE space_id = %(space)s AND status = %(pending)s
                     AND (agent_id = %(agent_id)s OR session_id = %(session_id)s))
"""


def _bookkeeping(select_sql: str) -> tuple[str, str]:
    """A memory call's bookkeeping statement (a SELECT), as run inside a caller's transaction and as
    run in a transaction of its own (autocommit). The latter commits without waiting for its WAL to
    reach the disk (``synchronous_commit`` off for that transaction only): reinforcement, feedback
    and the query log are bookkeeping of reads, and a PostgreSQL crash (not a restart: a clean stop
    flushes the WAL) can lose at most the last ~0.6 s of them (3 × wal_writer_delay), never corrupt
    them or anything else. A contribution, a transition or a turn still commits synchronously (a 2xx
    means it is on disk). Inside a caller's transaction the setting would apply to that transaction's
    commit, so it is not set there."""
    return select_sql, asynchronous_commit(select_sql)


def _bookkeeping_sql(variants: tuple[str, str]) -> str:
    return variants[0] if connection.in_atomic_block else variants[1]


_REINFORCE = _bookkeeping(_REINFORCE_SQL)
_LOG = _bookkeeping(_LOG_SQL)


@dataclass(frozen=True)
class RetrievalRecord:
    query_log_id: int
    queried_before: bool  # the agent had called the memory endpoint of this space before
    suggestions_pending: bool  # a pending correction suggestion concerns this agent or session


def thoughts_reinforce(*, space: Space, thought_ids: Iterable[str | uuid.UUID], agent_name: str) -> int:
    """One access to each thought by ``agent_name``: count, weight, who, when, and co-retrieval.

    Every thought returned together counts each other as a co-retrieval partner (+1). At most
    CO_RETRIEVAL_PARTNERS_MAX partners are kept: this access's partners, then the most frequent
    earlier ones, so a new partner always gets in and the rarest old one makes room.
    """
    ids = sorted(dict.fromkeys(str(i) for i in thought_ids))
    if not ids:
        return 0
    params = {
        "max": PHEROMONE_MAX,
        "step": REINFORCE_STEP,
        "now": timezone.now(),
        "agent": agent_name,
        "ids": ids,
        "cap": CO_RETRIEVAL_PARTNERS_MAX,
        "space": space.pk,
    }
    with prepared_cursor() as cursor:
        _execute_retrying_deadlock(cursor, _bookkeeping_sql(_REINFORCE), params)
        return cursor.fetchone()[0]


#: A memory call's writes are each one statement in its own transaction: when PostgreSQL picks one as a
#: deadlock's victim (another transaction locking some of the same thoughts in another order), nothing
#: of it happened, so it is simply run again, at most this many more times (a correction's transaction
#: too: brain.services.corrections.thought_correct).
DEADLOCK_RETRIES = 2


def _execute_retrying_deadlock(cursor, sql: str, params: dict) -> None:
    from django.db import OperationalError

    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            cursor.execute(sql, params)
            return
        except OperationalError as exc:
            retryable = is_deadlock(exc) and not connection.in_atomic_block
            if not retryable or attempt == DEADLOCK_RETRIES:
                raise


def retrieval_log(
    *,
    space: Space,
    agent: Agent,
    agent_ref: str,
    session_id: str,
    query_text: str,
    results: list[dict],
    stored_thought_id: uuid.UUID | None = None,
) -> RetrievalRecord:
    """One memory call's query-log row (every retrieval leaves one, SPEC 2.3), in one statement that
    also tells whether it is the agent's first call and whether a correction suggestion is pending.
    Reinforcing what it returned is :func:`thoughts_reinforce`, which the memory call runs after its
    response is sent."""
    params = {
        "now": timezone.now(),
        "space": space.pk,
        "agent_id": agent.pk,
        "agent_ref": agent_ref,
        "session_id": session_id,
        "query_text": query_text,
        "results": json.dumps(results),
        "stored_thought_id": stored_thought_id,
        "pending": SuggestionStatus.PENDING,
    }
    with prepared_cursor() as cursor:
        cursor.execute(_bookkeeping_sql(_LOG), params)
        log_id, queried_before, suggestions_pending = cursor.fetchone()[:3]
    return RetrievalRecord(query_log_id=log_id, queried_before=queried_before, suggestions_pending=suggestions_pending)


#: The next batch of old rows, but never those of a session in ``keep`` (space id, session id pairs).
_QUERY_LOG_EXPIRING_SQL = """
SELECT q.id FROM brain_querylog q
WHERE q.created_at < %(cutoff)s
  AND NOT EXISTS (
      SELECT 1 FROM unnest(%(keep_spaces)s::int[], %(keep_sessions)s::text[]) AS k(space_id, session_id)
      WHERE k.space_id = q.space_id AND k.session_id = q.session_id)
ORDER BY q.id LIMIT %(batch)s
"""


#: Who still reads old query-log rows: callables returning ``(space id, session id)`` pairs whose rows
#: :func:`query_logs_expire` keeps. An app above brain registers its own when it loads (tasks: the
#: sessions open tasks' memory gates read, ``tasks.apps``), so brain needs to know none of them.
QUERY_LOG_KEEPERS: list[Callable[[], Iterable[tuple[int, str]]]] = []


def query_logs_expire(*, now: datetime | None = None, batch_size: int = 5000) -> int:
    """Delete the query-log rows older than ``QUERY_LOG_RETENTION_DAYS`` (0: none), in batches of
    ``batch_size`` (each its own transaction), except those of the sessions :data:`QUERY_LOG_KEEPERS`
    name. Returns how many were deleted. A turn log that named a deleted row keeps its items and loses
    the link (``on_delete=SET_NULL``).

    What else reads old rows: an agent's first call in a space gets onboarding guidance
    (``queried_before``), so an agent silent for longer than the retention gets it again."""
    days = settings.QUERY_LOG_RETENTION_DAYS
    if days <= 0:
        return 0
    keep = [pair for keeper in QUERY_LOG_KEEPERS for pair in keeper()]
    params = {
        "cutoff": (now or timezone.now()) - timedelta(days=days),
        "keep_spaces": [space_id for space_id, _ in keep],
        "keep_sessions": [session_id for _, session_id in keep],
        "batch": batch_size,
    }
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_QUERY_LOG_EXPIRING_SQL, params)
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                # only("pk"): the collector reads the rows again to null the turn logs' links; not their results.
                deleted += QueryLog.objects.filter(pk__in=ids).only("pk").delete()[1].get(QueryLog._meta.label, 0)
        if len(ids) < batch_size:
            return deleted


#: Implicit feedback in one statement: the thoughts the session's memory calls returned since its
#: previous contribution (that contribution's own results included: seen after it) and before this
#: call, but not the thought this call stored, get +step weight (capped), locked in id order first
#: like every write here. A showing counts for one contribution only, so a long session does not
#: re-reward all it ever saw. Ids are read from the logs' ``results`` (``[{"id", "score"}]``); an
#: entry that is not an object with a UUID id (an imported log) is skipped.
_FEEDBACK_SQL = """
WITH previous AS (
    SELECT COALESCE(max(p.id), 0) AS id FROM brain_querylog p
    WHERE p.space_id = %(space)s AND p.session_id = %(session_id)s AND p.id < %(before_id)s
          AND p.stored_thought_id IS NOT NULL
), shown AS (
    SELECT DISTINCT (item ->> 'id')::uuid AS id
    FROM brain_querylog q
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(q.results) = 'array' THEN q.results ELSE '[]'::jsonb END) AS item
    WHERE q.space_id = %(space)s AND q.session_id = %(session_id)s
          AND q.id < %(before_id)s AND q.id >= (SELECT id FROM previous)
          AND jsonb_typeof(item) = 'object'
          AND (item ->> 'id') ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
), locked AS (
    SELECT t.id FROM brain_thought t
    WHERE t.space_id = %(space)s AND t.id IN (SELECT id FROM shown) AND t.id <> %(stored_id)s
    ORDER BY t.id FOR UPDATE
), rewarded AS (
    UPDATE brain_thought AS t SET pheromone_weight = LEAST(%(max)s, t.pheromone_weight + %(step)s)
    WHERE t.id IN (SELECT id FROM locked)
    RETURNING 1
)
SELECT (SELECT count(*) FROM rewarded)
"""
_FEEDBACK = _bookkeeping(_FEEDBACK_SQL)


def session_feedback(
    *, space: Space, session_id: str, before_id: int, stored_id: uuid.UUID, step: float = FEEDBACK_STEP
) -> int:
    """Implicit feedback (SPEC 2.6): +``step`` weight (capped) to what the session was shown on the way
    to the contribution ``stored_id`` (see ``_FEEDBACK_SQL``); returns how many thoughts it rewarded.
    One prepared statement, retried like the memory call's write if chosen as a deadlock victim."""
    params = {
        "space": space.pk,
        "session_id": session_id,
        "before_id": before_id,
        "stored_id": stored_id,
        "max": PHEROMONE_MAX,
        "step": step,
    }
    with prepared_cursor() as cursor:
        _execute_retrying_deadlock(cursor, _bookkeeping_sql(_FEEDBACK), params)
        return cursor.fetchone()[0]


def thoughts_decay(*, now: datetime | None = None) -> int:
    """Hourly: ``max(0.1, w·0.995)`` for every thought not accessed in the last hour.

    Never-accessed thoughts count from ``created_at``. Returns how many weights changed.
    """
    cutoff = (now or timezone.now()) - DECAY_IDLE
    return (
        Thought.objects.alias(seen=Coalesce("last_accessed", "created_at"))
        .filter(seen__lt=cutoff, pheromone_weight__gt=DECAY_FLOOR)
        .update(pheromone_weight=Greatest(Value(DECAY_FLOOR), F("pheromone_weight") * DECAY_FACTOR))
    )
