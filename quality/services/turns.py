"""Logging an agent's turn for the quality loop (SPEC 4.1, seeds/004 section 3).

The request path only stores: the turn (prompt and response truncated to ``TURN_TEXT_MAX_CHARS``)
and one row per injected item (id, first 500 characters, content length, score at injection).
Judging happens in ``quality.jobs.score_turn``, enqueued on commit.

Which items were injected: ``injected_ids`` when the caller gives them (an empty list means
"nothing"), otherwise the sources of this session's newest memory call (``brain.QueryLog`` of the
caller's space and this ``session_id``), unless an earlier turn of the session already took them:
a memory call's sources are attributed to the first turn logged after it, once. Ids in
``used_ids``/``contradicted_ids`` that are not among them are added as items too
(``in_injection=False``): the agent had them in context from an earlier call, and its feedback
must not be lost. Every id must name a thought of the caller's space (404 otherwise).

Feedback can't bury (SPEC 6). Explicit feedback counts only for what was injected into the caller's
own session: an id in ``injected_ids``/``used_ids``/``contradicted_ids`` must be among the sources a
memory call of this agent in this session returned (its query-log rows); any other id is refused, 400
``VALIDATION_ERROR`` naming the first few, and nothing is stored; so is a used or contradicted id that
one of those sources names in its text, since that feedback may be copied from what the agent read.
(An injected item is judged, and a trusted judge's verdicts move its thought's EMAs and may raise a
correction suggestion: naming a thought as injected is feedback too.) A session belongs to the agent
that first used it (its first query-log row or turn): another agent's turn naming it is refused, 403
``SESSION_NOT_YOURS``, before anything is read or stored (not 400: the request is well formed, the
caller just may not act in that session). The owner is written down (``SessionOwner``, unique per
session id of a space) in the transaction of the session's first turn, and read from there afterwards:
of two agents whose first turns of a new session are logged at once, the second one's insert waits for
the first to commit, finds its row and is refused, so exactly one agent ever acts in the session. (A
memory call writes no owner: one still running when another agent's first turn of the session is
logged doesn't count as a use.)

Idempotency: ``(space, session_id, turn_id)`` is unique. A repeated post returns the turn logged
first, unchanged, and enqueues nothing (a Stop hook firing twice must not count a turn twice).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from api.errors import Forbidden, NotFound, ValidationFailed
from brain.models import QueryLog, Thought
from core.models import Agent
from quality.choices import InjectedFrom
from quality.models import SessionOwner, TurnItem, TurnLog
from quality.selectors import SESSION_CALLS_READ, session_results

EXCERPT_CHARS = 500
MAX_ITEMS = 100  # per list: injected (explicit or from the query log), used, contradicted
NAMED_IN_ERRORS = 5  # ids a refusal names; the rest are counted


@dataclass(frozen=True)
class TurnLogged:
    turn: TurnLog
    created: bool
    items: int


def _truncate(text: str) -> str:
    return text[: settings.TURN_TEXT_MAX_CHARS]


#: Of the name of a tool call cut to fit, this much is kept beside its cut JSON.
TOOL_NAME_KEPT_CHARS = 100


def _truncate_tool_calls(tool_calls: list) -> list:
    """Keep tool calls up to TURN_TEXT_MAX_CHARS of compact JSON in all; a call too long alone is cut to
    its name (a string, at most TOOL_NAME_KEPT_CHARS) and the start of its JSON, within what is left."""
    budget = settings.TURN_TEXT_MAX_CHARS
    kept: list = []
    for index, call in enumerate(tool_calls):
        rendered = json.dumps(call, ensure_ascii=False, separators=(",", ":"))
        if len(rendered) > budget:
            if budget > 0:
                name = call.get("name") if isinstance(call, dict) else None
                name = name[:TOOL_NAME_KEPT_CHARS] if isinstance(name, str) else None
                kept.append({"name": name, "truncated_json": rendered[: max(0, budget - 60 - len(name or ""))]})
            kept.append({"omitted_tool_calls": len(tool_calls) - index - (1 if budget > 0 else 0)})
            break
        kept.append(call)
        budget -= len(rendered)
    return kept


def _unique(ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return list(dict.fromkeys(ids))


#: A retrieve-only memory call's query-log row is written with its search and names its results right
#: after the answer is sent (brain.services.pheromones.retrieval_log_begin / retrieval_results), JSON
#: null until then. A turn reported in that instant waits for them, polling, at most this long; a row
#: older than IN_FLIGHT_MAX_AGE whose results never came (its web process died right after answering)
#: is read as returning nothing, at once.
IN_FLIGHT_WAIT_SECONDS = 2.0
IN_FLIGHT_POLL_SECONDS = 0.005
IN_FLIGHT_MAX_AGE = timedelta(seconds=30)


def _newest_query_log(*, space, agent: Agent, session_id: str) -> QueryLog | None:
    """The newest query-log row of this agent's memory calls in the session, its results named (see
    IN_FLIGHT_WAIT_SECONDS): another agent's call naming the session is not what this agent was shown."""
    query_log = (
        QueryLog.objects.filter(space=space, agent=agent, session_id=session_id).order_by("-created_at", "-id").first()
    )
    if query_log is None or query_log.results is not None or timezone.now() - query_log.created_at > IN_FLIGHT_MAX_AGE:
        return query_log
    deadline = time.monotonic() + IN_FLIGHT_WAIT_SECONDS
    while query_log.results is None and time.monotonic() < deadline:
        time.sleep(IN_FLIGHT_POLL_SECONDS)
        query_log.refresh_from_db(fields=["results"])
    return query_log


