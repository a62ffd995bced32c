"""EMA and effective-confidence formulas (SPEC 4.4) on hand-computed values."""

from __future__ import annotations

import pytest

from brain import ranking
from quality import formulas


def test_ema_starts_from_zero_and_moves_by_gamma():
    assert formulas.ema(None, 1.0) == pytest.approx(0.3)
    assert formulas.ema(0.3, 1.0) == pytest.approx(0.51)  # 0.3*1 + 0.7*0.3
    assert formulas.ema(0.51, 0.0) == pytest.approx(0.357)  # 0.7*0.51
    assert formulas.ema(None, 0.0) == 0.0


def test_ema_of_a_sequence():
    score = None
    for outcome in [1, 1, 0, 1]:
        score = formulas.ema(score, outcome)
    # 0.3 -> 0.51 -> 0.357 -> 0.3*1 + 0.7*0.357 = 0.5499
    assert score == pytest.approx(0.5499)


@pytest.mark.parametrize(
    ("usage", "contradiction", "expected"),
    [
        (None, None, 1.0),  # no history: no change
        (0.0, 0.0, 1.0),
        (1.0, 0.0, 1.5),  # 1 + 0.5
        (0.3, 0.0, 1.15),
        (0.0, 0.3, 0.4),  # 1 - 2*0.3
        (0.51, 0.3, 0.655),  # 1 + 0.255 - 0.6
        (0.0, 0.51, 0.0),  # 1 - 1.02 clamps at 0
        (1.0, 1.0, 0.0),  # 1 + 0.5 - 2 clamps at 0
    ],
)
def test_confidence_formula(usage, contradiction, expected):
    assert formulas.confidence_formula(usage, contradiction) == pytest.approx(expected)


def test_contradiction_punishes_four_times_harder_than_use_rewards():
    up = formulas.confidence_formula(0.1, 0.0) - 1.0
    down = 1.0 - formulas.confidence_formula(0.0, 0.1)
    assert down == pytest.approx(4 * up)


def test_rates_and_targets():
    assert formulas.rate(3, 4) == 0.75
    assert formulas.rate(0, 0) is None
    assert formulas.meets_target("on_topic_rate", 0.8) is True
    assert formulas.meets_target("on_topic_rate", 0.79) is False
    assert formulas.meets_target("contradiction_rate", 0.05) is True
    assert formulas.meets_target("contradiction_rate", 0.051) is False
    assert formulas.meets_target("discovery_rate", None) is None
    assert formulas.TARGETS == {
        "on_topic_rate": (">=", 0.8),
        "usage_rate": (">=", 0.5),
        "contradiction_rate": ("<=", 0.05),
        "discovery_rate": (">=", 0.7),
    }


def test_quality_multiplier_is_the_confidence_only_while_the_switch_is_on(settings):
    settings.QUALITY_RANKING_ENABLED = True
    assert ranking.quality_multiplier(0.4) == 0.4
    assert ranking.quality_multiplier(1.3) == 1.3
    assert ranking.quality_multiplier(-0.2) == 0.0  # never a negative score
    assert ranking.quality_multiplier(None) == 1.0  # no history
    settings.QUALITY_RANKING_ENABLED = False
    assert ranking.quality_multiplier(0.4) == ranking.quality_multiplier(1.3) == 1.0


@pytest.mark.parametrize(
    ("agents", "expected"),
    [(0, 0.5), (1, 0.5), (2, 0.0), (3, 0.0)],
)
def test_one_agents_contradictions_stop_at_the_single_agent_floor(agents, expected):
    assert formulas.effective_confidence(0.0, 0.9, agents, 0) == expected
    assert formulas.effective_confidence(0.5, 0.1, agents, 0) == pytest.approx(1.05)  # above the floor: untouched


@pytest.mark.parametrize(
    ("agents", "expected"),
    [(0, 1.25), (1, 1.25), (2, 1.45), (3, 1.45)],
)
def test_one_agents_uses_stop_at_the_single_agent_ceiling(agents, expected):
    assert formulas.SINGLE_AGENT_CEILING == 1.25  # half the formula's largest lift (1.5)
    assert formulas.effective_confidence(0.9, 0.0, 0, agents) == pytest.approx(expected)
    assert formulas.effective_confidence(0.4, 0.0, 0, agents) == pytest.approx(1.2)  # below the ceiling: untouched
