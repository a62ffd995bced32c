"""A real Celery worker embeds a thought that was stored without a vector (SPEC 2.3)."""

from __future__ import annotations

import time

import pytest

from brain import jobs
from brain.models import Thought
from brain.services.pipeline import thought_schedule_followups
from brain.services.thoughts import thought_create
from config.celery import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_is_current(start_worker):
    """The real on-commit path (``jobs.embed_thought.delay``) sends through Celery's current app:
    for this test that is the worker's client app instead of the unit tests' eager app."""
    worker = start_worker(broker="redis")
    worker.app.set_current()
    yield worker
    celery_app.set_current()


def test_worker_embeds_a_thought_enqueued_on_commit(worker_is_current, space):
    worker = worker_is_current
    assert jobs.embed_thought.app is worker.app

    thought = thought_create(
        space=space,
        content="Transition marker: task deploy-v2 moved from review to done by qa-1.",
        contributor_id="system",
        contributor_name="Colony",
        thought_category="transition_marker",
    )
    thought_schedule_followups(thought=thought)
    assert Thought.objects.get(pk=thought.pk).embedding is None  # committed without a vector

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stored = Thought.objects.get(pk=thought.pk)
        if stored.embedding is not None:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"The worker did not embed the thought in 120 s:\n{worker.output()[-3000:]}")
    assert len(stored.embedding) == 384 and stored.embedding_model == "all-MiniLM-L6-v2 int8"
    assert "brain.jobs.embed_thought" in worker.output()
