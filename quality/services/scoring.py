"""Scoring a logged turn: judge every item, feed the outcomes into the thoughts' EMAs (SPEC 4.2, 4.4).

Per item without explicit feedback the judge (``brain.judging``, the same interface as the
brain's contradiction detector) answers three questions, all recorded raw in ``TurnItem.judge_*``:

- on topic: ``judge.on_topic(user_prompt, excerpt)``
- used: ``judge.used(response_text, excerpt)``
- contradicted: ``judge.contradicts(excerpt, response_text)`` (does the response contradict it?)

``response_text`` is the assistant's response followed by its tool calls, one compact JSON line
each: acting on an item (a command it suggested, a file it named) counts as using it.

The outcome that counts (``TurnItem.on_topic/used/contradicted``):

- Explicit feedback wins. An item named in ``used_ids`` or ``contradicted_ids`` has both outcomes
  fixed by the agent (used = in used_ids, contradicted = in contradicted_ids) and counts as on
  topic: an agent can't use or contradict something irrelevant to its turn. Since that overrides
  every answer the judge could give, the judge is not asked about such an item (its ``judge_*``
  stay null): no LLM request is paid for a verdict that would be discarded.
- Otherwise the judge's verdicts, with the same implication: an item the judge found used or
  contradicted counts as on topic (``item_judge``).

What feeds the EMAs (``usage_score``, ``contradiction_score``, ``effective_confidence``):

- The judge is *trusted* when the latest ``JudgeValidation`` for its name (the configured
  ``QUALITY_JUDGE``, or the name of a judge passed in) reached 85% agreement on
  each of on_topic, used and contradicted (``quality.selectors.judge_trust``). Then every item's
  outcome moves its thought's EMAs.
- Otherwise explicit feedback only: items with explicit feedback move their EMAs, items without it
  don't (their judge verdicts still count in the metrics, which say the judge is untrusted).
- A transition marker records an event, not a fact: items on markers are logged and judged for the
  metrics but never move a marker's EMAs nor raise a suggestion (markers can't be corrected).
- One showing, one step: a thought moves at most once for each time a memory call of the agent's
  session returned it (``_once_per_showing``); later turns naming it again are logged and judged for
  the metrics but don't move it.
- One agent can't bury a thought: until contradictions from ``formulas.FLOOR_BREAKING_AGENTS``
  distinct agents are recorded (``ConfidenceChange`` rows, this turn's included), effective confidence
  stays at or above ``formulas.SINGLE_AGENT_FLOOR``; nor lift one: until uses from
  ``formulas.CEILING_BREAKING_AGENTS`` distinct agents are recorded, it stays at or below
  ``formulas.SINGLE_AGENT_CEILING``. Only agents still active count (by identity, whatever they are
  called now), and only their reports of the last ``formulas.CORROBORATION_DAYS``: a deactivated or
  deleted agent's past reports, or one agent's report from months ago, corroborate nothing.
- A revoked agent acts no more: a turn whose agent is deactivated or deleted by the time it is scored
  (its job was queued before the operator shut the door) moves no thought and raises no suggestion.
  It is still marked scored, for the record; if the agent was revoked before the judge was asked,
  the judge is not asked at all (its explicit feedback is recorded as given, the other items stay
  unjudged and out of the rates).

The update runs in one transaction with the thoughts' rows locked (in id order, so two workers
scoring overlapping turns can't deadlock or lose an update), writes one ``ConfidenceChange`` per
thought, and marks the turn scored; a turn already scored is left alone, so a retried or duplicated
job changes nothing. Judge calls happen before the transaction: a slow LLM holds no lock.

Every final contradiction raises a pending correction suggestion (SPEC 4.5) through the brain's
``suggestion_create``, unless the thought is already superseded or this agent already has a pending
one from the quality loop on that thought.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from api.text import quoted
from brain.choices import SuggestionOrigin, SuggestionStatus, ThoughtCategory
from brain.judging import JudgeAnswerInvalid, JudgeUnavailable, get_judge
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services import lineage
from brain.services.thoughts import thoughts_lock
from core.selectors import agent_acting
from quality import formulas
from quality.choices import TurnStatus, VerdictSource
from quality.models import TURN_ITEM_VERDICT_FIELDS, ConfidenceChange, TurnItem, TurnLog
from quality.selectors import session_results


class JudgeLike(Protocol):
    """The part of ``brain.judging.Judge`` scoring uses (kept here so tests can pass their own)."""

    name: str

    def contradicts(self, a: str, b: str) -> Any: ...

    def on_topic(self, prompt: str, item: str) -> Any: ...

    def used(self, response: str, item: str) -> Any: ...


logger = logging.getLogger("colony.quality")


class JudgeRetry(Exception):
    """The judge is temporarily unavailable (``brain.judging.JudgeUnavailable``): retry the job."""


def judge_resolve(name: str | None = None) -> JudgeLike:
    """The judge named ``name`` (default ``settings.QUALITY_JUDGE``).

    ``QUALITY_JUDGE_FACTORY`` (a dotted path to a callable taking the name) plugs in another judge
    without code changes: a custom model, or a deterministic judge in tests and benchmarks.
    """
    factory_path = settings.QUALITY_JUDGE_FACTORY
    if factory_path:
        return import_string(factory_path)(name)
    return get_judge(name)


def judge_ask(method, *args: str) -> dict:
    try:
        verdict = method(*args)
    except JudgeRetry:
        raise
    except JudgeAnswerInvalid:
        raise  # about these texts, not the judge: the caller leaves the item unjudged
    except Exception as exc:
        if isinstance(exc, JudgeUnavailable):
            raise JudgeRetry(str(exc)) from exc
        raise
    return {
        "verdict": bool(verdict.verdict),
        "confidence": round(float(verdict.confidence), 4),
        "reason": str(verdict.reason)[:300],
    }


def turn_response_text(*, assistant_response: str, tool_calls: list) -> str:
    """What the judge reads as the agent's response: its text, then one line per tool call."""
    lines = [assistant_response]
    for call in tool_calls or []:
        rendered = call if isinstance(call, str) else json.dumps(call, ensure_ascii=False, sort_keys=True)
        lines.append(rendered[:1000])
    return "\n".join(line for line in lines if line)[: settings.TURN_TEXT_MAX_CHARS]


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9_]+")


