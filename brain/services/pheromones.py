"""Pheromones (SPEC 2.3, 2.6): reinforcement on access, implicit feedback, hourly decay.

Every write here is one UPDATE computed by PostgreSQL from the current row (never a value read
into Python and written back), so concurrent requests can't lose each other's increments. Rows are
locked in id order first, so two requests touching overlapping sets can't deadlock.

Reinforcement is counted from the query log: a memory call's log row (written before its answer)
names what it returned, and :func:`reinforcement_fold` counts a batch of such rows at once, each
exactly once, after some call's response (at most every ``REINFORCEMENT_FOLD_SECONDS`` per process)
and every minute in the worker (``brain.jobs.reinforcement_fold``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from brain.choices import SuggestionStatus
from brain.models import QueryLog, Thought
from brain.ranking import PHEROMONE_MAX
from core.db import asynchronous_commit, is_deadlock, prepared_cursor
from core.models import Agent, Space

logger = logging.getLogger("colony.brain.pheromones")
REINFORCE_STEP = 0.05  # per access, capped at PHEROMONE_MAX
CO_RETRIEVAL_PARTNERS_MAX = 50  # partners kept per thought: the current ones, then the most frequent
FEEDBACK_STEP = 0.02  # implicit feedback: the session contributed after being shown the thought
DECAY_FACTOR = 0.995
DECAY_FLOOR = 0.1
DECAY_IDLE = timedelta(hours=1)
#: Largest value a counter (``access_count``, a co-retrieval count) takes: the fold saturates there,
#: far below PostgreSQL's int4 (2,147,483,647), so no count can overflow its column.
COUNTER_MAX = 1_000_000_000

#: The thoughts a query-log row returned, as ``results`` names them (``[{"id", "score"}]``), each once;
#: an entry that is not an object with a UUID id (an imported log's) is skipped. The fold and the
#: implicit feedback (``_FEEDBACK_SQL``) both read a row's results through it.
_RESULT_IDS_SQL = r"""
    SELECT array_agg(DISTINCT (item ->> 'id')::uuid) AS ids
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof({results}) = 'array' THEN {results} ELSE '[]'::jsonb END) AS item
    WHERE jsonb_typeof(item) = 'object'
          AND (item ->> 'id') ~* '^[0-9a-f]{{8}}-?[0-9a-f]{{4}}-?[0-9a-f]{{4}}-?[0-9a-f]{{4}}-?[0-9a-f]{{12}}$'
