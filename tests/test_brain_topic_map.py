"""Map, not breadcrumbs (seeds/000 3c): fragments of a topic without a state snapshot get a ready
consolidates call in the guidance, through REST and MCP alike."""

from __future__ import annotations

import json

import pytest

from brain.models import Thought

pytestmark = pytest.mark.django_db

FRAGMENTS = [
    "Gruendung: the EPU path was selected for the company founding after comparing it with a GmbH.",
    "Gruendung: the Befaehigungspruefung route was chosen over Vorpraxis because of the small-company rule.",
    "Gruendung: the Kurzkonzept is ready and the Finanzplan is drafted; the AMS submission is next.",
]


def contribute(client, prompt: str, **fields) -> dict:
    response = client.post("/api/v1/memory", {"prompt": prompt, **fields}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def suggested_call(guidance: str) -> dict:
    return json.loads(guidance[guidance.index("{") :].splitlines()[0])


def test_fragments_without_snapshot_get_a_ready_consolidation(dev, fake_embedder):
    ids = [contribute(dev, text, topic="gruendung")["trace"]["thought_id"] for text in FRAGMENTS]
    search = contribute(dev, "gruendung state", filter_topic="gruendung", contribute=False)
    guidance = search["result"]["guidance"]
    assert "Topic 'gruendung' is 3 fragments and no current state snapshot" in guidance
    call = suggested_call(guidance[guidance.index("Topic 'gruendung'") :])
    assert set(call["consolidates"]) == set(ids)
    assert call["thought_category"] == "state_snapshot" and call["topic"] == "gruendung"
    # The offered call works once the agent fills in its text and source.
    call["prompt"] = (
        "Gruendung state today: the EPU path was selected for the company founding, the Befaehigungspruefung "
        "route was chosen over Vorpraxis, the Kurzkonzept is ready and the Finanzplan is drafted; the AMS "
        "submission is next."
    )
    call["source_ref"] = {"type": "task", "value": "gruendung-recovery"}
    snapshot = contribute(dev, **call)["trace"]["thought_id"]
    assert snapshot and all(t.superseded for t in Thought.objects.filter(id__in=ids))
    again = contribute(dev, "gruendung state", filter_topic="gruendung", contribute=False)
    assert "fragments and no current state snapshot" not in (again["result"]["guidance"] or "")


def test_no_hint_below_three_fragments_or_without_topic_filter(dev, fake_embedder):
    for text in FRAGMENTS[:2]:
        contribute(dev, text, topic="gruendung")
    two = contribute(dev, "gruendung state", filter_topic="gruendung", contribute=False)
    assert "no current state snapshot" not in (two["result"]["guidance"] or "")
    contribute(dev, FRAGMENTS[2], topic="gruendung")
    unfiltered = contribute(dev, "gruendung state", contribute=False)
    assert "no current state snapshot" not in (unfiltered["result"]["guidance"] or "")
