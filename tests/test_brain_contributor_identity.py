"""The contributor others see is the token's agent, by its registered name (SPEC 6).

``agent_id``/``agent_name`` in the body are kept only as metadata: an agent can't present itself as
another on sources, thought details, lineage or markers.
"""

from __future__ import annotations

import pytest

from brain.models import Thought

pytestmark = pytest.mark.django_db

LONG = "The billing pipeline retries failed webhook deliveries three times with exponential backoff."


def test_body_agent_name_and_id_do_not_decide_the_contributor(agent_factory, fake_embedder):
    mallory = agent_factory("dev", name="mallory")
    reader = agent_factory("qa", name="reader")
    response = mallory.post(
        "/api/v1/memory", {"prompt": LONG, "agent_id": "alice-id", "agent_name": "Alice (lead)"}, format="json"
    )
    assert response.status_code == 200, response.content
    thought_id = response.json()["trace"]["thought_id"]
    thought = Thought.objects.get(id=thought_id)
    assert (thought.contributor_id, thought.contributor_name, thought.agent.name) == ("mallory", "mallory", "mallory")
    assert thought.context_metadata["claimed_agent_id"] == "alice-id"
    assert thought.context_metadata["claimed_agent_name"] == "Alice (lead)"

    # What another agent sees: the source, the thought detail, the lineage.
    found = reader.post("/api/v1/memory", {"prompt": "billing webhook retries backoff?"}, format="json").json()
    source = next(s for s in found["result"]["sources"] if s["thought_id"] == thought_id)
    assert source["contributor"] == "mallory"
    detail = reader.get(f"/api/v1/thoughts/{thought_id}").json()
    assert detail["contributor_name"] == "mallory"
    lineage = reader.get(f"/api/v1/thoughts/{thought_id}/lineage").json()
    assert "Alice" not in str(lineage)


def test_refinement_and_correction_carry_the_token_name(agent_factory, fake_embedder, thought_factory):
    original = thought_factory(LONG)
    bob = agent_factory("dev", name="bob")
    refined = bob.post(
        "/api/v1/memory",
        {"prompt": "Update: retries are now five with jitter.", "refines": str(original.id), "agent_name": "alice"},
        format="json",
    ).json()
    assert Thought.objects.get(id=refined["trace"]["thought_id"]).contributor_name == "bob"

    corrected = bob.post(
        "/api/v1/memory",
        {
            "prompt": "Correction: the billing retries are five, not three.",
            "thought_category": "correction",
            "topic": "billing",
            "corrected_fact": "three retries",
            "correct_fact": "five retries",
            "supersedes": [refined["trace"]["thought_id"]],
            "agent_id": "alice",
            "agent_name": "alice",
        },
        format="json",
    )
    assert corrected.status_code == 200, corrected.content
    correction = Thought.objects.get(id=corrected.json()["trace"]["thought_id"])
    assert (correction.contributor_id, correction.contributor_name) == ("bob", "bob")


def test_task_marker_contributor_is_the_token_agent(agent_factory, space):
    from tests.tasks_helpers import make_project, make_task, query_brain

    make_task(make_project(space, slug="colony"), slug="t", status="ready", role="dev", dna={"pdsa_ref": "d.md"})
    dev = agent_factory("dev", name="dev-real")
    session = query_brain(dev.agent)
    assert dev.patch("/api/v1/tasks/t/dna", {"memory_query_session": session}, format="json").status_code == 200
    response = dev.post(
        "/api/v1/tasks/t/transition",
        {"to": "active", "summary": "claiming", "agent_name": "alice", "agent_id": "alice"},
        format="json",
    )
    assert response.status_code == 200, response.content
    marker = Thought.objects.get(pk=response.json()["transition"]["marker_id"])
    assert (marker.contributor_name, marker.agent.name) == ("dev-real", "dev-real")