"""
#: The fold, one statement (SPEC 2.3's "every access reinforces", counted in batches):
#:
#: - ``claimed``: the oldest unreinforced query-log rows (at most ``batch``; of ``space``, or of every
#:   space), locked, and skipped by a concurrent fold (``SKIP LOCKED``), and ``marked`` reinforced in
#:   this same statement, so each row is counted once: two folds never take the same row, and a fold
#:   that fails changed nothing, its rows included.
#: - ``access``: one row per (log row, thought it returned), with who asked (the agent's id, as text;
#:   none once the agent is deleted: never the name a request body claimed, ``agent_ref``), when, and
#:   the row's other thoughts (the access's co-retrieval partners).
#: - ``locked``: those thoughts of the row's own space, locked in id order (as every write here
#:   locks), so a fold and a memory call's other writes touching overlapping thoughts can't deadlock.
#: - ``tally``, per thought: ``n`` accesses (``min(access_count + n, COUNTER_MAX)``; weight
#:   ``min(max, w + n × step)``, which is what ``n`` capped steps add), the newest access's time as
#:   ``last_accessed`` (when it was asked, not when it was counted), the agents in the order they
#:   asked (new ones are appended to ``accessed_by``, by id: a renamed agent stays one agent), and every
#:   access's partners (+1 each time a
#:   partner came back with it). At most ``cap`` partners are kept: those of the counted accesses
#:   first (the most frequent of them first), then the most frequent earlier ones, ties by key; one
#:   access at a time this is the rule "a new partner always gets in and the rarest old one makes
#:   room". Counts add up as numeric and are kept at most ``COUNTER_MAX``: no stored count (an
#:   import's, an old row's) can overflow an int.
#:
#: Each part reads the one before once, by hash or by the primary key: no join between two CTEs'
#: rows, whose sizes the planner can't estimate (a join of the accesses with themselves for the
#: partners takes 66 of 990 ms for 70 calls, and the partners' join with the tally the rest).
_FOLD_SQL = f"""
WITH claimed AS MATERIALIZED (
    SELECT q.id, q.space_id, q.agent_id, q.agent_ref, q.results, q.created_at
    FROM brain_querylog q
    WHERE NOT q.reinforced AND (%(space)s::bigint IS NULL OR q.space_id = %(space)s::bigint)
    ORDER BY q.id LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), marked AS (
    UPDATE brain_querylog q SET reinforced = true WHERE q.id IN (SELECT id FROM claimed)
), access AS MATERIALIZED (
    SELECT c.id AS log_id, c.space_id, c.created_at, c.agent_id::varchar AS agent,
           x.thought_id, array_remove(r.ids, x.thought_id) AS partners
    FROM claimed c
    CROSS JOIN LATERAL ({_RESULT_IDS_SQL.format(results="c.results")}) AS r
    CROSS JOIN LATERAL unnest(r.ids) AS x(thought_id)
), locked AS MATERIALIZED (
    SELECT t.id, t.space_id FROM (SELECT DISTINCT thought_id, space_id FROM access) a
    JOIN brain_thought t ON t.id = a.thought_id AND t.space_id = a.space_id
    ORDER BY t.id FOR UPDATE OF t
), tally AS MATERIALIZED (
    SELECT a.thought_id, count(*) AS n, max(a.created_at) AS last_at,
           array_agg(a.agent ORDER BY a.log_id) AS agents,
           string_agg(array_to_string(a.partners, ' '), ' ') AS partners
    FROM access a
    WHERE (a.thought_id, a.space_id) IN (SELECT id, space_id FROM locked)
    GROUP BY a.thought_id
), reinforced AS (
    UPDATE brain_thought AS t SET
        access_count = LEAST(t.access_count + g.n, %(counter_max)s),
        pheromone_weight = LEAST(%(max)s, t.pheromone_weight + g.n * %(step)s),
        last_accessed = GREATEST(t.last_accessed, g.last_at),
        accessed_by = t.accessed_by || ARRAY(
            SELECT x.agent FROM unnest(g.agents) WITH ORDINALITY AS x(agent, ord)
            WHERE x.agent IS NOT NULL AND NOT (x.agent = ANY(t.accessed_by)) GROUP BY x.agent ORDER BY min(x.ord)),
        co_retrieved_with = (
            SELECT COALESCE(jsonb_object_agg(kept.k, kept.c), '{{}}'::jsonb) FROM (
                SELECT merged.k, LEAST(SUM(merged.c), %(counter_max)s)::int AS c FROM (
                    SELECT key AS k, (value #>> '{{}}')::numeric AS c, 0 AS now FROM jsonb_each(t.co_retrieved_with)
                    UNION ALL
                    SELECT partner, 1, 1 FROM unnest(string_to_array(g.partners, ' ')) AS partner
                    WHERE partner <> ''
                ) AS merged
                GROUP BY merged.k
                ORDER BY MAX(merged.now) DESC, SUM(merged.c) DESC, merged.k
                LIMIT %(cap)s
            ) AS kept)
    FROM tally g
    WHERE t.id = g.thought_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM claimed), (SELECT count(*) FROM reinforced)
"""  # noqa: S608 - names from this module's constants; values are bound


# A memory call's query-log row, one statement, which also says whether the agent had queried this
# space before (the statement's snapshot does not see its own insert) and whether a pending
# correction suggestion concerns the agent or the session.
#
# Both reads ask for "the newest such row" (a scalar subquery ORDER BY created_at DESC LIMIT 1; an
# EXISTS would drop the ORDER BY), which only the agent's index (querylog_agent) and the suggestions'
# (suggestion_status) give in order, so every plan reads them by index. As plain EXISTS, a generic
# plan (a prepared statement after five runs, or the search transaction's force_generic_plan when it
# runs as the search's companion) expects the agent's rows to be everywhere and reads the log in
# table or space order until it meets one: with a few agents, every call of an agent whose rows are
# recent reads all the older rows of the others first (1.8 ms for 3,370 rows at 7,000, linear in the
# log, which keeps 90 days). docs/performance.md, "PostgreSQL".
_LOG_SQL = """
WITH logged AS (
    INSERT INTO brain_querylog
        (space_id, agent_id, agent_ref, session_id, query_text, results, stored_thought_id, created_at, reinforced)
    VALUES (%(space)s, %(agent_id)s, %(agent_ref)s, %(session_id)s, %(query_text)s, %(results)s::jsonb,
            %(stored_thought_id)s, %(now)s, %(reinforced)s)
    RETURNING id
)
SELECT (SELECT id FROM logged),
       (SELECT true FROM brain_querylog WHERE agent_id = %(agent_id)s AND space_id = %(space)s
        ORDER BY created_at DESC LIMIT 1) IS NOT NULL,
       (SELECT true FROM brain_correctionsuggestion
        WHERE space_id = %(space)s AND status = %(pending)s
              AND (agent_id = %(agent_id)s OR session_id = %(session_id)s)
        ORDER BY created_at DESC LIMIT 1) IS NOT NULL
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


_LOG = _bookkeeping(_LOG_SQL)


@dataclass(frozen=True)
class RetrievalRecord:
    query_log_id: int
    queried_before: bool  # the agent had called the memory endpoint of this space before
    suggestions_pending: bool  # a pending correction suggestion concerns this agent or session


#: Query-log rows one fold counts at most: one statement, ~10 thoughts a row. A fold after a response
#: takes one batch; the worker's job (:func:`reinforcement_fold_all`) takes batches until none is left.
REINFORCEMENT_FOLD_BATCH = 500
_FOLD = _bookkeeping(_FOLD_SQL)


@dataclass(frozen=True)
class Fold:
    logs: int  # query-log rows counted
    thoughts: int  # thoughts reinforced (one update each, however many of the rows returned it)


def reinforcement_fold(*, space: Space | None = None, batch: int = REINFORCEMENT_FOLD_BATCH) -> Fold:
    """Count the accesses of the oldest ``batch`` unreinforced query-log rows (of ``space``, or of every
    space): each access ``access_count + 1``, weight ``min(10, w + 0.05)``, ``accessed_by``,
    ``last_accessed``, and co-retrieval (see ``_FOLD_SQL``). One statement in a transaction of its own
    (run again if chosen as a deadlock's victim); rows a concurrent fold holds are left to it, so no
    row is counted twice and none is lost."""
    params = {
        "batch": batch,
        "space": space.pk if space is not None else None,
        "max": PHEROMONE_MAX,
        "step": REINFORCE_STEP,
        "cap": CO_RETRIEVAL_PARTNERS_MAX,
        "counter_max": COUNTER_MAX,
    }
    with prepared_cursor() as cursor:
        _execute_retrying_deadlock(cursor, _bookkeeping_sql(_FOLD), params)
        logs, thoughts = cursor.fetchone()[:2]
    return Fold(logs=logs, thoughts=thoughts)


#: Errors that say the server or the connection is in trouble, not one space's rows.
_SERVER_TROUBLE = (OperationalError, InterfaceError)


@contextmanager
def _space_isolated(job: str, space: Space) -> Iterator[None]:
    """Run one space's part of a periodic job so that its failure stays its own: inside a caller's
    transaction in a savepoint (outside one, each statement of the job commits on its own), and a
    database error is logged with the space and the traceback, then the job goes on with the next
    space. A row no statement can take (a value planted by hand) stops its space only, every run,
    and every run says so in the error log. A lost connection or a timeout is not a space's fault: it
    goes up, for the job's retry."""
    try:
        if connection.in_atomic_block:
            with transaction.atomic():
                yield
        else:
            yield
    except _SERVER_TROUBLE:
        raise
    except DatabaseError:
        logger.exception("%s failed in space %s (id %s); the other spaces go on", job, space.slug, space.pk)


def _spaces_waiting() -> list[Space]:
    """The spaces with query-log rows still to count (read by the partial index of unreinforced rows)."""
    waiting = QueryLog.objects.filter(reinforced=False).values("space_id").distinct()
    return list(Space.objects.filter(pk__in=waiting).order_by("pk"))


def reinforcement_fold_all(
    *, space: Space | None = None, batch: int = REINFORCEMENT_FOLD_BATCH, max_batches: int = 1000
) -> Fold:
    """:func:`reinforcement_fold` until no row is left (or ``max_batches`` ran): the worker's minute
    job, and what an export runs first so that the thoughts it writes carry every access. Without
    ``space`` it goes space by space (:func:`_space_isolated`): a space whose rows fail is logged and
    left for the next run, and the others are counted."""
    if space is None:
        logs = thoughts = 0
        for each in _spaces_waiting():
            with _space_isolated("The reinforcement fold", each):
                fold = reinforcement_fold_all(space=each, batch=batch, max_batches=max_batches)
                logs, thoughts = logs + fold.logs, thoughts + fold.thoughts
        return Fold(logs=logs, thoughts=thoughts)
    logs = thoughts = 0
    for _ in range(max_batches):
        fold = reinforcement_fold(space=space, batch=batch)
        logs, thoughts = logs + fold.logs, thoughts + fold.thoughts
        if fold.logs < batch:
            break
    return Fold(logs=logs, thoughts=thoughts)


_fold_lock = threading.Lock()
_folded_at = -float("inf")  # time.monotonic() of this process's last fold after a response


def reinforcement_fold_due() -> Fold | None:
    """After a memory call's response: fold one batch if this process has not folded in the last
    ``REINFORCEMENT_FOLD_SECONDS`` (0: after every call). Between two folds a process's calls only
    log: their reinforcement waits at most that long while calls keep coming, and at most a minute
    (the worker's job) when they stop. Returns the fold, or None when it was not due.

    One statement for every space; when it fails (a row of one space it can't take), the batch is
    folded space by space instead, so the failing space is logged and the others are counted."""
    global _folded_at
    now = time.monotonic()
    with _fold_lock:
        if now - _folded_at < settings.REINFORCEMENT_FOLD_SECONDS:
            return None
        _folded_at = now
    try:
        if connection.in_atomic_block:
            with transaction.atomic():
                return reinforcement_fold()
        return reinforcement_fold()
    except _SERVER_TROUBLE:
        raise
    except DatabaseError:
        logs = thoughts = 0
        for space in _spaces_waiting():
            with _space_isolated("The reinforcement fold", space):
                fold = reinforcement_fold(space=space)
                logs, thoughts = logs + fold.logs, thoughts + fold.thoughts
        return Fold(logs=logs, thoughts=thoughts)


#: A memory call's writes are each one statement in its own transaction: when PostgreSQL picks one as a
#: deadlock's victim (another transaction locking some of the same thoughts in another order), nothing
#: of it happened, so it is simply run again, at most this many more times (a correction's transaction
#: too, brain.services.corrections.thought_correct, and a keyed call's, brain.services.receipts).
DEADLOCK_RETRIES = 2


def _execute_retrying_deadlock(cursor, sql: str, params: dict) -> None:
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
    The row is written unreinforced when ``results`` is not empty: :func:`reinforcement_fold` counts
    those accesses later (the memory call runs :func:`reinforcement_fold_due` after its response)."""
    sql, params = retrieval_log_begin(
        space=space, agent=agent, agent_ref=agent_ref, session_id=session_id, query_text=query_text
    )
    params.update(results=json.dumps(results), stored_thought_id=stored_thought_id, reinforced=not results)
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return retrieval_record(cursor.fetchone())


def retrieval_record(row: tuple) -> RetrievalRecord:
    """The :class:`RetrievalRecord` in the row of the log statement (:func:`retrieval_log`, or
    :func:`retrieval_log_begin`'s as the search ran it)."""
    log_id, queried_before, suggestions_pending = row[:3]
    return RetrievalRecord(query_log_id=log_id, queried_before=queried_before, suggestions_pending=suggestions_pending)


def retrieval_log_begin(
    *, space: Space, agent: Agent, agent_ref: str, session_id: str, query_text: str
) -> tuple[str, dict]:
    """A retrieve-only memory call's query-log row, as the statement its search runs right after the
    search statement (``search.thought_search(companion=)``: the same transaction and, in pipeline
    mode, the same round trip), before the results are ranked: the row says who queried what in which
    session, so the workflow's memory gates see it before the answer is sent, without a wait of its
    own (~1 ms of a call; docs/performance.md). Its ``results`` are JSON ``null``
    until :func:`retrieval_results` names them, right after the answer is sent, and it is written
    reinforced (nothing to count) until then, so no fold takes it half-written. Its row is
    :func:`retrieval_record`'s. Not run early for a contribution: its flags read the agent's recent
    queries after the search, and this call's own must not be among them (``step_flags``); its
    :func:`retrieval_log` is this statement with the results and the stored thought filled in."""
    params = {
        "now": timezone.now(),
        "space": space.pk,
        "agent_id": agent.pk,
        "agent_ref": agent_ref,
        "session_id": session_id,
        "query_text": query_text,
        "results": "null",
        "stored_thought_id": None,
        "pending": SuggestionStatus.PENDING,
        "reinforced": True,
    }
    return _bookkeeping_sql(_LOG), params


# Only a row still waiting for its results (JSON null): naming them twice, or over an imported row's,
# changes nothing.
_RESULTS_SQL = """
WITH named AS (
    UPDATE brain_querylog SET results = %(results)s::jsonb, reinforced = %(reinforced)s
    WHERE id = %(id)s AND jsonb_typeof(results) = 'null'
    RETURNING 1
)
SELECT count(*) FROM named
"""
_RESULTS = _bookkeeping(_RESULTS_SQL)


def retrieval_results(*, query_log_id: int, results: list[dict]) -> bool:
    """Name what a call logged by :func:`retrieval_log_begin` returned (``[{"id", "score"}]``, best
    first): the row becomes unreinforced when there are any, for :func:`reinforcement_fold` to count.
    One statement, committed asynchronously like the log itself. Whether the row was waiting for them."""
    params = {"id": query_log_id, "results": json.dumps(results), "reinforced": not results}
    with prepared_cursor() as cursor:
        cursor.execute(_bookkeeping_sql(_RESULTS), params)
        return bool(cursor.fetchone()[0])


#: The next batch of old rows, but never those of a session in ``keep`` (space id, session id pairs),
#: nor one whose accesses are still to be counted (the fold takes it first).
_QUERY_LOG_EXPIRING_SQL = """
SELECT q.id FROM brain_querylog q
WHERE q.space_id = %(space)s AND q.created_at < %(cutoff)s AND q.reinforced
  AND NOT EXISTS (
      SELECT 1 FROM unnest(%(keep_spaces)s::int[], %(keep_sessions)s::text[], %(keep_since)s::timestamptz[])
          AS k(space_id, session_id, since)
      WHERE k.space_id = q.space_id AND k.session_id = q.session_id AND q.created_at >= k.since)
ORDER BY q.id LIMIT %(batch)s
"""


#: Who still reads old query-log rows: callables returning ``(space id, session id, since)``: the rows of
#: that session made since then are kept by :func:`query_logs_expire`. An app above brain registers its own
#: when it loads (tasks: the sessions open tasks' memory gates read, ``tasks.apps``), so brain needs to
#: know none of them.
QUERY_LOG_KEEPERS: list[Callable[[], Iterable[tuple[int, str, datetime]]]] = []


def query_logs_expire(*, now: datetime | None = None, batch_size: int = 5000) -> int:
    """Delete the query-log rows older than ``QUERY_LOG_RETENTION_DAYS`` (0: none), in batches of
    ``batch_size`` (each its own transaction), except those :data:`QUERY_LOG_KEEPERS` name (a session's
    rows since a moment). Returns how many were deleted. Space by space (:func:`_space_isolated`): a space whose
    delete fails is logged and the others are expired. A turn log that named a deleted row keeps its items and loses
    the link (``on_delete=SET_NULL``).

    What else reads old rows: an agent's first call in a space gets onboarding guidance
    (``queried_before``), so an agent silent for longer than the retention gets it again."""
    days = settings.QUERY_LOG_RETENTION_DAYS
    if days <= 0:
        return 0
    keep = [kept for keeper in QUERY_LOG_KEEPERS for kept in keeper()]
    params = {
        "cutoff": (now or timezone.now()) - timedelta(days=days),
        "keep_spaces": [space_id for space_id, _, _ in keep],
        "keep_sessions": [session_id for _, session_id, _ in keep],
        "keep_since": [since for _, _, since in keep],
        "batch": batch_size,
    }
    deleted = 0
    for space in Space.objects.order_by("pk"):
        with _space_isolated("The query-log expiry", space):
            deleted += _expire_space(space=space, params=params)
    return deleted


def _expire_space(*, space: Space, params: dict) -> int:
    """:func:`query_logs_expire` for one space: batches until none is left; how many rows went."""
    params = {**params, "space": space.pk}
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_QUERY_LOG_EXPIRING_SQL, params)
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                # only("pk"): the collector reads the rows again to null the turn logs' links; not their results.
                deleted += QueryLog.objects.filter(pk__in=ids).only("pk").delete()[1].get(QueryLog._meta.label, 0)
        if len(ids) < params["batch"]:
            return deleted


#: Implicit feedback in one statement: the thoughts the contributing agent's memory calls in the session
#: returned since its previous contribution there (that contribution's own results included: seen after
#: it) and before this call, but not the thought this call stored, get +step weight (capped). Another
#: agent's calls naming the session don't count: nobody's contribution rewards what someone else was
#: shown. Locked in id order first
#: like every write here. A showing counts for one contribution only, so a long session does not
#: re-reward all it ever saw. Ids are read from the logs' ``results`` as the fold reads them
#: (``_RESULT_IDS_SQL``: an entry that is not an object with a UUID id, e.g. an imported log's, is skipped).
#: Both reads of the log go by the session's index (``querylog_session``): the ids are compared as
#: ``id + 0``, which no index answers. Compared as ``id``, the rows between the session's previous
#: contribution and this call were read by primary key, every session's: with no previous
#: contribution, the whole log (9–11 ms at 300,000 rows; docs/performance.md, "PostgreSQL").
_FEEDBACK_SQL = f"""
WITH previous AS (
    SELECT COALESCE(max(p.id + 0), 0) AS id FROM brain_querylog p
    WHERE p.space_id = %(space)s AND p.session_id = %(session_id)s AND p.agent_id = %(agent)s
          AND p.id + 0 < %(before_id)s AND p.stored_thought_id IS NOT NULL
), shown AS (
    SELECT DISTINCT x.id
    FROM brain_querylog q
    CROSS JOIN LATERAL ({_RESULT_IDS_SQL.format(results="q.results")}) AS r
    CROSS JOIN LATERAL unnest(r.ids) AS x(id)
    WHERE q.space_id = %(space)s AND q.session_id = %(session_id)s AND q.agent_id = %(agent)s
          AND q.id + 0 < %(before_id)s AND q.id + 0 >= (SELECT id FROM previous)
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
"""  # noqa: S608 - names from this module's constants; values are bound
_FEEDBACK = _bookkeeping(_FEEDBACK_SQL)


def session_feedback(
    *,
    space: Space,
    agent: Agent,
    session_id: str,
    before_id: int,
    stored_id: uuid.UUID,
    step: float = FEEDBACK_STEP,
) -> int:
    """Implicit feedback (SPEC 2.6): +``step`` weight (capped) to what ``agent`` was shown in the session
    on the way to its contribution ``stored_id`` (see ``_FEEDBACK_SQL``); returns how many thoughts it
    rewarded.
    One prepared statement, retried like the memory call's write if chosen as a deadlock victim."""
    params = {
        "space": space.pk,
        "agent": agent.pk,
        "session_id": session_id,
        "before_id": before_id,
        "stored_id": stored_id,
        "max": PHEROMONE_MAX,
        "step": step,
    }
    with prepared_cursor() as cursor:
        _execute_retrying_deadlock(cursor, _bookkeeping_sql(_FEEDBACK), params)
        return cursor.fetchone()[0]


#: Thoughts the decay changes per transaction.
DECAY_BATCH = 2000


def decay_hour(now: datetime) -> datetime:
    """The clock hour a decay run at ``now`` steps: its start, in UTC (``Thought.decayed_at``)."""
    return now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def thoughts_decay(*, now: datetime | None = None, batch_size: int = DECAY_BATCH) -> int:
    """Hourly: ``max(0.1, w·0.995)`` for every thought not accessed in the last hour, once per clock hour.

    Never-accessed thoughts count from ``created_at``. Accesses not counted yet are folded first, so a
    thought asked for a moment ago is seen as accessed. Returns how many weights changed. Space by
    space (:func:`_space_isolated`): a space whose update fails is logged and the others decay.

    Safe to run again within the hour: each step records its hour in ``decayed_at`` and a run skips
    the thoughts already stepped for its hour (:func:`_decay_space`). The job's retry after a lost
    connection (which ``_space_isolated`` lets up) or a redelivered message resumes where the run
    stopped; the spaces it had committed don't decay twice.
    """
    reinforcement_fold_all()
    cutoff = (now or timezone.now()) - DECAY_IDLE
    changed = 0
    for space in Space.objects.order_by("pk"):
        with _space_isolated("The pheromone decay", space):
            changed += _decay_space(space=space, cutoff=cutoff, batch_size=batch_size)
    return changed


def _decay_space(*, space: Space, cutoff: datetime, batch_size: int) -> int:
    """One space's decay in batches of ``batch_size`` thoughts in id order, each its own transaction, so
    it holds few rows at a time; a row another transaction holds is skipped (``SKIP LOCKED``: it decays
    at the next run, a retry's or the next hour's) instead of waited for.

    The run's hour is the clock hour of ``cutoff + DECAY_IDLE`` (the run's now, :func:`decay_hour`). Each
    step sets ``decayed_at`` to that hour's start in the same UPDATE, and a thought whose ``decayed_at``
    is at or after it is not selected: at most one step per thought per clock hour, however often the
    job runs for that hour."""
    hour = decay_hour(cutoff + DECAY_IDLE)
    idle = (
        Thought.objects.filter(space=space)
        .alias(seen=Coalesce("last_accessed", "created_at"))
        .filter(seen__lt=cutoff, pheromone_weight__gt=DECAY_FLOOR)
        .filter(Q(decayed_at__isnull=True) | Q(decayed_at__lt=hour))
        .order_by("pk")
    )
    changed, after = 0, None
    while True:
        with transaction.atomic():
            batch = idle if after is None else idle.filter(pk__gt=after)
            locked = batch.select_for_update(skip_locked=True, of=("self",))
            ids = list(locked.values_list("pk", flat=True)[:batch_size])
            if ids:
                changed += Thought.objects.filter(pk__in=ids).update(
                    pheromone_weight=Greatest(Value(DECAY_FLOOR), F("pheromone_weight") * DECAY_FACTOR),
                    decayed_at=hour,
                )
        if len(ids) < batch_size:
            return changed
        after = ids[-1]