def contradicting_statement(*, response: str, item: str, max_chars: int = 500) -> str:
    """The sentence of ``response`` that shares most words with ``item``: the statement to review."""
    item_words = set(_WORD.findall(item.lower()))
    best, best_overlap = "", -1
    for sentence in _SENTENCE.split(response):
        sentence = sentence.strip()
        if not sentence:
            continue
        overlap = len(item_words & set(_WORD.findall(sentence.lower())))
        if overlap > best_overlap:
            best, best_overlap = sentence, overlap
    return (best or response.strip())[:max_chars]


def item_judge(*, judge: JudgeLike, prompt: str, response_text: str, excerpt: str) -> tuple[dict, dict[str, bool]]:
    """Ask the judge the three questions about one item; returns (raw verdicts, outcome).

    The outcome applies the same rule as explicit feedback: an item the response used or
    contradicted was on topic for the turn, whatever the prompt-only question said (a prompt is
    often a few words, "run the tests", and the item that made the run work shares none of them).
    Validation measures this outcome, so the agreement it reports is the one scoring acts on.
    """
    details = {
        "on_topic": judge_ask(judge.on_topic, prompt, excerpt),
        "used": judge_ask(judge.used, response_text, excerpt),
        "contradicted": judge_ask(judge.contradicts, excerpt, response_text),
    }
    used, contradicted = details["used"]["verdict"], details["contradicted"]["verdict"]
    on_topic = details["on_topic"]["verdict"] or used or contradicted
    outcome = {"on_topic": on_topic, "used": used, "contradicted": contradicted}
    return details, outcome


@dataclass(frozen=True)
class TurnScored:
    turn_log_id: str
    already_scored: bool
    items: int = 0
    fed_ema: int = 0
    contradicted: int = 0
    suggestions: int = 0
    judge_trusted: bool | None = None