def _session_owner(*, agent: Agent, session_id: str) -> tuple[uuid.UUID | None, bool]:
    """The id of the agent ``session_id`` belongs to: its ``SessionOwner``'s, else the agent that used it
    first (its earliest query-log row or turn), else None (nobody has); and whether that is a written owner."""
    owner = (
        SessionOwner.objects.filter(space=agent.space, session_id=session_id).values_list("agent_id", flat=True).first()
    )
    if owner is not None:
        return owner, True
    firsts = [
        QueryLog.objects.filter(space=agent.space, session_id=session_id, agent__isnull=False)
        .order_by("created_at", "id")
        .values_list("created_at", "agent_id")
        .first(),
        TurnLog.objects.filter(space=agent.space, session_id=session_id, agent__isnull=False)
        .order_by("created_at", "id")
        .values_list("created_at", "agent_id")
        .first(),
    ]
    firsts = [first for first in firsts if first is not None]
    return (min(firsts)[1] if firsts else None), False


def _not_yours(session_id: str) -> Forbidden:
    return Forbidden(
        f"Session {session_id!r} belongs to another agent (the one that used it first); report turns of "
        "your own sessions (trace.session_id of your memory calls).",
        code="SESSION_NOT_YOURS",
    )


def _session_owner_check(*, agent: Agent, session_id: str) -> bool:
    """403 SESSION_NOT_YOURS when another agent used ``session_id`` first; whether the caller is its
    written owner already (otherwise :func:`_session_claim` writes it with the turn)."""
    owner, written = _session_owner(agent=agent, session_id=session_id)
    if owner is not None and owner != agent.pk:
        raise _not_yours(session_id)
    return written


def _session_claim(*, agent: Agent, session_id: str) -> None:
    """Write the caller down as the session's owner unless someone is (inside the turn's transaction), then
    403 unless the owner is the caller. The unique constraint decides a race: an insert behind another
    transaction's uncommitted one waits for it, and then inserts nothing if it committed."""
    SessionOwner.objects.bulk_create(
        [SessionOwner(space=agent.space, session_id=session_id, agent=agent)], ignore_conflicts=True
    )
    owner = SessionOwner.objects.filter(space=agent.space, session_id=session_id).values_list("agent_id", flat=True)
    if owner.get() != agent.pk:
        raise _not_yours(session_id)


def _session_shown(*, agent: Agent, session_id: str, newest: QueryLog | None) -> set[uuid.UUID]:
    """What the memory calls of this agent's session returned: the newest call's (``newest``, loaded and
    waited for already) and the earlier calls' query-log rows (the newest SESSION_CALLS_READ)."""
    shown = set(QueryLog.result_scores(newest.results)) if newest is not None else set()
    for results in session_results(
        space_id=agent.space_id, agent_id=agent.pk, session_id=session_id, exclude_pk=newest.pk if newest else None
    ):
        shown.update(QueryLog.result_scores(results))
    return shown


def _shown_check(*, session_id: str, shown: set[uuid.UUID], ids: list[uuid.UUID]) -> None:
    """400 naming the ids the caller named (injected, used, contradicted) that are not in ``shown``."""
    foreign = [str(i) for i in ids if i not in shown]
    if foreign:
        named = ", ".join(foreign[:NAMED_IN_ERRORS])
        more = f" and {len(foreign) - NAMED_IN_ERRORS} more" if len(foreign) > NAMED_IN_ERRORS else ""
        raise ValidationFailed(
            f"injected_ids/used_ids/contradicted_ids may only name thoughts your memory calls in session "
            f"{session_id!r} returned (its newest {SESSION_CALLS_READ}); not returned to you there: {named}{more}.",
            extra={"ids": foreign},
        )


