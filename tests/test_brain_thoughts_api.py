"""GET /api/v1/thoughts/{id}: every field of SPEC 2.1, and 404 for anything not in the caller's space."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from brain.models import Thought

pytestmark = pytest.mark.django_db


def test_every_field(dev, thought_factory):
    other = thought_factory("A related thought.")
    correction = thought_factory("The correction.", thought_category="correction")
    thought = thought_factory(
        "The thought.",
        thought_category="state_snapshot",
        topic="launch",
        temporal_scope=date(2026, 2, 1),
        source_ref={"type": "task", "value": "launch-plan"},
        tags=["launch"],
        quality_flags=["stale"],
        related_thoughts=[other.id],
    )
    Thought.objects.filter(pk=thought.pk).update(superseded=True, superseded_by=correction, usage_score=0.4)
    Thought.objects.filter(pk=correction.pk).update(supersedes=[thought.id], correct_fact="Right.")
    body = dev.get(f"/api/v1/thoughts/{thought.id}").json()
    expected = {
        "id", "space", "content", "context_metadata", "agent", "contributor_id", "contributor_name", "created_at",
        "thought_type", "source_ids", "refined_by", "tags", "thought_category", "topic", "temporal_scope",
        "source_ref", "alternatives_considered", "corrected_fact", "correct_fact", "supersedes", "related_thoughts",
        "quality_flags", "superseded", "superseded_at", "superseded_by", "contradicted_by", "embedding_model",
        "has_embedding", "pheromone_weight", "access_count", "last_accessed", "accessed_by", "co_retrieved_with",
        "usage_score", "contradiction_score", "effective_confidence", "corrected_by", "corrects",
        "related_thoughts_count", "corrected_by_count",
    }  # fmt: skip
    assert set(body) == expected
    assert body["id"] == str(thought.id) and body["space"] == "default"
    assert body["related_thoughts"] == [str(other.id)]
    assert dev.get(f"/api/v1/thoughts/{other.id}").json()["related_thoughts"] == [str(thought.id)]  # both ways
    assert [(c["thought_id"], c["correct_fact"]) for c in body["corrected_by"]] == [(str(correction.id), "Right.")]
    assert body["corrects"] == []
    made = dev.get(f"/api/v1/thoughts/{correction.id}").json()
    assert made["corrects"] == [
        {
            "thought_id": str(thought.id),
            "content_preview": "The thought.",
            "superseded": True,
            "superseded_by": str(correction.id),
        }
    ]
    assert made["corrected_by"] == []
    assert body["superseded"] is True and body["superseded_by"] == str(correction.id)
    assert body["temporal_scope"] == "2026-02-01" and body["quality_flags"] == ["stale"]
    assert body["has_embedding"] is True and body["usage_score"] == 0.4 and body["effective_confidence"] == 1.0
    # Looking a thought up is not a retrieval: it does not count as an access.
    assert Thought.objects.get(pk=thought.pk).access_count == 0


def test_pending_embedding_is_visible(dev, thought_factory):
    thought = thought_factory("Marker.", embedding=None)
    assert dev.get(f"/api/v1/thoughts/{thought.id}").json()["has_embedding"] is False


@pytest.mark.parametrize("kind", ["unknown", "malformed", "other-space"])
def test_not_found(dev, thought_factory, other_space, kind):
    thought_id = {
        "unknown": lambda: uuid.uuid4(),
        "malformed": lambda: "12345",
        "other-space": lambda: thought_factory("Theirs.", in_space=other_space).id,
    }[kind]()
    response = dev.get(f"/api/v1/thoughts/{thought_id}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "THOUGHT_NOT_FOUND"


def test_needs_a_token(anon, thought_factory):
    thought = thought_factory("Mine.")
    assert anon.get(f"/api/v1/thoughts/{thought.id}").status_code == 401
    assert anon.get(f"/api/v1/thoughts/{thought.id}/lineage").status_code == 401
