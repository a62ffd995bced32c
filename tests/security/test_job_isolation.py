"""One bad row or one space never stops a periodic job for the others (SPEC 6): counters saturate
at ``COUNTER_MAX`` instead of overflowing, and the reinforcement fold, the decay and the query-log
expiry run space by space, each failure logged with its space and the other spaces done."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.db import DataError
from django.utils import timezone

from brain import jobs
from brain.models import QueryLog, Thought
from brain.services import pheromones
from brain.services.pheromones import COUNTER_MAX, retrieval_log

pytestmark = pytest.mark.django_db
INT32_MAX = 2**31 - 1


@pytest.fixture
def two_spaces(agent_factory, other_space, thought_factory):
    """(agent, thought) in each space: ``poisoned`` in the default space, ``healthy`` in the other."""
    poisoned_agent = agent_factory("dev").agent
    healthy_agent = agent_factory("dev", in_space=other_space).agent
    poisoned = thought_factory("poisoned counters")
    partner = thought_factory("its partner")
    healthy = thought_factory("healthy note", in_space=other_space)
    return (poisoned_agent, poisoned, partner), (healthy_agent, healthy)


def accessed(agent, *thoughts) -> None:
    """A memory call's query-log row naming ``thoughts``, not counted yet."""
    results = [{"id": str(t.pk), "score": 0.5} for t in thoughts]
    retrieval_log(space=agent.space, agent=agent, agent_ref=agent.name, session_id="s", query_text="q", results=results)


def test_a_counter_at_int32_max_does_not_stop_reinforcement_in_any_space(two_spaces):
    (agent, poisoned, partner), (healthy_agent, healthy) = two_spaces
    Thought.objects.filter(pk=poisoned.pk).update(
        access_count=INT32_MAX, co_retrieved_with={str(partner.pk): INT32_MAX}
    )
    accessed(agent, poisoned, partner)
    accessed(healthy_agent, healthy)

    assert jobs.reinforcement_fold() == 2  # the worker's minute job

    healthy.refresh_from_db()
    assert healthy.access_count == 1 and healthy.accessed_by == [str(healthy_agent.pk)]
    poisoned.refresh_from_db()
    assert poisoned.access_count == COUNTER_MAX  # saturated, not overflowed
    assert poisoned.co_retrieved_with == {str(partner.pk): COUNTER_MAX}
    assert not QueryLog.objects.filter(reinforced=False).exists()


def test_a_row_the_fold_cannot_read_stops_only_its_own_space(two_spaces, caplog):
    (agent, poisoned, partner), (healthy_agent, healthy) = two_spaces
    Thought.objects.filter(pk=poisoned.pk).update(co_retrieved_with={str(partner.pk): "not a count"})
    accessed(agent, poisoned, partner)
    accessed(healthy_agent, healthy)

    with caplog.at_level(logging.ERROR, logger="colony.brain.pheromones"):
        assert jobs.reinforcement_fold() == 1

    healthy.refresh_from_db()
    assert healthy.access_count == 1
    poisoned.refresh_from_db()
    assert poisoned.access_count == 0  # its space's batch rolled back, nothing half-done
    assert QueryLog.objects.filter(space=agent.space, reinforced=False).count() == 1  # kept for a later fold
    failure = next(r for r in caplog.records if r.levelno == logging.ERROR)
    assert agent.space.slug in failure.getMessage() and failure.exc_info is not None


def test_the_fold_after_a_response_survives_a_poisoned_space(two_spaces, caplog, settings, monkeypatch):
    (agent, poisoned, partner), (healthy_agent, healthy) = two_spaces
    settings.REINFORCEMENT_FOLD_SECONDS = 0
    Thought.objects.filter(pk=poisoned.pk).update(co_retrieved_with={str(partner.pk): "not a count"})
    accessed(agent, poisoned, partner)
    accessed(healthy_agent, healthy)
    with caplog.at_level(logging.ERROR, logger="colony.brain.pheromones"):
        pheromones.reinforcement_fold_due()
    healthy.refresh_from_db()
    assert healthy.access_count == 1


def test_one_spaces_failing_decay_does_not_stop_the_others(two_spaces, monkeypatch, caplog):
    (agent, poisoned, _), (_, healthy) = two_spaces
    old = timezone.now() - dt.timedelta(days=2)
    Thought.objects.update(created_at=old, pheromone_weight=2.0)
    original = pheromones._decay_space

    def failing(*, space, **kwargs):
        if space.pk == agent.space.pk:
            raise DataError("a row this space's update can't take")
        return original(space=space, **kwargs)

    monkeypatch.setattr(pheromones, "_decay_space", failing)
    with caplog.at_level(logging.ERROR, logger="colony.brain.pheromones"):
        assert jobs.pheromone_decay() == 1

    healthy.refresh_from_db()
    assert healthy.pheromone_weight == pytest.approx(2.0 * pheromones.DECAY_FACTOR)
    poisoned.refresh_from_db()
    assert poisoned.pheromone_weight == 2.0
    assert any(agent.space.slug in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_one_spaces_failing_expiry_does_not_stop_the_others(two_spaces, monkeypatch, caplog, settings):
    (agent, _, _), (healthy_agent, _) = two_spaces
    settings.QUERY_LOG_RETENTION_DAYS = 1
    for who in (agent, healthy_agent):
        QueryLog.objects.create(
            space=who.space, agent=who, session_id="old", query_text="old", results=[], reinforced=True
        )
    QueryLog.objects.update(created_at=timezone.now() - dt.timedelta(days=5))
    original = pheromones._expire_space

    def failing(*, space, params):
        if space.pk == agent.space.pk:
            raise DataError("a row this space's delete can't take")
        return original(space=space, params=params)

    monkeypatch.setattr(pheromones, "_expire_space", failing)
    with caplog.at_level(logging.ERROR, logger="colony.brain.pheromones"):
        assert jobs.query_logs_expire() == 1

    assert list(QueryLog.objects.values_list("space_id", flat=True)) == [agent.space.pk]
    assert any(agent.space.slug in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
