"""Quality-loop jobs. Each takes ids (or nothing), calls one service, and lets errors surface.

Periodic ones are declared in ``config/celery.py``: ``rollup_daily`` (hourly), ``expire_turn_logs``
and ``flag_unverified`` (daily).
"""

from __future__ import annotations

import dataclasses
import logging

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from quality.services import rollups, scoring

logger = logging.getLogger("colony.quality")


@shared_task(
    name="quality.jobs.score_turn",
    autoretry_for=(OperationalError, scoring.JudgeRetry),
    retry_backoff=5,
    retry_backoff_max=600,
    max_retries=8,
    time_limit=600,
    soft_time_limit=540,
)
def score_turn(turn_log_id: str) -> dict:
    return dataclasses.asdict(scoring.turn_score(turn_log_id=turn_log_id))


@shared_task(name="quality.jobs.rollup_daily", autoretry_for=(OperationalError,), max_retries=3, time_limit=1800)
def rollup_daily() -> dict:
    """Recompute the recent days' rollups; first re-enqueue turns whose scoring job was lost."""
    from quality.selectors import turns_lost

    now = timezone.now()
    stale = turns_lost(now=now)
    for turn_log_id in stale:
        score_turn.delay(str(turn_log_id))
    days = rollups.rollup_recompute_days(now=now)
    rows = sum(rollups.quality_rollup_day(day=day, now=now) for day in days)
    return {"days": len(days), "rows": rows, "requeued": len(stale)}


@shared_task(name="quality.jobs.expire_turn_logs", autoretry_for=(OperationalError,), max_retries=3, time_limit=3600)
def expire_turn_logs() -> int:
    return rollups.turn_logs_expire()


@shared_task(name="quality.jobs.flag_unverified", autoretry_for=(OperationalError,), max_retries=3, time_limit=600)
def flag_unverified() -> int:
    return rollups.thoughts_flag_unverified()
