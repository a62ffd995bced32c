"""Pending correction suggestions (SPEC 2.5, 4.5): something contradicts a stored thought.

Two producers raise them — the brain's contradiction detector (a new thought vs existing facts) and
the quality loop's judge (an agent's response contradicted an injected thought) — and both go
through :func:`suggestion_create`, so a thought gets one pending suggestion per contradicting
statement however often it is raised.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from api.errors import Conflict, Forbidden, NotFound
from api.paging import order_by
from api.text import quoted
from brain.choices import DEFAULT_TOPIC, SuggestionStatus, ThoughtCategory
from brain.models import CorrectionSuggestion, Thought, thought_defer_bulky
from brain.services.correction_text import correction_default_content, correction_replaced_fact
from brain.services.flags import thought_unflag_unverified
from brain.services.thoughts import thoughts_lock
from core.db import prepared_cursor
from core.models import Agent, Space
from core.selectors import agent_acting


def suggestion_draft(*, thought: Thought, statement: str | None) -> dict:
    """The memory-endpoint payload of the correction that accepting the suggestion would create: the
    wrong fact and the text as ``POST /thoughts/{id}/correct`` of the thought would have them. ``statement``
    None (a report without one): the draft's ``prompt`` and ``correct_fact`` are empty, for whoever accepts
    to write."""
    wrong = correction_replaced_fact(thought)
    return {
        "prompt": correction_default_content(corrected_fact=wrong, correct_fact=statement) if statement else "",
        "thought_category": ThoughtCategory.CORRECTION.value,
        "topic": thought.topic or DEFAULT_TOPIC,
        "corrected_fact": wrong,
        "correct_fact": statement or "",
        "supersedes": [str(thought.id)],
    }


#: The text fields of a draft (``suggestion_draft``); ``supersedes`` is a list of thought ids.
DRAFT_TEXT_KEYS = ("prompt", "thought_category", "topic", "corrected_fact", "correct_fact")


def draft_problem(draft) -> str | None:
    """What is wrong with a suggestion's ``draft`` for accepting it, or None: an object whose text fields
    are strings and whose ``supersedes`` is a list of strings (a draft written through the admin or an
    import may be anything JSON holds)."""
    if not isinstance(draft, dict):
        return "must be a JSON object"
    wrong = [key for key in DRAFT_TEXT_KEYS if key in draft and not isinstance(draft[key], str)]
    if wrong:
        return f"{', '.join(wrong)} must be text"
    supersedes = draft.get("supersedes")
    if supersedes is not None and not (
        isinstance(supersedes, list) and all(isinstance(ref, str) for ref in supersedes)
    ):
        return "supersedes must be a list of thought ids"
    return None


_PENDING_SQL = """
SELECT id FROM brain_correctionsuggestion
WHERE thought_id = %(thought)s AND statement = %(statement)s AND status = %(pending)s LIMIT 1
"""

#: The suggestion already raised between ``thought`` and its contradicting thought, the pending one first:
#: pending, accepted, dismissed or withdrawn (one Colony closed as superseded settled nothing).
_RAISED_PAIR_SQL = """
SELECT id, status FROM brain_correctionsuggestion
WHERE thought_id = %(thought)s AND contradicting_thought_id = %(contradicting)s AND status <> %(superseded)s
ORDER BY status = %(pending)s DESC LIMIT 1
"""


@transaction.atomic
def suggestion_create(
    *,
    thought: Thought,
    statement: str,
    origin: str,
    confidence: float = 0.0,
    reason: str = "",
    agent: Agent | None = None,
    session_id: str = "",
    contradicting_thought: Thought | None = None,
    stated: bool = True,
) -> tuple[CorrectionSuggestion | None, bool]:
    """Raise a pending suggestion; returns (suggestion, created). An identical pending one is reused, and so
    is ``agent``'s pending one on ``thought``, and the pending one between ``thought`` and
    ``contradicting_thought``.
    ``stated`` False: ``statement`` is Colony's note of a report that said nothing (not a fact to take as
    the correct one: the draft offers none).

    Producers judge off any transaction (an LLM judge takes seconds), so under the locks the thoughts
    are read again: when ``thought`` or ``contradicting_thought`` was superseded, retracted or edited
    meanwhile (a redaction erased its text), nothing is raised and this returns (None, False), so no
    suggestion quotes a text that is gone or drafts a correction of a thought already replaced. Nor
    when ``agent`` was deactivated or deleted (a revoked identity acts no more), or when the
    contradiction between ``thought`` and ``contradicting_thought`` was already settled (accepted,
    dismissed by a reviewer, withdrawn by its raiser): the detector's retry, a redelivered job or
    ``embed_missing`` running the check again doesn't bring back what someone decided."""
    # Lock the thought row so two workers raising the same contradiction don't both insert. The
    # contradicting thought is locked with it, in id order: the insert's foreign-key check would
    # otherwise take its KEY SHARE lock afterwards, out of order, and deadlock with a memory call
    # that locks both (brain.services.pheromones locks what it reinforces in id order).
    # Prepared statements (the detector raises up to 30 per job; building the ORM's queries cost more
    # than running them). Separate, so the check's snapshot is taken after the lock.
    thoughts_lock(ids=[thought.pk, *([contradicting_thought.pk] if contradicting_thought is not None else [])])
    read = {thought.pk: thought.content}
    if contradicting_thought is not None:
        read[contradicting_thought.pk] = contradicting_thought.content
    for pk, superseded, content in Thought.objects.filter(pk__in=list(read)).values_list("pk", "superseded", "content"):
        if superseded or content != read[pk]:
            return None, False
    if agent is not None and not agent_acting(agent_id=agent.pk, lock=True):
        return None, False
    existing = None
    with prepared_cursor() as cursor:
        if contradicting_thought is not None:
            params = {
                "thought": thought.pk,
                "contradicting": contradicting_thought.pk,
                "superseded": SuggestionStatus.SUPERSEDED,
                "pending": SuggestionStatus.PENDING,
            }
            cursor.execute(_RAISED_PAIR_SQL, params)
            existing = cursor.fetchone()
            if existing is not None and existing[1] != SuggestionStatus.PENDING:
                return None, False
        if existing is None:
            params = {"thought": thought.pk, "statement": statement, "pending": SuggestionStatus.PENDING}
            cursor.execute(_PENDING_SQL, params)
            existing = cursor.fetchone()
    if existing is not None:
        return CorrectionSuggestion.objects.get(pk=existing[0]), False
    # One agent holds at most one pending suggestion per thought, whichever loop raises it: twenty notes of
    # one agent contradicting a teammate's thought are one item in the reviewers' queue, not twenty.
    if agent is not None:
        held = CorrectionSuggestion.objects.filter(thought=thought, agent=agent, status=SuggestionStatus.PENDING)
        if (mine := held.order_by("created_at", "id").first()) is not None:
            return mine, False
    suggestion = CorrectionSuggestion.objects.create(
        space_id=thought.space_id,
        thought=thought,
        statement=statement,
        contradicting_thought=contradicting_thought,
        draft=suggestion_draft(thought=thought, statement=statement if stated else None),
        origin=origin,
        confidence=confidence,
        reason=reason,
        agent=agent,
        session_id=session_id,
    )
    return suggestion, True


