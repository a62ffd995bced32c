"""Transition markers are the audit trail (SPEC 6): no correction, refinement or consolidation
supersedes one, whichever way it comes (memory call, POST /thoughts/{id}/correct, an accepted
correction suggestion, an import); the refusal is retraction's (403 MARKER_NOT_RETRACTABLE)."""

from __future__ import annotations

import pytest

from brain.models import Thought
from brain.services.suggestions import suggestion_create
from tests.security.support import memory

pytestmark = pytest.mark.django_db

MARKER_TEXT = "[transition] T-1 in_progress -> review by dev-1"


@pytest.fixture
def marker(thought_factory):
    return thought_factory(MARKER_TEXT, thought_category="transition_marker", topic="t-1")


def refused_untouched(response, marker, space, before: int) -> None:
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "MARKER_NOT_RETRACTABLE"
    assert "transition marker" in response.json()["error"]["message"].lower()
    marker.refresh_from_db()
    assert (marker.superseded, marker.refined_by_id, marker.superseded_by_id) == (False, None, None)
    assert Thought.objects.filter(space=space).count() == before  # nothing stored


def test_memory_refinement_cannot_supersede_a_transition_marker(dev, space, marker, fake_embedder):
    before = Thought.objects.filter(space=space).count()
    response = memory(dev, prompt="T-1 really went straight to done, skipping review.", refines=str(marker.pk))
    refused_untouched(response, marker, space, before)


def test_memory_consolidation_cannot_supersede_a_transition_marker(dev, space, marker, thought_factory, fake_embedder):
    other = thought_factory("T-1 review notes: the reviewer approved it.")
    before = Thought.objects.filter(space=space).count()
    response = memory(dev, prompt="T-1 merged history of review.", consolidates=[str(marker.pk), str(other.pk)])
    refused_untouched(response, marker, space, before)
    other.refresh_from_db()
    assert not other.superseded


def test_memory_supersedes_cannot_replace_a_transition_marker(dev, space, marker, fake_embedder):
    before = Thought.objects.filter(space=space).count()
    response = memory(
        dev,
        prompt="Snapshot: T-1 is in done now, never was in review.",
        thought_category="state_snapshot",
        topic="t-1",
        temporal_scope="2026-01-01",
        source_ref={"type": "task", "value": "T-1"},
        supersedes=[str(marker.pk)],
    )
    refused_untouched(response, marker, space, before)


def test_memory_correction_cannot_supersede_a_transition_marker(dev, space, marker, fake_embedder):
    before = Thought.objects.filter(space=space).count()
    response = memory(
        dev,
        prompt="CORRECTION: T-1 never went to review.",
        thought_category="correction",
        topic="t-1",
        corrected_fact="T-1 went to review",
        correct_fact="T-1 went straight to done",
        supersedes=[str(marker.pk)],
    )
    refused_untouched(response, marker, space, before)


def test_correct_endpoint_cannot_supersede_a_transition_marker(dev, space, marker, fake_embedder):
    before = Thought.objects.filter(space=space).count()
    response = dev.post(f"/api/v1/thoughts/{marker.pk}/correct", {"correct_fact": "It never moved."}, format="json")
    refused_untouched(response, marker, space, before)


def test_correct_endpoint_cannot_supersede_a_marker_named_as_an_extra(
    dev, space, marker, thought_factory, fake_embedder
):
    wrong = thought_factory("T-1 is owned by qa-1.")
    before = Thought.objects.filter(space=space).count()
    response = dev.post(
        f"/api/v1/thoughts/{wrong.pk}/correct",
        {"correct_fact": "T-1 is owned by dev-1.", "supersedes": [str(marker.pk)]},
        format="json",
    )
    refused_untouched(response, marker, space, before)
    wrong.refresh_from_db()
    assert not wrong.superseded


def test_accepting_a_suggestion_cannot_supersede_a_transition_marker(dev, space, marker, fake_embedder):
    suggestion, _ = suggestion_create(
        thought=marker,
        statement="T-1 never went to review.",
        origin="contradiction_detector",
        confidence=0.9,
        reason="test",
        agent=dev.agent,
    )
    before = Thought.objects.filter(space=space).count()
    response = dev.post(f"/api/v1/corrections/{suggestion.pk}/accept", {}, format="json")
    refused_untouched(response, marker, space, before)
    suggestion.refresh_from_db()
    assert suggestion.status == "pending"


def test_markers_still_refuse_retraction(dev, space, marker):
    before = Thought.objects.filter(space=space).count()
    response = dev.post(f"/api/v1/thoughts/{marker.pk}/retract", {"reason": "gone"}, format="json")
    refused_untouched(response, marker, space, before)