def turn_score(*, turn_log_id: str, judge: JudgeLike | None = None) -> TurnScored:
    """Judge every item of one turn and apply the outcomes; does nothing to a turn already scored."""
    from quality.selectors import judge_trust

    turn = TurnLog.objects.filter(pk=turn_log_id).first()
    if turn is None or turn.status == TurnStatus.SCORED:
        return TurnScored(turn_log_id=str(turn_log_id), already_scored=True)
    items = list(
        TurnItem.objects.filter(turn=turn)
        .annotate(category=F("thought__thought_category"), author_id=F("thought__agent_id"))
        .order_by("position")
    )
    if judge is None:
        judge_name = settings.QUALITY_JUDGE
        judge = judge_resolve(judge_name)
    else:
        judge_name = judge.name
    trusted = judge_trust(judge_name=judge_name).trusted
    response_text = turn_response_text(assistant_response=turn.assistant_response, tool_calls=turn.tool_calls)
    # Read again under the turn's lock below; read here too so a revoked agent's words cost no judge call.
    acting = agent_acting(agent_id=turn.agent_id)

    for item in items:
        explicit = item.explicit_used is not None or item.explicit_contradicted is not None
        if not explicit and not acting:
            # Revoked before its turn was judged: no judge reads its words; the item stays unjudged.
            item.judge_details = {}
            item.judge_on_topic = item.judge_used = item.judge_contradicted = None
            item.on_topic = item.used = item.contradicted = None
            item.fed_ema = False
            continue
        if explicit:
            # Explicit feedback fixes all three outcomes, so the judge is not asked at all: with an
            # LLM judge every question costs a request, and its answer would be thrown away.
            item.judge_details = {}
            item.judge_on_topic = item.judge_used = item.judge_contradicted = None
            item.used = bool(item.explicit_used)
            item.contradicted = bool(item.explicit_contradicted)
            item.on_topic = True
            item.verdict_source = VerdictSource.EXPLICIT
        else:
            try:
                details, outcome = item_judge(
                    judge=judge, prompt=turn.user_prompt, response_text=response_text, excerpt=item.excerpt
                )
            except JudgeAnswerInvalid:
                # The item's words got no verdict (they may have steered an LLM judge): it has no outcome,
                # moves nothing and is left out of the rates; the turn's other items count.
                logger.warning("turn %s: no verdict on item %s; left unjudged", turn.pk, item.thought_id)
                item.judge_details = {"no_verdict": True}
                item.judge_on_topic = item.judge_used = item.judge_contradicted = None
                item.on_topic = item.used = item.contradicted = None
                item.verdict_source = VerdictSource.JUDGE
                item.fed_ema = False
                continue
            item.judge_details = details
            item.judge_on_topic = details["on_topic"]["verdict"]
            item.judge_used = details["used"]["verdict"]
            item.judge_contradicted = details["contradicted"]["verdict"]
            item.on_topic, item.used, item.contradicted = outcome["on_topic"], outcome["used"], outcome["contradicted"]
            item.verdict_source = VerdictSource.JUDGE
        # An agent's own thought is not moved by its own turns: its "used" would be a vote for itself.
        # The outcome stays in the metrics, and a contradiction still raises a suggestion.
        item.fed_ema = (
            (explicit or trusted)
            and item.category != ThoughtCategory.TRANSITION_MARKER
            and (item.author_id is None or item.author_id != turn.agent_id)
        )

    with transaction.atomic():
        locked = TurnLog.objects.select_for_update().filter(pk=turn.pk, status=TurnStatus.PENDING).first()
        if locked is None:
            return TurnScored(turn_log_id=str(turn.pk), already_scored=True)
        acting = agent_acting(agent_id=locked.agent_id, lock=True)
        if not acting:
            for item in items:
                item.fed_ema = False
        now = timezone.now()
        # Excerpts read again under their locks: one a redaction erased while the judge ran keeps no
        # judge's details (an LLM judge's reasons quote what it read).
        excerpts = dict(TurnItem.objects.select_for_update().filter(turn=locked).values_list("pk", "excerpt"))
        for item in items:
            if excerpts.get(item.pk, item.excerpt) != item.excerpt:
                item.judge_details = {}
        _once_per_showing(turn=locked, items=items)
        TurnItem.objects.bulk_update(
            items,
            ["judge_details", *TURN_ITEM_VERDICT_FIELDS],
        )
        feeding = [item for item in items if item.fed_ema]
        # A thought its author restated since it was shown (a refinement or consolidation of its own) is
        # the claim this turn reports on: its live version takes the step and the suggestion, as it would
        # have, carried by the restatement, had the turn been scored first.
        latest = lineage.own_latest_versions([item.thought_id for item in items])
        thought_outcomes_apply(turn=locked, items=feeding, at=now, latest=latest)
        suggestions = 0
        for item in items:
            if not (acting and item.contradicted):
                continue
            target = latest.get(item.thought_id, item.thought_id)
            if _raise_suggestion(turn=locked, item=item, thought_id=target, response_text=response_text):
                suggestions += 1
        TurnLog.objects.filter(pk=turn.pk).update(
            status=TurnStatus.SCORED, scored_at=now, judge_name=judge_name, judge_trusted=trusted
        )
    return TurnScored(
        turn_log_id=str(turn.pk),
        already_scored=False,
        items=len(items),
        fed_ema=len(feeding),
        contradicted=sum(1 for item in items if item.contradicted),
        suggestions=suggestions,
        judge_trusted=trusted,
    )