def _regex_any(needles: list[str]) -> str:
    """A PostgreSQL regular expression matching any of ``needles`` literally (every character but a letter
    or a digit escaped: in PostgreSQL's advanced regular expressions a backslash before such a character
    makes it literal)."""
    return "|".join("".join(c if c.isalnum() else "\\" + c for c in needle) for needle in needles)


def _copied_check(*, space, shown: set[uuid.UUID], ids: list[uuid.UUID]) -> None:
    """400 naming the feedback ids (used, contradicted) that a thought of ``shown`` names in its text.

    Such feedback may be copied from what the agent read: a thought carrying ``colony:contradicted <id>``
    makes every agent that quotes it (as agents quote sources) or follows it contradict that id, past the
    one-agent floor. Colony stores such a marker as ``colony: contradicted`` (``api.text.storable``);
    this check holds for rows stored by other means (an operator's restore). Honest
    thoughts don't name other thoughts' ids, so refusing costs little; the Stop hook sends the turn again
    without the refused ids."""
    if not ids or not shown:
        return
    wanted = [str(i) for i in ids]
    rows = Thought.objects.filter(space=space, pk__in=shown, content__iregex=_regex_any(wanted))
    named: dict[str, uuid.UUID] = {}
    for source_id, content in rows.values_list("pk", "content").iterator():
        text = content.lower()
        named.update({key: source_id for key in wanted if key not in named and key in text})
    if named:
        copied = [key for key in wanted if key in named]
        listed = ", ".join(f"{key} (named by thought {named[key]})" for key in copied[:NAMED_IN_ERRORS])
        more = f" and {len(copied) - NAMED_IN_ERRORS} more" if len(copied) > NAMED_IN_ERRORS else ""
        raise ValidationFailed(
            f"used_ids/contradicted_ids may not name a thought that a source returned to you names in its text "
            f"(feedback copied from what you read counts for nothing); send the turn without: {listed}{more}.",
            extra={"ids": copied},
        )


def _logged_before(turn: TurnLog, *, agent: Agent) -> TurnLogged:
    """The turn already logged with this id, as the answer to its repeated post; 403 when another agent
    logged it (its first turn of the session committed after this post's owner check: the race is theirs)."""
    if turn.agent_id != agent.pk:
        raise _not_yours(turn.session_id)
    return TurnLogged(turn=turn, created=False, items=turn.items.count())