def suggestion_lock_pending(*, suggestion: CorrectionSuggestion, action: str) -> CorrectionSuggestion:
    """Lock the suggestion's thoughts, then re-read and lock the suggestion; 409 CONFLICT unless it is
    still pending (two callers can't both win).

    The thoughts first, as every writer that locks a thought and its suggestions does (creating one,
    superseding or retracting a thought): holding the suggestion while waiting for a thought would
    deadlock. An accept supersedes the thought and closes its other pending suggestions (a caller
    resolving another suggestion of it holds that one), and may flag the contradicting thought
    ``contradicts_correction`` (retracting that thought locks it, then closes this suggestion). Both
    thoughts are locked here in id order, as :func:`suggestion_create` locks them; the later caller
    sees what the earlier one did.
    """
    contradicting = [suggestion.contradicting_thought_id] if suggestion.contradicting_thought_id else []
    thoughts_lock(ids=[suggestion.thought_id, *contradicting])
    locked = CorrectionSuggestion.objects.select_for_update().get(pk=suggestion.pk)
    if locked.status != SuggestionStatus.PENDING:
        raise Conflict(
            f"Correction suggestion {locked.id} is already {locked.status}; it can't be {action}.",
            code="CONFLICT",
        )
    return locked


@transaction.atomic
def suggestion_dismiss(
    *, suggestion: CorrectionSuggestion, resolved_by: str, reason: str = "", agent: Agent | None = None
) -> CorrectionSuggestion:
    """Close a pending suggestion without correcting anything (the old thought stands); 409 if not pending.

    An agent (``agent``) can't dismiss a contradiction of a thought it contributed, 403 ``OWN_THOUGHT``:
    its author is the one party whose word can't settle it (it may accept it, correcting its own
    thought); another agent or a human can. The dismissal resolves every contradiction of the thought
    raised before it (the quality loop's rule), so an ``unverified`` flag those contradictions earned
    comes off in the same transaction. The agent that raised the suggestion dismissing it takes its own
    report back: status ``withdrawn``, which resolves only that agent's contradictions of the thought.
    """
    if agent is not None and suggestion.thought.agent_id == agent.pk:
        raise Forbidden(
            "This suggestion contradicts a thought you contributed: another agent or a human decides whether "
            f"it stands. Accept it (POST /api/v1/corrections/{suggestion.pk}/accept) if your thought is wrong.",
            code="OWN_THOUGHT",
        )
    locked = suggestion_lock_pending(suggestion=suggestion, action="dismissed")
    withdrawn = agent is not None and locked.agent_id == agent.pk
    locked.status = SuggestionStatus.WITHDRAWN if withdrawn else SuggestionStatus.DISMISSED
    locked.resolved_at = timezone.now()
    locked.resolved_by = resolved_by
    if reason:
        locked.reason = f"{locked.reason}\nDismissed: {quoted(reason)}".strip()
    locked.save(update_fields=["status", "resolved_at", "resolved_by", "reason"])
    if not withdrawn:  # a withdrawal settles one agent's report; the flag may rest on others' still
        thought_unflag_unverified(thought_id=locked.thought_id)
    return locked


