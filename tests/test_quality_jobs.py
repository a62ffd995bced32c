"""Periodic jobs: turn-log expiry, the unverified flag, the hourly rollup and its safety net."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from brain.models import CorrectionSuggestion, Thought
from quality import jobs
from quality.models import ConfidenceChange, QualityRollup, TurnItem, TurnLog
from quality.services.rollups import quality_rollup_day, thoughts_flag_unverified, turn_logs_expire
from tests.quality_support import make_thought, make_turn

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)


def test_expiry_deletes_old_turn_logs_and_keeps_rollups(space, dev, settings):
    now = timezone.now()
    settings.TURN_LOG_RETENTION_DAYS = 90
    a = make_thought(space, "a")
    old = make_turn(dev.agent, now - 91 * DAY, [(a, True, True, False)])
    rolled_old = make_turn(dev.agent, now - 95 * DAY, [(a, True, False, False)])
    kept = make_turn(dev.agent, now - 89 * DAY, [(a, False, False, False)])
    quality_rollup_day(day=(now - 95 * DAY).date(), now=now)
    ConfidenceChange.objects.create(
        thought=a,
        space=space,
        turn=old,
        agent_name="dev-1",
        used=True,
        contradicted=False,
        usage_score=0.3,
        contradiction_score=0,
        old_confidence=1,
        new_confidence=1.15,
        changed_at=now - 91 * DAY,
    )

    assert turn_logs_expire(now=now) == 2
    assert list(TurnLog.objects.values_list("pk", flat=True)) == [kept.pk]
    assert TurnItem.objects.filter(turn_id__in=[old.pk, rolled_old.pk]).count() == 0
    assert ConfidenceChange.objects.count() == 0
    assert Thought.objects.filter(pk=a.pk).exists()  # thoughts are never deleted
    # the day that had never been rolled up was rolled up before its turns went
    row = QualityRollup.objects.get(day=(now - 91 * DAY).date(), agent_name="")
    assert (row.turns, row.items, row.used) == (1, 1, 1)
    assert QualityRollup.objects.get(day=(now - 95 * DAY).date(), agent_name="").items == 1
    assert turn_logs_expire(now=now) == 0


def test_expiry_follows_the_retention_setting(space, dev, settings):
    now = timezone.now()
    make_turn(dev.agent, now - 11 * DAY, [])
    settings.TURN_LOG_RETENTION_DAYS = 12
    assert jobs.expire_turn_logs() == 0
    settings.TURN_LOG_RETENTION_DAYS = 10
    assert jobs.expire_turn_logs() == 1


def test_unresolved_contradiction_flags_unverified_after_14_days(space, dev):
    now = timezone.now()
    stale = make_thought(space, "contradicted 15 days ago, never fixed", quality_flags=["stale"])
    young = make_thought(space, "contradicted 13 days ago")
    fixed = make_thought(space, "contradicted 15 days ago, then corrected")
    dismissed = make_thought(space, "contradicted 15 days ago, reviewer dismissed the suggestion")
    dismissed_before = make_thought(space, "a suggestion dismissed before the contradiction")
    not_contradicted = make_thought(space, "used, never contradicted")
    make_turn(
        dev.agent,
        now - 15 * DAY,
        [
            (stale, True, False, True),
            (fixed, True, False, True),
            (dismissed, True, False, True),
            (dismissed_before, True, False, True),
            (not_contradicted, True, True, False),
        ],
    )
    make_turn(dev.agent, now - 13 * DAY, [(young, True, False, True)])
    untrusted = make_thought(space, "contradicted 15 days ago by an unvalidated judge only")
    judged = make_turn(dev.agent, now - 15 * DAY, [(untrusted, True, False, True)])
    TurnItem.objects.filter(turn=judged).update(fed_ema=False)
    Thought.objects.filter(pk=fixed.pk).update(superseded=True, superseded_at=now - 2 * DAY)
    for thought, resolved_at in ((dismissed, now - 5 * DAY), (dismissed_before, now - 20 * DAY)):
        CorrectionSuggestion.objects.create(
            space=space,
            thought=thought,
            statement="it is otherwise",
            origin="quality_judge",
            status="dismissed",
            resolved_at=resolved_at,
        )

    assert thoughts_flag_unverified(now=now) == 2
    flags = dict(Thought.objects.values_list("content", "quality_flags"))
    assert flags[stale.content] == ["stale", "unverified"]
    assert flags[dismissed_before.content] == ["unverified"]
    for thought in (young, fixed, dismissed, not_contradicted, untrusted):
        assert flags[thought.content] == []
    assert jobs.flag_unverified() == 0  # flagged once
    assert Thought.objects.get(pk=stale.pk).quality_flags == ["stale", "unverified"]


def test_a_reviewer_dismissing_the_suggestion_takes_the_unverified_flag_off(space, dev):
    # Before: the flag stayed for good (ranking x0.9, "unverified" on every answer) although the
    # dismissal resolved the contradiction that had earned it, so the nightly job would not set it now.
    now = timezone.now()
    checked = make_thought(space, "contradicted 15 days ago, checked by a reviewer later", quality_flags=["stale"])
    other = make_thought(space, "contradicted 15 days ago, nobody looked")
    make_turn(dev.agent, now - 15 * DAY, [(checked, True, False, True), (other, True, False, True)])
    assert thoughts_flag_unverified(now=now) == 2
    suggestion = CorrectionSuggestion.objects.create(
        space=space, thought=checked, statement="it is otherwise", origin="quality_judge"
    )
    response = dev.post(f"/api/v1/corrections/{suggestion.pk}/dismiss", {"reason": "checked: it stands"}, format="json")
    assert response.status_code == 200, response.json()
    flags = dict(Thought.objects.values_list("content", "quality_flags"))
    assert flags[checked.content] == ["stale"] and flags[other.content] == ["unverified"]
    assert thoughts_flag_unverified(now=now + DAY) == 0  # the job agrees: nothing left unresolved


def test_rollup_job_recomputes_recent_days_and_requeues_lost_scoring(space, dev, enqueued):
    now = timezone.now()
    a = make_thought(space, "a")
    make_turn(dev.agent, now - 3 * DAY, [(a, True, True, False)])
    lost = make_turn(dev.agent, now - dt.timedelta(hours=1), [], status="pending")
    make_turn(dev.agent, now - dt.timedelta(minutes=1), [], status="pending")  # its job may still be queued
    make_turn(dev.agent, now - 20 * DAY, [(a, True, True, False)])  # final already, not recomputed
    result = jobs.rollup_daily()
    assert enqueued == [str(lost.pk)]  # requeued
    assert result["days"] == 16 and result["requeued"] == 1
    assert QualityRollup.objects.get(day=(now - 3 * DAY).date(), agent_name="").used == 1
    assert not QualityRollup.objects.filter(day=(now - 20 * DAY).date()).exists()


def test_periodic_jobs_are_scheduled():
    from config.celery import PERIODIC_JOBS

    scheduled = {entry["task"] for entry in PERIODIC_JOBS.values()}
    assert {"quality.jobs.rollup_daily", "quality.jobs.expire_turn_logs", "quality.jobs.flag_unverified"} <= scheduled
    from config.celery import app

    assert {"quality.jobs.rollup_daily", "quality.jobs.expire_turn_logs", "quality.jobs.flag_unverified"} <= set(
        app.tasks
    )
