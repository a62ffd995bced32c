"""Idempotency keys are per agent (SPEC 6): one agent's ``Idempotency-Key`` never replays another
agent's answer, on the memory call and on the import alike."""

from __future__ import annotations

import json

import pytest

from brain.models import ImportReceipt, Thought

pytestmark = pytest.mark.django_db

MEMORY_URL = "/api/v1/memory"
IMPORT_URL = "/api/v1/thoughts/import"


def post(client, url, body, key):
    return client.post(url, data=json.dumps(body), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def test_memory_key_of_another_agent_does_not_replay_its_answer(dev, agent_factory, space, fake_embedder):
    other = agent_factory("dev", name="dev-2")
    note = {"prompt": "Deploys run the database migrations before the web workers restart, never after."}
    first = post(dev, MEMORY_URL, note, "shared-key")
    assert first.status_code == 200, first.json()
    theirs = post(other, MEMORY_URL, note, "shared-key")
    assert theirs.status_code == 200, theirs.json()
    assert theirs.get("Idempotent-Replayed") is None
    # Its own answer, not a replay of the first agent's: the same text is one fact, already known to the brain.
    assert theirs.json()["trace"]["already_known"] is True and first.json()["trace"]["already_known"] is False
    assert theirs.json()["trace"]["session_id"] != first.json()["trace"]["session_id"]
    assert Thought.objects.get(id=theirs.json()["trace"]["thought_id"]).agent_id == dev.agent.id
    assert ImportReceipt.objects.filter(space=space, key="shared-key").count() == 2
    # Each agent's own retry still replays its own answer.
    again = post(other, MEMORY_URL, note, "shared-key")
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == theirs.json()


def test_import_key_of_another_agent_does_not_replay_its_answer(dev, agent_factory, space, fake_embedder):
    other = agent_factory("dev", name="dev-2")
    batch = [{"content": "Deploys run migrations first."}]
    first = post(dev, IMPORT_URL, batch, "batch-1")
    assert first.status_code == 201, first.json()
    theirs = post(other, IMPORT_URL, batch, "batch-1")
    assert theirs.status_code == 201, theirs.json()
    assert theirs.get("Idempotent-Replayed") is None
    assert theirs.json()["ids"] != first.json()["ids"]
    assert Thought.objects.filter(space=space).count() == 2


def test_another_agents_key_with_another_request_is_not_a_conflict(dev, agent_factory, space, fake_embedder):
    """A key names one request of one agent: another agent's request with it runs, not a 409."""
    other = agent_factory("dev", name="dev-2")
    assert post(dev, IMPORT_URL, [{"content": "One note."}], "k").status_code == 201
    response = post(other, IMPORT_URL, [{"content": "Another note."}], "k")
    assert response.status_code == 201, response.json()
