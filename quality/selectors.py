"""Reads of the quality loop: judge trust, the four metrics with history, the ranking multiplier.

Metrics come from the daily rollups only (``quality.services.rollups``): a rate over a window is
the ratio of the window's summed counts (not an average of daily rates), so a quiet day weighs
what it measured. A rate with nothing to measure is ``null``, never 0.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from brain.models import QueryLog
from core.models import Space
from core.selectors import agent_get
from quality import formulas
from quality.choices import TurnStatus
from quality.models import JudgeValidation, QualityRollup, TurnLog
from quality.services.rollups import COUNT_FIELDS


@dataclass(frozen=True)
class JudgeTrust:
    judge_name: str
    trusted: bool
    validation: JudgeValidation | None

    @property
    def ranking_feedback(self) -> str:
        """What moves the EMAs that ranking uses."""
        return "judge_and_explicit" if self.trusted else "explicit_only"


def judge_trust(*, judge_name: str) -> JudgeTrust:
    """Trusted = the judge's latest validation passed the held-out trust rule
    (``quality.services.validation.trust_decide``): 85% agreement on every metric over enough held-out
    turns. A validation recorded under an older rule (whole file, tuning half included) confers no trust.

    A judge never validated is not trusted: ranking then learns from explicit feedback only.
    """
    latest = JudgeValidation.objects.filter(judge_name=judge_name).order_by("-created_at", "-id").first()
    trusted = (
        latest is not None and latest.trusted and (latest.details or {}).get("trust_rule") == formulas.JUDGE_TRUST_RULE
    ) and all(
        getattr(latest, f"{metric}_agreement") >= formulas.JUDGE_MIN_AGREEMENT for metric in formulas.JUDGE_METRICS
    )
    return JudgeTrust(judge_name=judge_name, trusted=trusted, validation=latest)


def metric_values(counts: Counter) -> dict[str, float | None]:
    """The five rates of a set of summed rollup counts."""
    decided = counts["contradictions_raised"] - counts["contradictions_pending"]
    return {
        "on_topic_rate": formulas.rate(counts["on_topic"], counts["items"]),
        "usage_rate": formulas.rate(counts["used"], counts["items"]),
        "contradiction_rate": formulas.rate(counts["contradicted"], counts["items"]),
        "discovery_rate": formulas.rate(counts["contradictions_resolved"], decided),
        "false_demotion_rate": formulas.rate(counts["false_demotions"], counts["demotions"]),
    }


def _metric_detail(name: str, value: float | None, numerator: int, denominator: int, **extra) -> dict:
    comparison, target = formulas.TARGETS.get(name, (None, None))
    return {
        "value": value,
        "target": target,
        "comparison": comparison,
        "meets_target": formulas.meets_target(name, value),
        "numerator": numerator,
        "denominator": denominator,
        **extra,
    }


def _rates(values: dict[str, float | None]) -> dict[str, float | None]:
    return {name: (round(value, 4) if value is not None else None) for name, value in values.items()}


def quality_metrics(*, space: Space, agent_name: str | None = None, days: int = 30, now=None) -> dict:
    """Current rolling-7-day metrics, their targets, and ``days`` days of history (oldest first): of the
    whole space, or of the agent now called ``agent_name`` (its turns, by its id, whatever it was called).

    Each history entry has that day's counts and rates (``daily``) and the rolling 7-day rates
    ending that day (``rolling``): the series the dashboard charts.
    """
    rows = QualityRollup.objects.filter(space=space)
    if agent_name is None:
        rows = rows.filter(agent_id__isnull=True, agent_name="")
    else:
        agent = agent_get(space=space, name=agent_name)  # unknown agent: 404 AGENT_NOT_FOUND
        agent_name = agent.name
        rows = rows.filter(agent_id=agent.pk)  # its own record, under whatever name it had
    now = now or timezone.now()
    today = now.date()
    window = formulas.WINDOW_DAYS
    first_day = today - dt.timedelta(days=days - 1)
    rows = rows.filter(day__gte=first_day - dt.timedelta(days=window - 1), day__lte=today)
    per_day: dict[dt.date, Counter] = {}
    computed_at = None  # the rows are read once: their newest computed_at is taken here, not by a second query
    for row in rows:
        per_day[row.day] = Counter({field: getattr(row, field) for field in COUNT_FIELDS})
        if computed_at is None or row.computed_at > computed_at:
            computed_at = row.computed_at

    def window_counts(end: dt.date) -> Counter:
        total: Counter = Counter({field: 0 for field in COUNT_FIELDS})
        for offset in range(window):
            total.update(per_day.get(end - dt.timedelta(days=offset), Counter()))
        return total

    current = window_counts(today)
    values = metric_values(current)
    decided = current["contradictions_raised"] - current["contradictions_pending"]
    metrics = {
        "on_topic_rate": _metric_detail(
            "on_topic_rate", values["on_topic_rate"], current["on_topic"], current["items"]
        ),
        "usage_rate": _metric_detail("usage_rate", values["usage_rate"], current["used"], current["items"]),
        "contradiction_rate": _metric_detail(
            "contradiction_rate", values["contradiction_rate"], current["contradicted"], current["items"]
        ),
        "discovery_rate": _metric_detail(
            "discovery_rate",
            values["discovery_rate"],
            current["contradictions_resolved"],
            decided,
            pending=current["contradictions_pending"],
        ),
        "false_demotion_rate": _metric_detail(
            "false_demotion_rate",
            values["false_demotion_rate"],
            current["false_demotions"],
            current["demotions"],
            pending=current["demotions_pending"],
        ),
    }
    history = []
    for offset in range(days):
        day = first_day + dt.timedelta(days=offset)
        counts = per_day.get(day, Counter({field: 0 for field in COUNT_FIELDS}))
        history.append(
            {
                "day": day.isoformat(),
                "counts": {field: counts[field] for field in COUNT_FIELDS},
                "daily": _rates(metric_values(counts)),
                "rolling": _rates(metric_values(window_counts(day))),
            }
        )
    trust = judge_trust(judge_name=settings.QUALITY_JUDGE)
    validation = trust.validation
    return {
        "space": space.slug,
        "agent": agent_name,
        "window_days": window,
        "days": days,
        "as_of": now.isoformat(),
        "rolled_up_at": computed_at.isoformat() if computed_at else None,
        "turns": current["turns"],
        "turns_pending": current["turns_pending"],
        "items": current["items"],
        "metrics": metrics,
        "judge": {
            "name": trust.judge_name,
            "trusted": trust.trusted,
            "ranking_feedback": trust.ranking_feedback,
            "min_agreement": formulas.JUDGE_MIN_AGREEMENT,
            "validation": None
            if validation is None
            else {
                "at": validation.created_at.isoformat(),
                "source": validation.source,
                "turns": validation.turns,
                "items": validation.items,
                "agreement": {
                    metric: round(getattr(validation, f"{metric}_agreement"), 4) for metric in formulas.JUDGE_METRICS
                },
            },
        },
        "ranking_enabled": settings.QUALITY_RANKING_ENABLED,
        "history": history,
    }


#: A turn still pending after this long lost its job (no worker, broker restart): enqueued again.
STALE_PENDING = dt.timedelta(minutes=15)
REQUEUE_HORIZON = dt.timedelta(days=2)
#: At most this many lost turns are enqueued again per run, and at most REQUEUE_PER_SPACE of one space,
#: taken space by space, oldest first: one space's backlog doesn't keep another's lost turn waiting.
REQUEUE_MAX = 1000
REQUEUE_PER_SPACE = 100


def turns_lost(*, now) -> list:
    """The ids of the turns whose scoring job was lost (see STALE_PENDING), fairly across spaces."""
    ranked = (
        TurnLog.objects.filter(
            status=TurnStatus.PENDING, created_at__lt=now - STALE_PENDING, created_at__gte=now - REQUEUE_HORIZON
        )
        .annotate(turn=Window(RowNumber(), partition_by=[F("space_id")], order_by=[F("created_at"), F("id")]))
        .filter(turn__lte=REQUEUE_PER_SPACE)
        .order_by("turn", "created_at", "id")
    )
    return list(ranked.values_list("pk", flat=True)[:REQUEUE_MAX])


#: What a session was shown is what the newest this many of its agent's memory calls returned: the
#: turn's check of the ids it names and the scoring's one-step-per-showing rule read these rows, not the
#: whole session, so neither grows with how long the session has run (read whole, an agent alternating a
#: memory call and a turn would make the N turns' jobs read N² rows).
SESSION_CALLS_READ = 200


def session_results(*, space_id, agent_id, session_id: str, exclude_pk=None):
    """The ``results`` of the agent's newest :data:`SESSION_CALLS_READ` memory calls of the session,
    newest first; with ``exclude_pk`` (the newest, which the caller holds already), the others."""
    logs = QueryLog.objects.filter(space_id=space_id, agent_id=agent_id, session_id=session_id)
    if exclude_pk is not None:
        logs = logs.exclude(pk=exclude_pk)
    return logs.order_by("-created_at").values_list("results", flat=True)[
        : SESSION_CALLS_READ - (exclude_pk is not None)
    ]