def turn_log_create(
    *,
    agent: Agent,
    session_id: str,
    turn_id: str,
    user_prompt: str,
    assistant_response: str,
    tool_calls: list | None = None,
    injected_ids: list[uuid.UUID] | None = None,
    used_ids: list[uuid.UUID] | None = None,
    contradicted_ids: list[uuid.UUID] | None = None,
) -> TurnLogged:
    """Store one turn and its injected items; enqueue scoring. Idempotent on (session_id, turn_id)."""
    space = agent.space
    owner_written = _session_owner_check(agent=agent, session_id=session_id)
    existing = TurnLog.objects.filter(space=space, session_id=session_id, turn_id=turn_id).first()
    if existing is not None:
        return _logged_before(existing, agent=agent)

    used = set(used_ids or [])
    contradicted = set(contradicted_ids or [])
    query_log = _newest_query_log(space=space, agent=agent, session_id=session_id)
    scores = QueryLog.result_scores(query_log.results) if query_log is not None else {}

    try:
        with transaction.atomic():
            if not owner_written:
                _session_claim(agent=agent, session_id=session_id)
            if query_log is not None:
                # Locked, so that of turns posted at once exactly one finds the call's sources free.
                QueryLog.objects.select_for_update().filter(pk=query_log.pk).values_list("pk").first()
            # Each memory call's sources belong to one turn, the first logged after it: an agent that
            # queried once and then worked for twenty turns did not get the same items injected twenty
            # times, and counting them so would bury the items' EMAs and the rates in repeats.
            attributed = query_log is not None and TurnLog.objects.filter(query_log=query_log).exists()
            if injected_ids is not None:
                injected = _unique(list(injected_ids))
                injected_from = InjectedFrom.EXPLICIT
                source_log = None
            elif query_log is not None and not attributed:
                injected = list(scores)[:MAX_ITEMS]  # the best sources, if a call ever returned more
                injected_from = InjectedFrom.QUERY_LOG
                source_log = query_log
            else:
                injected = []
                injected_from = InjectedFrom.NONE
                source_log = None

            extra = [i for i in _unique([*(used_ids or []), *(contradicted_ids or [])]) if i not in set(injected)]
            wanted = [*injected, *extra]  # at most 3 x MAX_ITEMS: each list is capped by the API
            # Locked (in id order) before their texts are read: a redaction under way commits first and
            # its text is what the items keep, or it waits for this turn and erases the items' excerpts.
            locked = Thought.objects.select_for_update(no_key=True).filter(space=space, pk__in=wanted).order_by("pk")
            thoughts = {t.id: t for t in locked.only("id", "content")}
            # Ids from the query log that no longer resolve are dropped; ids the caller named must resolve.
            named = set(extra) | (set(injected) if injected_from == InjectedFrom.EXPLICIT else set())
            unknown = [str(i) for i in wanted if i in named and i not in thoughts]
            if unknown:
                raise NotFound(
                    f"No thought with id {', '.join(unknown)} in space {space.slug!r}.",
                    code="UNKNOWN_THOUGHT",
                    extra={"ids": unknown},
                )
            feedback = _unique([*(used_ids or []), *(contradicted_ids or [])])
            if named or feedback:
                shown = _session_shown(agent=agent, session_id=session_id, newest=query_log)
                _shown_check(session_id=session_id, shown=shown, ids=[i for i in wanted if i in named])
                _copied_check(space=space, shown=shown, ids=feedback)

            injected_set = set(injected)
            turn = TurnLog.objects.create(
                space=space,
                agent=agent,
                agent_name=agent.name,
                session_id=session_id,
                turn_id=turn_id,
                user_prompt=_truncate(user_prompt),
                assistant_response=_truncate(assistant_response),
                tool_calls=_truncate_tool_calls(tool_calls or []),
                injected_from=injected_from,
                query_log=source_log,
            )
            items = []
            for thought_id in wanted:
                thought = thoughts.get(thought_id)
                if thought is None:
                    continue
                has_feedback = thought_id in used or thought_id in contradicted
                items.append(
                    TurnItem(
                        turn=turn,
                        thought=thought,
                        position=len(items),
                        excerpt=thought.content[:EXCERPT_CHARS],
                        content_length=len(thought.content),
                        score_at_injection=scores.get(thought_id),
                        in_injection=thought_id in injected_set,
                        explicit_used=(thought_id in used) if has_feedback else None,
                        explicit_contradicted=(thought_id in contradicted) if has_feedback else None,
                    )
                )
            TurnItem.objects.bulk_create(items)
            turn_enqueue_scoring(turn_log_id=str(turn.id))
    except IntegrityError:
        # A concurrent post of the same turn won the unique constraint: return that one.
        existing = TurnLog.objects.filter(space=space, session_id=session_id, turn_id=turn_id).first()
        if existing is None:
            raise
        return _logged_before(existing, agent=agent)
    return TurnLogged(turn=turn, created=True, items=len(items))


def turn_enqueue_scoring(*, turn_log_id: str) -> None:
    from quality import jobs

    transaction.on_commit(lambda: jobs.score_turn.delay(turn_log_id), robust=True)


def turns_redact_texts(*, space_id: int, texts: list[str], agent_id=None) -> int:
    """Erase the copies of a redacted thought's ``texts`` in the turn log of ``space_id`` (prompts, responses
    and tool calls, case and spacing aside), of ``agent_id``'s turns only or, None, every turn of the space
    (``brain.services.retraction.REDACTION_SWEEPS``, registered in ``quality.apps``); returns how many."""
    from brain.services.retraction import texts_erase

    turns = TurnLog.objects.filter(space_id=space_id)
    if agent_id is not None:
        turns = turns.filter(agent_id=agent_id)
    return len(texts_erase(turns, texts, fields=["user_prompt", "assistant_response"], json_fields=["tool_calls"]))


def turn_items_redact(thought_id) -> int:
    """Erase the excerpts (and the judge's details) the turn log kept of a thought that was retracted with ``redact``
    (``brain.services.retraction.REDACTION_HOOKS``, registered in ``quality.apps``); returns how many."""
    from brain.services.retraction import REDACTED_CONTENT

    # The judge's details go too: an LLM judge's reasons quote the excerpt it read.
    return TurnItem.objects.filter(thought_id=thought_id).update(excerpt=REDACTED_CONTENT, judge_details={})