def _once_per_showing(*, turn: TurnLog, items: list[TurnItem]) -> None:
    """Clear ``fed_ema`` on the items whose thought already moved once for each time a memory call of
    this agent's session (its newest SESSION_CALLS_READ) returned it: one showing, one EMA step, however
    many turns name it (an agent
    that queried once can't raise or sink a thought by reporting it in turn after turn). The outcomes
    stay in the metrics. Locks the thoughts (id order) first, so two turns of the session scored at
    once count each other's steps."""
    ids = {item.thought_id for item in items if item.fed_ema}
    if not ids:
        return
    thoughts_lock(ids=ids)
    showings: Counter = Counter()
    for results in session_results(space_id=turn.space_id, agent_id=turn.agent_id, session_id=turn.session_id):
        showings.update(ids & set(QueryLog.result_scores(results)))
    stepped = Counter(
        TurnItem.objects.filter(
            turn__space_id=turn.space_id,
            turn__agent_id=turn.agent_id,
            turn__session_id=turn.session_id,
            thought_id__in=ids,
            fed_ema=True,
        )
        .exclude(turn=turn)
        .values_list("thought_id", flat=True)
    )
    for item in items:
        if item.fed_ema:
            item.fed_ema = stepped[item.thought_id] < showings[item.thought_id]
            stepped[item.thought_id] += 1