def suggestions_close_superseded(*, space_id, thought_ids: list[uuid.UUID], by: Thought | None) -> int:
    """Close the pending suggestions on thoughts of space ``space_id`` that were just superseded, and those
    they raised; returns how many. Only that space's suggestions: an id of another space closes nothing.

    A suggestion says "this thought is contradicted; correct it". Once a correction, refinement or
    consolidation replaced the thought (or it was retracted: ``by`` None), accepting one would
    correct a thought nobody is served any more, over the correction that replaced it, and memory
    answers would keep asking agents to. A suggestion the thought raised against another (it is the
    contradicting statement) no longer stands either: accepting it would store as the correct fact a
    statement that was corrected, replaced or withdrawn (after a redaction, not even its text).
    Status ``superseded``, resolved by Colony, and, on the thought's own suggestions, the correction
    that replaced it when it was one. Run it in the transaction that supersedes.
    """
    if not thought_ids:
        return 0
    correction = by if by is not None and by.thought_category == ThoughtCategory.CORRECTION else None
    here = CorrectionSuggestion.objects.filter(space_id=space_id)
    closed = _close_pending(here.filter(thought_id__in=thought_ids), correction=correction)
    return closed + _close_pending(here.filter(contradicting_thought_id__in=thought_ids))


def _close_pending(suggestions: QuerySet[CorrectionSuggestion], *, correction: Thought | None = None) -> int:
    return suggestions.filter(status=SuggestionStatus.PENDING).update(
        status=SuggestionStatus.SUPERSEDED, resolved_at=timezone.now(), resolved_by=CLOSED_BY, correction=correction
    )


#: ``resolved_by`` of a suggestion Colony closed (:func:`suggestions_close_superseded`).
CLOSED_BY = "colony"


# --- selectors --------------------------------------------------------------------------------------
# Reads of suggestions live here with their writes: this module is the one home of suggestions and
# the memory orchestration needs only one import for pending_corrections.


def suggestion_get(*, space: Space, suggestion_id: uuid.UUID | str) -> CorrectionSuggestion:
    """One suggestion of ``space``; 404 for an unknown, malformed or other-space id alike."""
    try:
        key = uuid.UUID(str(suggestion_id))
    except ValueError:
        raise NotFound(
            f"No correction suggestion {suggestion_id!r}: not a suggestion id (UUID).", code="SUGGESTION_NOT_FOUND"
        ) from None
    suggestion = CorrectionSuggestion.objects.select_related("thought", "space").filter(space=space, pk=key).first()
    if suggestion is None:
        raise NotFound(f"No correction suggestion {suggestion_id} in this space.", code="SUGGESTION_NOT_FOUND")
    return suggestion


