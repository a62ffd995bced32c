"""The four metrics and false_demotion_rate on constructed data with known answers; the endpoint."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from quality import formulas
from quality.models import ConfidenceChange, JudgeValidation, QualityRollup, TurnItem
from quality.selectors import quality_metrics
from quality.services.rollups import quality_rollup_day, rollup_recompute_days
from tests.quality_support import make_thought, make_turn

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)


@pytest.fixture
def now():
    return timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)


def rollup(now, *days_ago):
    for n in days_ago:
        quality_rollup_day(day=(now - n * DAY).date(), now=now)


def test_rates_over_the_rolling_window_per_space_and_per_agent(space, agent_factory, now):
    dev, qa = agent_factory("dev"), agent_factory("qa")
    t = [make_thought(space, f"thought {n}") for n in range(8)]
    make_turn(
        dev.agent,
        now - DAY,
        [(t[0], True, True, False), (t[1], True, False, False), (t[2], False, False, False), (t[3], True, True, True)],
    )
    make_turn(qa.agent, now - 2 * DAY, [(t[4], True, True, False), (t[5], False, False, True)])
    make_turn(qa.agent, now - 3 * DAY, [], status="pending")
    make_turn(dev.agent, now - 8 * DAY, [(t[6], False, False, True), (t[7], False, False, True)])  # out of window
    rollup(now, 1, 2, 3, 8)

    space_metrics = quality_metrics(space=space, days=10, now=now)
    m = space_metrics["metrics"]
    assert (m["on_topic_rate"]["numerator"], m["on_topic_rate"]["denominator"]) == (4, 6)
    assert m["on_topic_rate"]["value"] == pytest.approx(4 / 6)
    assert m["usage_rate"]["value"] == pytest.approx(3 / 6)
    assert m["contradiction_rate"]["value"] == pytest.approx(2 / 6)
    assert (space_metrics["turns"], space_metrics["turns_pending"], space_metrics["items"]) == (3, 1, 6)

    dev_metrics = quality_metrics(space=space, agent_name=dev.agent.name, days=10, now=now)["metrics"]
    assert dev_metrics["on_topic_rate"]["value"] == pytest.approx(3 / 4)
    assert dev_metrics["usage_rate"]["value"] == pytest.approx(2 / 4)
    assert dev_metrics["contradiction_rate"]["value"] == pytest.approx(1 / 4)
    qa_metrics = quality_metrics(space=space, agent_name=qa.agent.name, days=10, now=now)["metrics"]
    assert qa_metrics["contradiction_rate"]["value"] == pytest.approx(1 / 2)

    # targets and whether they are met
    assert (m["on_topic_rate"]["target"], m["on_topic_rate"]["comparison"], m["on_topic_rate"]["meets_target"]) == (
        0.8,
        ">=",
        False,
    )
    assert (m["usage_rate"]["target"], m["usage_rate"]["meets_target"]) == (0.5, True)
    assert (m["contradiction_rate"]["target"], m["contradiction_rate"]["comparison"]) == (0.05, "<=")
    assert m["discovery_rate"]["target"] == 0.7

    # history: oldest first, daily and rolling rates
    history = space_metrics["history"]
    assert len(history) == 10 and history[-1]["day"] == now.date().isoformat()
    day8 = next(h for h in history if h["day"] == (now - 8 * DAY).date().isoformat())
    assert day8["counts"]["items"] == 2 and day8["daily"]["contradiction_rate"] == 1.0
    day1 = next(h for h in history if h["day"] == (now - DAY).date().isoformat())
    assert day1["daily"]["on_topic_rate"] == 0.75
    # rolling window ending day -1 covers days -7..-1: excludes day -8
    assert day1["rolling"]["on_topic_rate"] == pytest.approx(round(4 / 6, 4))
    assert history[0]["daily"]["on_topic_rate"] is None  # nothing measured: null, not 0


def test_nothing_measured_gives_null_rates(space, now):
    metrics = quality_metrics(space=space, days=1, now=now)["metrics"]
    assert all(metric["value"] is None and metric["meets_target"] is None for metric in metrics.values())


def test_discovery_within_and_after_14_days(space, dev, now):
    resolved = make_thought(space, "superseded 10 days after the contradiction")
    late = make_thought(space, "superseded 15 days after the contradiction")
    never = make_thought(space, "never superseded")
    before = make_thought(space, "already superseded before it was contradicted")
    raised = now - 20 * DAY
    make_turn(
        dev.agent,
        raised,
        [(resolved, True, False, True), (late, True, False, True), (never, True, False, True)],
    )
    make_turn(dev.agent, raised + dt.timedelta(hours=1), [(resolved, True, False, True)])  # same thought again
    make_turn(dev.agent, raised, [(before, True, False, True)])
    type(resolved).objects.filter(pk=resolved.pk).update(superseded=True, superseded_at=raised + 10 * DAY)
    type(late).objects.filter(pk=late.pk).update(superseded=True, superseded_at=raised + 15 * DAY)
    type(before).objects.filter(pk=before.pk).update(superseded=True, superseded_at=raised - DAY)
    rollup(now, 20)
    row = QualityRollup.objects.get(day=raised.date(), agent_name="")
    assert (row.contradictions_raised, row.contradictions_resolved, row.contradictions_pending) == (4, 2, 0)
    history = quality_metrics(space=space, days=21, now=now)["history"]
    assert history[0]["daily"]["discovery_rate"] == 0.5

    # a contradiction raised 3 days ago, not superseded yet: pending, left out of the rate
    pending = make_thought(space, "contradicted recently")
    fixed = make_thought(space, "contradicted and corrected recently")
    make_turn(dev.agent, now - 3 * DAY, [(pending, True, False, True), (fixed, True, False, True)])
    type(fixed).objects.filter(pk=fixed.pk).update(superseded=True, superseded_at=now - DAY)
    rollup(now, 3)
    discovery = quality_metrics(space=space, days=7, now=now)["metrics"]["discovery_rate"]
    assert discovery["value"] == 1.0
    assert (discovery["numerator"], discovery["denominator"], discovery["pending"]) == (1, 1, 1)


def test_false_demotion_rate(space, dev, now):
    def change(thought, at, old, new):
        ConfidenceChange.objects.create(
            thought=thought,
            space=space,
            agent_name="dev-1",
            used=new > old,
            contradicted=new < old,
            usage_score=0.0,
            contradiction_score=0.0,
            old_confidence=old,
            new_confidence=new,
            changed_at=at,
        )

    quick, slow, recent, below = (make_thought(space, name) for name in ("quick", "slow", "recent", "below"))
    demoted_at = now - 10 * DAY
    change(quick, demoted_at, 1.0, 0.4)
    change(quick, demoted_at + 3 * DAY, 0.9, 1.05)  # back within 7 days: a false demotion
    change(slow, demoted_at, 1.15, 0.55)
    change(slow, demoted_at + 9 * DAY, 0.95, 1.01)  # back after 9 days: the demotion stood
    change(below, demoted_at, 0.8, 0.4)  # already below 1: not a new demotion
    change(recent, now - 2 * DAY, 1.0, 0.4)  # 7 days not over
    rollup(now, 10, 2)
    old_row = QualityRollup.objects.get(day=demoted_at.date(), agent_name="")
    assert (old_row.demotions, old_row.false_demotions, old_row.demotions_pending) == (2, 1, 0)
    assert QualityRollup.objects.get(day=demoted_at.date(), agent_name="dev-1").false_demotions == 1
    history = quality_metrics(space=space, days=11, now=now)["history"]
    assert history[0]["daily"]["false_demotion_rate"] == 0.5
    current = quality_metrics(space=space, days=1, now=now)["metrics"]["false_demotion_rate"]
    assert (current["value"], current["denominator"], current["pending"]) == (0.0, 1, 1)


def test_recomputing_a_day_replaces_its_rows(space, dev, now):
    a = make_thought(space, "a")
    turn = make_turn(dev.agent, now - DAY, [(a, True, True, False)])
    rollup(now, 1)
    rollup(now, 1)
    assert QualityRollup.objects.filter(day=(now - DAY).date()).count() == 2  # the space and dev-1
    TurnItem.objects.filter(turn=turn).update(used=False)
    rollup(now, 1)
    assert QualityRollup.objects.get(day=(now - DAY).date(), agent_name="").used == 0
    assert QualityRollup.objects.filter(day=(now - DAY).date()).count() == 2


def test_recompute_days_cover_the_discovery_window_within_retention(settings, now):
    days = rollup_recompute_days(now=now)
    assert days[0] == (now - 15 * DAY).date() and days[-1] == now.date() and len(days) == 16
    settings.TURN_LOG_RETENTION_DAYS = 5  # never recompute a day whose turns may be partly expired
    assert rollup_recompute_days(now=now)[0] == (now - 4 * DAY).date()


# --- the endpoint --------------------------------------------------------------------------------


def test_metrics_endpoint(space, dev, agent_factory, other_space):
    now = timezone.now()
    a = make_thought(space, "a")
    make_turn(dev.agent, now, [(a, True, True, False)])
    foreign = agent_factory("dev", name="foreign", in_space=other_space)
    make_turn(foreign.agent, now, [(make_thought(other_space, "x"), False, False, True)])
    rollup(now, 0)

    response = dev.get("/api/v1/quality/metrics?days=3")
    assert response.status_code == 200
    body = response.json()
    assert body["space"] == "default" and body["agent"] is None and body["window_days"] == 7
    assert set(body["metrics"]) == {
        "on_topic_rate",
        "usage_rate",
        "contradiction_rate",
        "discovery_rate",
        "false_demotion_rate",
    }
    assert body["metrics"]["on_topic_rate"]["value"] == 1.0
    assert body["metrics"]["contradiction_rate"]["value"] == 0.0  # the other space's turn is not here
    assert len(body["history"]) == 3
    assert body["judge"] == {
        "name": "embedding",
        "trusted": False,
        "ranking_feedback": "explicit_only",
        "min_agreement": 0.85,
        "validation": None,
    }
    assert dev.get("/api/v1/quality/metrics").json()["days"] == 30
    assert dev.get("/api/v1/quality/metrics?agent=dev-1").json()["agent"] == "dev-1"


def test_metrics_endpoint_says_whether_the_judge_is_trusted(dev, space):
    JudgeValidation.objects.create(
        judge_name="embedding",
        source="quality/fixtures/judge_validation.jsonl",
        source_sha256="0" * 64,
        turns=50,
        items=140,
        on_topic_agreement=0.9,
        used_agreement=0.88,
        contradicted_agreement=0.95,
        trusted=True,
        details={"trust_rule": formulas.JUDGE_TRUST_RULE},
    )
    judge = dev.get("/api/v1/quality/metrics").json()["judge"]
    assert judge["trusted"] is True and judge["ranking_feedback"] == "judge_and_explicit"
    assert judge["validation"]["agreement"] == {"on_topic": 0.9, "used": 0.88, "contradicted": 0.95}


@pytest.mark.parametrize("query", ["days=0", "days=366", "days=abc", "days=-1"])
def test_metrics_endpoint_rejects_bad_days(dev, query):
    response = dev.get(f"/api/v1/quality/metrics?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_metrics_endpoint_unknown_agent_is_404(dev, agent_factory, other_space):
    agent_factory("dev", name="elsewhere", in_space=other_space)
    for name in ("nobody", "elsewhere"):  # an agent of another space is unknown here
        response = dev.get(f"/api/v1/quality/metrics?agent={name}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "AGENT_NOT_FOUND"


def test_metrics_endpoint_needs_a_token(anon):
    assert anon.get("/api/v1/quality/metrics").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_concurrent_recomputations_of_a_day_do_not_collide(space, agent_factory):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    now = timezone.now()
    agent = agent_factory("dev").agent
    make_turn(agent, now, [(make_thought(space, "a"), True, True, False)])
    barrier = threading.Barrier(3, timeout=20)

    def recompute(_):
        try:
            barrier.wait()
            return quality_rollup_day(day=now.date(), now=now)
        finally:
            connection.close()

    with ThreadPoolExecutor(3) as pool:
        assert list(pool.map(recompute, range(3))) == [2, 2, 2]
    assert QualityRollup.objects.filter(day=now.date()).count() == 2


def test_feedback_only_items_count_for_discovery_not_for_the_rates(space, dev, now):
    injected = make_thought(space, "injected by this turn's memory call")
    earlier = make_thought(space, "from an earlier call, contradicted in feedback")
    turn = make_turn(dev.agent, now - DAY, [(injected, True, True, False), (earlier, True, False, True)])
    TurnItem.objects.filter(turn=turn, thought=earlier).update(in_injection=False)
    rollup(now, 1)
    row = QualityRollup.objects.get(day=(now - DAY).date(), agent_name="")
    assert (row.items, row.on_topic, row.used, row.contradicted) == (1, 1, 1, 0)
    assert (row.contradictions_raised, row.contradictions_pending) == (1, 1)


def test_rolled_up_at_is_the_newest_computation_among_the_rows_read(space, now):
    assert quality_metrics(space=space, days=3, now=now)["rolled_up_at"] is None
    QualityRollup.objects.create(space=space, day=(now - DAY).date(), items=1, computed_at=now - 2 * DAY)
    # the older day was recomputed later: the newest computation wins, not the newest day
    QualityRollup.objects.create(space=space, day=(now - 2 * DAY).date(), items=1, computed_at=now - DAY)
    assert quality_metrics(space=space, days=3, now=now)["rolled_up_at"] == (now - DAY).isoformat()