def thought_outcomes_apply(
    *, turn: TurnLog, items: list[TurnItem], at, latest: dict | None = None
) -> list[ConfidenceChange]:
    """One EMA step per item on its thought, under row locks; records each confidence change.

    ``latest`` maps a shown thought to its author's live restatement (``lineage.own_latest_versions``),
    which takes the step instead. Must run inside a transaction. Rows are locked in id order so
    concurrent scorers of turns that share thoughts wait for each other instead of deadlocking or
    overwriting each other's step.
    """
    if not items:
        return []
    latest = latest or {}
    by_thought = {latest.get(item.thought_id, item.thought_id): item for item in items}
    rows = (
        Thought.objects.select_for_update()
        .filter(pk__in=list(by_thought))
        .order_by("pk")
        .values_list("pk", "usage_score", "contradiction_score", "effective_confidence")
    )
    # The distinct agents still active that reported each thought contradicted / used in the last
    # CORROBORATION_DAYS (the floor and the ceiling), by identity: an agent renamed is still one agent, a
    # deactivated or deleted one (its reports' agent nulled) vouches for nothing any more, and an old
    # report, long outweighed, doesn't make today's single agent a second one.
    # A thought's reports include those about the earlier versions of it its author replaced (its own
    # lineage: brain.services.lineage.quality_inherited), so restating one's contradicted claim as a
    # refinement doesn't clear who contradicted it.
    version_of = {thought_id: thought_id for thought_id in by_thought}
    version_of.update(lineage.own_earlier_versions(list(by_thought)))
    contradictors: dict = {thought_id: set() for thought_id in by_thought}
    users: dict = {thought_id: set() for thought_id in by_thought}
    for thought_id, agent_id, used, contradicted in (
        ConfidenceChange.objects.filter(
            thought_id__in=list(version_of),
            agent__active=True,
            changed_at__gte=at - timedelta(days=formulas.CORROBORATION_DAYS),
        )
        .filter(Q(contradicted=True) | Q(used=True))
        .values_list("thought_id", "agent_id", "used", "contradicted")
        .distinct()
    ):
        if contradicted:
            contradictors[version_of[thought_id]].add(agent_id)
        if used:
            users[version_of[thought_id]].add(agent_id)
    me = turn.agent_id  # active: turn_score checked it under the turn's lock
    changes, stepped = [], []
    for thought_id, usage_score, contradiction_score, old_confidence in rows:
        item = by_thought[thought_id]
        usage = formulas.ema(usage_score, 1.0 if item.used else 0.0)
        contradiction = formulas.ema(contradiction_score, 1.0 if item.contradicted else 0.0)
        if item.contradicted:
            contradictors[thought_id].add(me)
        if item.used:
            users[thought_id].add(me)
        confidence = formulas.effective_confidence(
            usage, contradiction, len(contradictors[thought_id]), len(users[thought_id])
        )
        stepped.append(
            Thought(
                pk=thought_id, usage_score=usage, contradiction_score=contradiction, effective_confidence=confidence
            )
        )
        changes.append(
            ConfidenceChange(
                thought_id=thought_id,
                space_id=turn.space_id,
                turn=turn,
                agent_name=turn.agent_name,
                agent_id=turn.agent_id,
                used=bool(item.used),
                contradicted=bool(item.contradicted),
                usage_score=usage,
                contradiction_score=contradiction,
                old_confidence=old_confidence,
                new_confidence=confidence,
                changed_at=at,
            )
        )
    # One UPDATE for all the turn's thoughts (still under the locks taken above), not one per thought.
    Thought.objects.bulk_update(stepped, ["usage_score", "contradiction_score", "effective_confidence"])
    return ConfidenceChange.objects.bulk_create(changes)


def _raise_suggestion(*, turn: TurnLog, item: TurnItem, thought_id, response_text: str) -> bool:
    """Raise the suggestion ``item``'s contradiction stands for, on ``thought_id`` (the item's thought, or
    its author's live restatement of it); whether one was created."""
    from brain.services.suggestions import suggestion_create

    already = CorrectionSuggestion.objects.filter(
        thought_id=thought_id,
        origin=SuggestionOrigin.QUALITY_JUDGE,
        status=SuggestionStatus.PENDING,
        agent_id=turn.agent_id,
    ).exists()
    if already:
        return False
    thought = Thought.objects.get(pk=thought_id)
    if thought.superseded or thought.thought_category == ThoughtCategory.TRANSITION_MARKER:
        return False  # already replaced, or a marker (an event, not a fact: it can't be corrected)
    if item.verdict_source == VerdictSource.EXPLICIT:
        confidence = 1.0
        reason = f"{turn.agent_name} reported in turn {turn.turn_id} that its work contradicted this thought."
    else:
        verdict = item.judge_details.get("contradicted", {})
        confidence = float(verdict.get("confidence", 0.0))
        reason = f"The quality judge found turn {turn.turn_id} of {turn.agent_name} contradicting this thought: "
        reason += quoted(str(verdict.get("reason", "")))  # the judge's words, which a thought may have steered
    said = contradicting_statement(response=response_text, item=item.excerpt)
    statement = said or (
        f"{turn.agent_name} marked this thought as contradicted in turn {turn.turn_id} without a statement."
    )
    _, created = suggestion_create(
        thought=thought,
        statement=statement,
        stated=bool(said),
        origin=SuggestionOrigin.QUALITY_JUDGE,
        confidence=confidence,
        reason=reason,
        agent=turn.agent,
        session_id=turn.session_id,
    )
    return created
