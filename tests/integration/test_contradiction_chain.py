"""A real worker embeds a thought stored without a vector, THEN checks it for contradictions (a chain).

Without the chain the check would start before the vector exists and wait for Celery retries
(10 s back-off and more); chained, it runs as soon as the embedding job has stored the vector.
"""

from __future__ import annotations

import re
import time

import pytest

from brain import embedding, jobs
from brain.models import CorrectionSuggestion, Thought
from brain.services.pipeline import thought_schedule_followups
from brain.services.thoughts import thought_create
from config.celery import app as celery_app

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_is_current(start_worker):
    """On-commit enqueueing sends through Celery's current app: here the worker's client app."""
    worker = start_worker(broker="redis")
    worker.app.set_current()
    yield worker
    celery_app.set_current()


def test_unembedded_thought_is_embedded_then_checked_and_raises_a_suggestion(worker_is_current, space, dev):
    worker = worker_is_current
    assert jobs.detect_contradictions.app is worker.app
    old = thought_create(
        space=space,
        content="The deploy uses Postgres 15",
        contributor_id="liaison-1",
        contributor_name="liaison-1",
        topic="infra",
        embedding=embedding.embed("The deploy uses Postgres 15"),
    )
    new = thought_create(
        space=space,
        content="The deploy does not use Postgres 15",
        contributor_id=dev.agent.name,
        contributor_name=dev.agent.name,
        agent=dev.agent,
        topic="infra",
    )
    thought_schedule_followups(thought=new, detect_contradictions=True)
    assert Thought.objects.get(pk=new.pk).embedding is None  # committed without a vector

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        suggestion = CorrectionSuggestion.objects.filter(thought=old).first()
        if suggestion is not None:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"No suggestion within 180 s:\n{worker.output()[-4000:]}")

    assert (suggestion.contradicting_thought_id, suggestion.agent_id) == (new.id, dev.agent.id)
    assert suggestion.status == "pending" and suggestion.draft["supersedes"] == [str(old.id)]
    assert Thought.objects.get(pk=new.pk).embedding is not None
    log = worker.output()
    embedded = re.search(r"Task brain\.jobs\.embed_thought\[[^\]]+\] succeeded", log)
    checked = re.search(r"Task brain\.jobs\.detect_contradictions\[[^\]]+\] received", log)
    assert embedded and checked and embedded.start() < checked.start(), log[-4000:]
    assert "Retry in" not in log  # the check never ran before the vector existed
