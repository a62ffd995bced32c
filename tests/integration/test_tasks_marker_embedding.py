"""A transition's brain marker is embedded by a real Celery worker after the transaction commits."""

from __future__ import annotations

import time

import pytest
from django.contrib.postgres.search import SearchQuery

from brain import jobs
from brain.models import Thought
from config.celery import app as celery_app
from tests.tasks_helpers import make_project, make_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def not_eager():
    # Unit tests run jobs inline (tests/conftest.py); here the real worker must run them.
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = True


def test_transition_marker_is_embedded_by_the_worker_after_commit(
    start_worker, not_eager, agent_factory, space, monkeypatch
):
    worker = start_worker(broker="redis")
    queue = worker.app.conf.task_default_queue
    # The app's real job, sent to this test's worker queue.
    monkeypatch.setattr(
        jobs.embed_thought, "delay", lambda *args, **kwargs: jobs.embed_thought.apply_async(args, kwargs, queue=queue)
    )
    make_task(make_project(space, "colony"), slug="parser-cache", status="backlog")
    liaison = agent_factory("liaison")

    response = liaison.post(
        "/api/v1/tasks/parser-cache/transition",
        {"to": "pending", "summary": "parser cache work scheduled"},
        format="json",
    )
    assert response.status_code == 200, response.content
    marker_id = response.json()["transition"]["marker_id"]
    # Full-text search finds the marker whether or not its vector exists yet.
    assert Thought.objects.filter(pk=marker_id, search_vector=SearchQuery("parser cache")).exists()

    deadline = time.monotonic() + 120
    marker = Thought.objects.get(pk=marker_id)
    while marker.embedding is None and time.monotonic() < deadline:
        time.sleep(0.5)
        marker = Thought.objects.get(pk=marker_id)
    assert marker.embedding is not None, worker.output()[-3000:]
    assert len(marker.embedding) == 384
    assert "brain.jobs.embed_thought" in worker.output()