#: The corrections list's order, as its cursor pages it (``api.paging``): the caller's own first, then
#: newest first.
SUGGESTION_LIST_ORDER = (("own_first", False, int), ("created_at", True, datetime), ("id", True, uuid.UUID))


def suggestions_list(
    *, space: Space, status: str | None = SuggestionStatus.PENDING, agent: Agent | None = None, mine: bool = False
) -> QuerySet[CorrectionSuggestion]:
    """Suggestions of ``space`` with ``status`` (None = all): the caller's own first, then newest first.

    ``mine`` keeps only those addressed to ``agent``.
    """
    suggestions = (
        CorrectionSuggestion.objects.filter(space=space)
        .select_related("thought", "agent")
        .defer(*thought_defer_bulky("thought"))
    )
    if status:
        suggestions = suggestions.filter(status=status)
    if mine:
        suggestions = suggestions.filter(agent=agent)
    own_first = (
        Value(1, output_field=IntegerField())
        if agent is None
        else Case(When(agent=agent, then=Value(0)), default=Value(1), output_field=IntegerField())
    )
    return suggestions.annotate(own_first=own_first).order_by(*order_by(SUGGESTION_LIST_ORDER))


#: What a memory response's pending correction shows of a suggestion (read as values, no instances).
PENDING_FIELDS = ("id", "thought_id", "statement", "confidence", "reason", "origin", "draft", "created_at")
PENDING_PREVIEW_CHARS = 80


def suggestions_pending_items(
    *, space: Space, agent: Agent | None = None, session_id: str | None = None, limit: int
) -> list[dict]:
    """``result.pending_corrections`` of a memory response (SPEC 4.5: "for that agent or session"): the
    newest ``limit`` pending suggestions addressed to this agent, or to this session and no other agent
    (a session's suggestions raised by another agent stay that agent's); with neither, every pending
    one of the space. Read as plain values in one prepared statement (this runs on memory calls:
    building model instances of suggestions and their thoughts cost more than the query)."""
    params = {
        "space": space.pk,
        "pending": SuggestionStatus.PENDING,
        "agent": agent.pk if agent is not None else None,
        "session": session_id or None,
        "preview": PENDING_PREVIEW_CHARS,
        "limit": limit,
    }
    with prepared_cursor() as cursor:
        cursor.execute(_PENDING_ITEMS_SQL, params)
        rows = cursor.fetchall()
    draft = CorrectionSuggestion._meta.get_field("draft")
    items = []
    for *values, preview in rows:
        row = dict(zip(PENDING_FIELDS, values, strict=True))
        row["draft"] = draft.from_db_value(row["draft"], None, connection)
        items.append(suggestion_as_pending({**row, "thought_preview": preview}))
    return items


#: Pending suggestions as values, newest first: addressed to the agent, or to the session and no
#: other agent, or, with neither given, every pending suggestion of the space; only a thought of the
#: suggestion's own space is previewed.
_PENDING_ITEMS_SQL = f"""
SELECT {", ".join(f"s.{name}" for name in PENDING_FIELDS)}, left(t.content, %(preview)s)
FROM brain_correctionsuggestion s JOIN brain_thought t ON t.id = s.thought_id AND t.space_id = s.space_id
WHERE s.space_id = %(space)s AND s.status = %(pending)s
      AND ((%(agent)s::uuid IS NULL AND %(session)s::text IS NULL)
           OR s.agent_id = %(agent)s::uuid
           OR (s.session_id = %(session)s::text AND (s.agent_id IS NULL OR s.agent_id = %(agent)s::uuid)))
ORDER BY s.created_at DESC LIMIT %(limit)s
"""  # noqa: S608 - column names from PENDING_FIELDS; values are bound


def suggestion_as_pending(row: dict) -> dict:
    """The item shape of ``result.pending_corrections`` in the memory response, from a values row."""
    return {
        "suggestion_id": str(row["id"]),
        "thought_id": str(row["thought_id"]),
        "thought_preview": row["thought_preview"],
        "statement": row["statement"],
        "confidence": row["confidence"],
        "reason": row["reason"],
        "origin": row["origin"],
        "draft": row["draft"],
        "created_at": row["created_at"].isoformat(),
        "accept": f"/api/v1/corrections/{row['id']}/accept",
        "dismiss": f"/api/v1/corrections/{row['id']}/dismiss",
    }
