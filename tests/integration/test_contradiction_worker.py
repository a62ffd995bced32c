"""A real worker process runs contradiction detection with the offline judge and the real model."""

from __future__ import annotations

import pytest

from brain import embedding
from brain.models import CorrectionSuggestion
from brain.services.thoughts import thought_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_worker_turns_a_contradiction_into_a_pending_suggestion(start_worker, space, dev):
    def store(content, agent=None):
        return thought_create(
            space=space,
            content=content,
            contributor_id="w",
            contributor_name="w",
            agent=agent,
            topic="infra",
            embedding=embedding.embed(content),
        )

    old = store("The deploy uses Postgres 15")
    store("The office coffee machine is broken again")
    new = store("The deploy does not use Postgres 15", agent=dev.agent)

    worker = start_worker(broker="redis")
    assert worker.send("brain.jobs.detect_contradictions", str(new.id)).get(timeout=120) == 1
    suggestion = CorrectionSuggestion.objects.get()
    assert (suggestion.thought_id, suggestion.contradicting_thought_id) == (old.id, new.id)
    assert suggestion.agent_id == dev.agent.id and suggestion.status == "pending"
