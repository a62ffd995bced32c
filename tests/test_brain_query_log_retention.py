"""Query-log retention: one row per memory call grew forever; rows older than QUERY_LOG_RETENTION_DAYS
are deleted nightly, but for the sessions open tasks' memory gates still read."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from brain import jobs
from brain.models import QueryLog
from brain.selectors.activity import agent_session_query_times
from brain.services.pheromones import query_logs_expire
from config.celery import PERIODIC_JOBS
from quality.models import TurnLog
from tasks.models import Task
from tasks.selectors import task_memory_sessions_open
from tests.tasks_helpers import make_project, make_task, query_brain

pytestmark = pytest.mark.django_db


def _aged(agent, days: float, session: str | None = None) -> str:
    """A memory call of ``agent`` made ``days`` ago; returns its session id."""
    session = query_brain(agent, session)
    QueryLog.objects.filter(session_id=session).update(created_at=timezone.now() - timedelta(days=days))
    return session


def test_rows_older_than_the_retention_are_deleted_the_rest_kept(agent_factory, settings):
    settings.QUERY_LOG_RETENTION_DAYS = 90
    agent = agent_factory("dev").agent
    old = [_aged(agent, 91 + n) for n in range(3)]
    recent = [_aged(agent, 89), _aged(agent, 1)]
    assert query_logs_expire() == 3
    assert set(QueryLog.objects.values_list("session_id", flat=True)) == set(recent)
    assert not QueryLog.objects.filter(session_id__in=old).exists()
    assert query_logs_expire() == 0  # nothing left to expire


def test_expiry_runs_in_batches_until_none_is_left(agent_factory, settings):
    settings.QUERY_LOG_RETENTION_DAYS = 30
    agent = agent_factory("dev").agent
    for n in range(7):
        _aged(agent, 40 + n)
    assert query_logs_expire(batch_size=2) == 7
    assert not QueryLog.objects.exists()


def test_zero_keeps_every_row(agent_factory, settings):
    settings.QUERY_LOG_RETENTION_DAYS = 0
    _aged(agent_factory("dev").agent, 5000)
    assert query_logs_expire() == 0 and QueryLog.objects.count() == 1


def test_a_session_an_open_task_names_is_kept_until_the_task_closes(agent_factory, space, settings):
    """The memory gate of an open task reads its memory_query_session's rows: deleting them would refuse
    the task's next move ("not a session in which ... queried the brain")."""
    settings.QUERY_LOG_RETENTION_DAYS = 90
    agent = agent_factory("dev").agent
    gated = _aged(agent, 120)
    other = _aged(agent, 120)
    project = make_project(space, "colony")
    task = make_task(project, slug="long-task", status="active", dna={"memory_query_session": gated})
    Task.objects.filter(pk=task.pk).update(status_changed_at=timezone.now() - timedelta(days=121))
    assert (space.pk, gated) in {(space_id, session) for space_id, session, _ in task_memory_sessions_open()}
    assert jobs.query_logs_expire() == 1  # the Celery job keeps the open tasks' sessions (tasks.apps)
    assert agent_session_query_times(space_id=space.pk, agent=agent, session_id=gated)[0]
    assert not QueryLog.objects.filter(session_id=other).exists()
    task.status = "complete"
    task.save(update_fields=["status"])
    assert not task_memory_sessions_open()
    assert jobs.query_logs_expire() == 1


def test_naming_an_old_session_in_an_open_task_does_not_pin_it(agent_factory, space, settings):
    """Attack: any agent may create a task and put any session id in its DNA (the gate checks it only when
    the task moves). Naming another agent's session from 200 days ago in an open task kept that session's
    query-log rows (the other agent's prompts) past QUERY_LOG_RETENTION_DAYS for as long as the task stays
    open: without the rule, forever. Instead: the retention keeps only the rows the task's memory gate can
    accept, those made since the task entered its current state."""
    settings.QUERY_LOG_RETENTION_DAYS = 90
    victim, attacker = agent_factory("dev").agent, agent_factory("qa").agent
    old = _aged(victim, 200)
    make_task(make_project(space, "colony"), slug="pin", status="active", dna={"memory_query_session": old})
    assert attacker  # the task is the attacker's; the session is the victim's
    assert query_logs_expire() == 1
    assert not QueryLog.objects.filter(session_id=old).exists()


def test_a_session_named_in_another_space_does_not_keep_this_spaces_rows(agent_factory, space, other_space, settings):
    settings.QUERY_LOG_RETENTION_DAYS = 90
    agent = agent_factory("dev").agent
    session = _aged(agent, 100)
    make_task(make_project(other_space, "elsewhere"), slug="t", status="active", dna={"memory_query_session": session})
    assert query_logs_expire() == 1


def test_a_turn_log_keeps_its_items_and_loses_the_link(agent_factory, settings):
    settings.QUERY_LOG_RETENTION_DAYS = 90
    agent = agent_factory("dev").agent
    session = _aged(agent, 100)
    turn = TurnLog.objects.create(
        space=agent.space,
        agent=agent,
        agent_name=agent.name,
        session_id=session,
        turn_id="t1",
        injected_from="explicit",
        query_log=QueryLog.objects.get(session_id=session),
    )
    assert query_logs_expire() == 1
    turn.refresh_from_db()
    assert turn.query_log is None


def test_the_nightly_job_is_scheduled_and_the_cli_runs_it(agent_factory, settings):
    assert PERIODIC_JOBS["query-logs-expire"]["task"] == "brain.jobs.query_logs_expire"
    settings.QUERY_LOG_RETENTION_DAYS = 90
    _aged(agent_factory("dev").agent, 100)
    out = StringIO()
    call_command("brain", "expire", stdout=out)
    assert out.getvalue().strip() == "Deleted 1 query-log row(s) older than 90 days."
    settings.QUERY_LOG_RETENTION_DAYS = 0
    out = StringIO()
    call_command("brain", "expire", stdout=out)
    assert "kept forever" in out.getvalue()
