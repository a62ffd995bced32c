"""Daily rollups, turn-log expiry and the ``unverified`` flag (SPEC 4.3, 4.5; seeds/004 section 2).

Rollup rows are keyed by (day, space, agent); the row without an agent is the whole space. An agent
is its id, whatever it is called (a renamed agent keeps its record; an agent given a retired agent's
name starts with none); the turns of an agent deleted before they were rolled up count under the name
they carry (``TurnLog.agent_name``), since their link to it is gone. A day is
the UTC calendar day a turn was *logged* (``TurnLog.created_at``). Recomputing a day deletes that
day's rows and writes them again in one transaction, so the hourly job can recompute recent days
as often as it likes: the last ``ROLLUP_RECOMPUTE_DAYS`` (15) days, because a contradiction raised
on a day can still be resolved up to 14 days later and a demotion undone up to 7 days later. Days
older than that are final. Rollups are kept forever; only the turn logs they summarise expire.

Counts per row (only scored turns' items; pending turns are counted in ``turns_pending``):

- ``items``, ``on_topic``, ``used``, ``contradicted``: outcomes that count (explicit feedback wins
  over the judge), over the items injected into the day's turns, each thought once per session (the
  turns of a session naming it again add nothing: one agent can't set the space's rates). Items that
  are only in an agent's feedback ids (``in_injection=False``: injected by an earlier call) feed their
  thoughts' EMAs and the discovery count, but not these rates, whose denominator is "injected items".
- Discovery, per item: each *distinct thought* contradicted in the group's turns of the day is one
  raised contradiction, raised at its first contradicted turn that day. It is *resolved* when the
  thought's ``superseded_at`` (a refinement, consolidation or correction) is at most 14 days after
  that; an item superseded before the contradiction also counts as resolved (the fix already
  existed). It is *pending* while unresolved and the 14 days are not over. Discovery rate =
  resolved / (raised - pending): undecided contradictions are left out instead of counting as
  failures, and the endpoint reports how many are pending.
- Demotions, per item: each distinct thought whose effective confidence fell from >= 1.0 to below
  1.0 through a turn of the group that day (``ConfidenceChange``). A *false demotion* is one whose
  thought is back at >= 1.0 within 7 days. ``false_demotion_rate`` = false demotions / demotions in
  the window (a lower bound while some of them still have time to recover: ``demotions_pending``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, Min, OuterRef, Q, TextField, Value
from django.db.models.functions import Cast, Coalesce, Concat
from django.utils import timezone

from brain.choices import SuggestionStatus
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services import flags, lineage
from core.db import ROLLUP_LOCK_NAMESPACE
from core.models import Agent
from quality import formulas
from quality.choices import TurnStatus, VerdictSource
from quality.models import ConfidenceChange, QualityRollup, SessionOwner, TurnItem, TurnLog

ROLLUP_RECOMPUTE_DAYS = formulas.DISCOVERY_DAYS + 1
COUNT_FIELDS = (
    "turns",
    "turns_pending",
    "items",
    "on_topic",
    "used",
    "contradicted",
    "explicit_items",
    "contradictions_raised",
    "contradictions_resolved",
    "contradictions_pending",
    "demotions",
    "false_demotions",
    "demotions_pending",
)


def day_bounds(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
    return start, start + dt.timedelta(days=1)


#: Who a row of the day counts for (see the module's docstring), as one text a query groups by: the
#: agent's id, or NAMED + the name a deleted agent's turn carries.
NAMED = "name:"


def _who(prefix: str = ""):
    return Coalesce(
        Cast(f"{prefix}agent_id", TextField()), Concat(Value(NAMED), f"{prefix}agent_name", output_field=TextField())
    )


def _keys(space_id, who: str) -> tuple[tuple, tuple]:
    """The agent's row and the space's row (``who`` "")."""
    return (space_id, who), (space_id, "")


def _rollup(*, day: dt.date, space_id, who: str, names: dict[str, str], counter: Counter, now) -> QualityRollup:
    if not who:
        agent_id, agent_name = None, ""
    elif who.startswith(NAMED):
        agent_id, agent_name = None, who.removeprefix(NAMED)
    else:
        agent_id, agent_name = who, names.get(who, "")
    return QualityRollup(
        day=day, space_id=space_id, agent_id=agent_id, agent_name=agent_name, computed_at=now, **dict(counter)
    )


def quality_rollup_day(*, day: dt.date, now: dt.datetime | None = None) -> int:
    """Recompute one day's rollup rows for every space; returns how many rows were written.

    Two recomputations of one day (the hourly job and ``manage.py quality rollup``) take turns on
    an advisory lock, so neither inserts rows the other is replacing.
    """
    now = now or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [ROLLUP_LOCK_NAMESPACE, day.toordinal()])
        counts = _day_counts(day, now)
        ids = [who for _, who in counts if who and not who.startswith(NAMED)]
        # Each agent's row shows the name it has now.
        names = {str(pk): name for pk, name in Agent.objects.filter(pk__in=ids).values_list("pk", "name")}
        rows = [
            _rollup(day=day, space_id=space_id, who=who, names=names, counter=counter, now=now)
            for (space_id, who), counter in counts.items()
        ]
        QualityRollup.objects.filter(day=day).delete()
        QualityRollup.objects.bulk_create(rows)
    return len(rows)


def _day_counts(day: dt.date, now: dt.datetime) -> dict[tuple, Counter]:
    start, end = day_bounds(day)
    counts: dict[tuple, Counter] = defaultdict(Counter)

    turns = TurnLog.objects.filter(created_at__gte=start, created_at__lt=end)
    for row in turns.values("space_id", who=_who()).annotate(
        n=Count("id"), pending=Count("id", filter=Q(status=TurnStatus.PENDING))
    ):
        for key in _keys(row["space_id"], row["who"]):
            counts[key]["turns"] += row["n"]
            counts[key]["turns_pending"] += row["pending"]

    items = TurnItem.objects.filter(
        turn__created_at__gte=start, turn__created_at__lt=end, turn__status=TurnStatus.SCORED
    )
    # One count per session and thought a day (an item the judge gave no verdict is not counted): the
    # turns of a session that name a thought again count it once, with any turn's outcome, so one agent
    # naming the same few shown thoughts turn after turn can't set the space's rates.
    for row in (
        items.filter(in_injection=True, on_topic__isnull=False)
        .values("turn__space_id", "turn__session_id", "thought_id", who=_who("turn__"))
        .annotate(
            on_topic=Count("id", filter=Q(on_topic=True)),
            used=Count("id", filter=Q(used=True)),
            contradicted=Count("id", filter=Q(contradicted=True)),
            explicit=Count("id", filter=Q(verdict_source=VerdictSource.EXPLICIT)),
        )
        .iterator()
    ):
        for key in _keys(row["turn__space_id"], row["who"]):
            counts[key]["items"] += 1
            counts[key]["on_topic"] += bool(row["on_topic"])
            counts[key]["used"] += bool(row["used"])
            counts[key]["contradicted"] += bool(row["contradicted"])
            counts[key]["explicit_items"] += bool(row["explicit"])

    _count_discovery(items, counts, now)
    _count_demotions(start, end, counts, now)
    return counts


def _count_discovery(items, counts: dict[tuple, Counter], now: dt.datetime) -> None:
    raised: dict[tuple, dict] = defaultdict(dict)  # key -> {thought_id: first contradicted at}
    for row in (
        items.filter(contradicted=True)
        .values("turn__space_id", "thought_id", who=_who("turn__"))
        .annotate(first=Min("turn__created_at"))
    ):
        for key in _keys(row["turn__space_id"], row["who"]):
            previous = raised[key].get(row["thought_id"])
            raised[key][row["thought_id"]] = min(previous, row["first"]) if previous else row["first"]
    thought_ids = {thought_id for group in raised.values() for thought_id in group}
    superseded_at = dict(Thought.objects.filter(pk__in=thought_ids).values_list("pk", "superseded_at"))
    window = dt.timedelta(days=formulas.DISCOVERY_DAYS)
    for key, group in raised.items():
        for thought_id, raised_at in group.items():
            counts[key]["contradictions_raised"] += 1
            when = superseded_at.get(thought_id)
            if when is not None and when <= raised_at + window:
                counts[key]["contradictions_resolved"] += 1
            elif now < raised_at + window:
                counts[key]["contradictions_pending"] += 1


def _count_demotions(start: dt.datetime, end: dt.datetime, counts: dict[tuple, Counter], now: dt.datetime) -> None:
    demoted: dict[tuple, dict] = defaultdict(dict)  # key -> {thought_id: first demoted at}
    for row in (
        ConfidenceChange.objects.filter(
            changed_at__gte=start, changed_at__lt=end, old_confidence__gte=1.0, new_confidence__lt=1.0
        )
        .values("space_id", "thought_id", who=_who())
        .annotate(first=Min("changed_at"))
    ):
        for key in _keys(row["space_id"], row["who"]):
            previous = demoted[key].get(row["thought_id"])
            demoted[key][row["thought_id"]] = min(previous, row["first"]) if previous else row["first"]
    if not demoted:
        return
    window = dt.timedelta(days=formulas.FALSE_DEMOTION_DAYS)
    recoveries: dict = defaultdict(list)
    thought_ids = {thought_id for group in demoted.values() for thought_id in group}
    for thought_id, at in ConfidenceChange.objects.filter(
        thought_id__in=thought_ids, new_confidence__gte=1.0, changed_at__gt=start, changed_at__lte=end + window
    ).values_list("thought_id", "changed_at"):
        recoveries[thought_id].append(at)
    for key, group in demoted.items():
        for thought_id, demoted_at in group.items():
            counts[key]["demotions"] += 1
            if any(demoted_at < at <= demoted_at + window for at in recoveries[thought_id]):
                counts[key]["false_demotions"] += 1
            elif now < demoted_at + window:
                counts[key]["demotions_pending"] += 1


def rollup_recompute_days(*, now: dt.datetime | None = None) -> list[dt.date]:
    """The days the hourly rollup recomputes: recent ones whose turn logs are all still kept."""
    now = now or timezone.now()
    today = now.date()
    oldest_kept = (now - dt.timedelta(days=settings.TURN_LOG_RETENTION_DAYS)).date() + dt.timedelta(days=1)
    first = max(today - dt.timedelta(days=ROLLUP_RECOMPUTE_DAYS), oldest_kept)
    return [first + dt.timedelta(days=n) for n in range((today - first).days + 1)]


def turn_logs_expire(*, now: dt.datetime | None = None, batch_size: int = 5000) -> int:
    """Delete turn logs (and confidence changes) older than the retention, and the owners of sessions with
    no turn or query-log row left; returns turns deleted.

    Days about to lose their turns and never rolled up (the rollup job was down) are rolled up
    first, so expiry never loses a day's numbers.
    """
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=settings.TURN_LOG_RETENTION_DAYS)
    expiring = TurnLog.objects.filter(created_at__lt=cutoff)
    expiring_days = set(expiring.dates("created_at", "day"))
    rolled = set(QualityRollup.objects.filter(day__in=expiring_days).values_list("day", flat=True))
    for day in sorted(expiring_days - rolled):
        quality_rollup_day(day=day, now=now)
    deleted = 0
    while True:
        ids = list(expiring.values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        with transaction.atomic():
            TurnItem.objects.filter(turn_id__in=ids).delete()
            ConfidenceChange.objects.filter(turn_id__in=ids).update(turn=None)
            deleted += TurnLog.objects.filter(pk__in=ids).delete()[1].get(TurnLog._meta.label, 0)
    while True:
        ids = list(ConfidenceChange.objects.filter(changed_at__lt=cutoff).values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        ConfidenceChange.objects.filter(pk__in=ids).delete()
    # A session's written owner goes with the last of its turns and query-log rows (until then they, or it,
    # say who used the session first).
    same_session = {"space_id": OuterRef("space_id"), "session_id": OuterRef("session_id")}
    SessionOwner.objects.filter(claimed_at__lt=cutoff).exclude(Exists(TurnLog.objects.filter(**same_session))).exclude(
        Exists(QueryLog.objects.filter(**same_session))
    ).delete()
    return deleted


def thoughts_flag_unverified(*, now: dt.datetime | None = None) -> int:
    """Flag ``unverified`` every thought with a contradiction left unresolved for 14 days (SPEC 4.5).

    A raised contradiction (a contradicted turn item) is resolved when the thought is superseded,
    or when a reviewer dismissed a correction suggestion on it after the contradiction was raised
    (the thought was checked and stands); an agent withdrawing its own suggestion resolves only its own
    contradictions. Only contradictions that ranking trusts count (explicit
    feedback, or a judge validated at the time: ``fed_ema``): the flag is a ranking signal, and an
    unvalidated judge's verdicts only ever reach reviewers, as suggestions. Only the contradictions of
    agents still active count: a deactivated or deleted agent's reports no longer flag anything
    (its pending suggestions stay for a reviewer to decide). Returns how many thoughts were newly
    flagged.
    """
    now = now or timezone.now()
    cutoff = flags.unverified_cutoff(now=now)
    dismissed_since = CorrectionSuggestion.objects.filter(
        Q(status=SuggestionStatus.DISMISSED)
        | Q(status=SuggestionStatus.WITHDRAWN, agent_id=OuterRef("turn__agent_id")),
        thought_id=OuterRef("thought_id"),
        resolved_at__gte=OuterRef("turn__created_at"),
    )
    unresolved = TurnItem.objects.filter(
        contradicted=True,
        fed_ema=True,
        turn__created_at__lte=cutoff,
        turn__agent__active=True,
    ).exclude(Exists(dismissed_since))
    flagged = flags.thoughts_flag_unverified(
        unresolved_contradiction=Exists(unresolved.filter(thought_id=OuterRef("pk")))
    )
    return flagged + _restatements_flag_unverified(unresolved)


def _restatements_flag_unverified(unresolved) -> int:
    """Flag the author's live restatement of a claim whose contradictions are ``unresolved`` (a
    refinement or consolidation of its own thought, down ``refined_by``: the claim its teammates reported,
    which carries their pending suggestions). A reviewer's dismissal of a suggestion on the restatement,
    or the raiser withdrawing its own, resolves the contradictions raised before it. Returns how many
    thoughts were newly flagged."""
    raised = list(
        unresolved.filter(thought__superseded=True, thought__refined_by__agent_id=F("thought__agent_id")).values_list(
            "thought_id", "turn__created_at", "turn__agent_id"
        )
    )
    if not raised:
        return 0
    latest = lineage.own_latest_versions(list({row[0] for row in raised}))
    answered = defaultdict(list)
    for thought_id, status, agent_id, resolved_at in CorrectionSuggestion.objects.filter(
        thought_id__in=set(latest.values()),
        status__in=[SuggestionStatus.DISMISSED, SuggestionStatus.WITHDRAWN],
        resolved_at__isnull=False,
    ).values_list("thought_id", "status", "agent_id", "resolved_at"):
        answered[thought_id].append((status, agent_id, resolved_at))
    flag = {
        latest[thought_id]
        for thought_id, raised_at, raiser in raised
        if thought_id in latest
        and not any(
            resolved_at >= raised_at and (status == SuggestionStatus.DISMISSED or agent_id == raiser)
            for status, agent_id, resolved_at in answered[latest[thought_id]]
        )
    }
    return flags.thoughts_flag_unverified(unresolved_contradiction=Q(id__in=flag)) if flag else 0
