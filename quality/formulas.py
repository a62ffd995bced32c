"""The quality loop's numbers in one place (SPEC 4.3, 4.4; seeds/004 sections 2 and 4).

Pure functions and constants, so the formulas the database updates implement can be tested on their
own and read without the plumbing around them. The multiplier ranking applies to the stored
``effective_confidence`` (and the ``QUALITY_RANKING_ENABLED`` switch) is
``brain.ranking.quality_multiplier``, next to every other ranking multiplier.

EMAs. Each injected item that *counts* (see ``quality.services.scoring``) contributes one
per-injection outcome x in {0, 1} to two exponential moving averages on its thought:
``usage_score`` (x = the item was used) and ``contradiction_score`` (x = it was contradicted):

    S_n = GAMMA * x_n + (1 - GAMMA) * S_(n-1),   S_0 = 0   (null in the database = no history)

Starting from 0 rather than from the first observation is deliberate: one verdict moves a score by
GAMMA = 0.3, so a single (possibly wrong) contradiction demotes a thought to 0.4, not to 0, and
"no history" is exactly the same as scores of 0 for the formula below.

Effective confidence, the ranking multiplier (stored confidence is 1 in Colony):

    effective_confidence = max(0, 1 + ALPHA * usage_score - BETA * contradiction_score)

with ALPHA = 0.5 and BETA = 2.0: a contradiction punishes four times harder than a use rewards
("wrong information is more costly than missing information"). No history gives exactly 1.0.

The single-agent floor (SPEC 6, no one agent can bury shared knowledge): while the contradictions a
thought has received all come from one agent, its effective confidence stays at or above
SINGLE_AGENT_FLOOR = 0.5 (it still ranks, at half weight); going lower takes contradictions reported
by at least FLOOR_BREAKING_AGENTS = 2 distinct agents. Votes only demote: replacing a thought is a
correction's work (SPEC 4.5), which supersedes it.

Distinct agents are identities (an agent renamed is still one), only agents still active count
(``quality.services.scoring``), and only reports of the last CORROBORATION_DAYS = 30 days: once an
operator deactivates or deletes an agent its past reports corroborate no one's, and one slip of
another agent months ago, long outweighed, doesn't hand a single agent the power to take a thought
past either bound today.

Its mirror, the single-agent ceiling: while the uses a thought has received all come from one agent,
its effective confidence stays at or below SINGLE_AGENT_CEILING = 1.25 (half the formula's largest
lift); going higher takes uses reported by at least CEILING_BREAKING_AGENTS = 2 distinct agents. One
agent steered by what it read can't lift a thought it favours to 1.5 in every agent's ranking, while
one agent's honest use still counts.
"""

from __future__ import annotations

import math

from brain.ranking import REPORTS_FLOOR

GAMMA = 0.3  # EMA smoothing factor
ALPHA = 0.5  # reward per unit of usage EMA
BETA = 2.0  # penalty per unit of contradiction EMA
SINGLE_AGENT_FLOOR = REPORTS_FLOOR  # lowest effective confidence one agent's contradictions can cause
FLOOR_BREAKING_AGENTS = 2  # distinct contradicting agents it takes to go below the floor
SINGLE_AGENT_CEILING = 1.0 + ALPHA / 2  # highest effective confidence one agent's uses can cause
CEILING_BREAKING_AGENTS = 2  # distinct using agents it takes to go above the ceiling
CORROBORATION_DAYS = 30  # an agent's report counts towards those distinct agents for this long

# Targets of SPEC 4.3 / seeds/004 section 2, with the direction that meets them.
TARGETS: dict[str, tuple[str, float]] = {
    "on_topic_rate": (">=", 0.80),
    "usage_rate": (">=", 0.50),
    "contradiction_rate": ("<=", 0.05),
    "discovery_rate": (">=", 0.70),
}
WINDOW_DAYS = 7  # every metric is reported over a rolling window of this many days
DISCOVERY_DAYS = 14  # a raised contradiction must be superseded within this many days
FALSE_DEMOTION_DAYS = 7  # a demotion undone within this many days was a false demotion
JUDGE_MIN_AGREEMENT = 0.85  # a judge below this on any metric is not trusted for ranking
JUDGE_METRICS = ("on_topic", "used", "contradicted")
# Trust is decided on held-out labelled turns only (never on turns a judge was tuned on), and only
# when there are enough of them for the agreement to mean something: a 95% interval of about
# +-3 points at 85% needs a few hundred items. Items are counted once (a copied item is one item), and
# each metric needs enough items of both answers: on a set where no item is labelled used, a judge that
# never says "used" agrees 100%.
JUDGE_MIN_HELDOUT_ITEMS = 300
JUDGE_MIN_HELDOUT_EACH_ANSWER = 40  # held-out items labelled true, and labelled false, on every metric
JUDGE_TRUST_RULE = "held-out-v2"  # recorded with a validation; records under another rule confer no trust


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for z = 1.96); ``(0.0, 1.0)`` when ``n`` is 0.

    Unlike the normal approximation it stays inside [0, 1] and is honest near 0% and 100%."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def ema(previous: float | None, outcome: float, gamma: float = GAMMA) -> float:
    """One EMA step; ``previous=None`` (no history) starts from 0."""
    return gamma * outcome + (1.0 - gamma) * (previous or 0.0)


def confidence_formula(usage_score: float | None, contradiction_score: float | None) -> float:
    """``max(0, 1 + ALPHA·usage − BETA·contradiction)``: 1.0 for a thought with no history."""
    return max(0.0, 1.0 + ALPHA * (usage_score or 0.0) - BETA * (contradiction_score or 0.0))


def effective_confidence(
    usage_score: float | None, contradiction_score: float | None, contradicting_agents: int, using_agents: int
) -> float:
    """The ranking multiplier: :func:`confidence_formula`, kept at SINGLE_AGENT_FLOOR or above while
    fewer than FLOOR_BREAKING_AGENTS distinct agents (still active) ever reported the thought contradicted,
    and at SINGLE_AGENT_CEILING or below while fewer than CEILING_BREAKING_AGENTS ever reported it used."""
    value = confidence_formula(usage_score, contradiction_score)
    if contradicting_agents < FLOOR_BREAKING_AGENTS:
        value = max(value, SINGLE_AGENT_FLOOR)
    if using_agents < CEILING_BREAKING_AGENTS:
        value = min(value, SINGLE_AGENT_CEILING)
    return value


def rate(numerator: int, denominator: int) -> float | None:
    """A ratio, or None when there is nothing to measure (never a misleading 0%)."""
    return numerator / denominator if denominator else None


def meets_target(metric: str, value: float | None) -> bool | None:
    if value is None or metric not in TARGETS:
        return None
    comparison, target = TARGETS[metric]
    return value >= target if comparison == ">=" else value <= target
