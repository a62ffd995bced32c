"""manage.py brain export / import: Colony's own format round-trips; Mem0 and seed-brain dumps load."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services.corrections import thought_correct
from brain.services.lineage import lineage_supersede
from brain.services.thoughts import thought_link_related
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


def export_rows(path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["kind"] == "header"
    rows[0].pop("exported_at")
    return rows


@pytest.fixture
def rich_space(space, dev, thought_factory, fake_embedder):
    """A space with lineage, categories, flags, a correction, links, pheromones, query log, suggestion."""
    agent = dev.agent
    a = thought_factory(
        "Deploys run migrations after restarting workers.", agent=agent, topic="deploy", tags=["ops", "deploy"]
    )
    b = thought_factory(
        "Deploys run migrations before restarting workers, then warm caches.",
        thought_type="refinement",
        source_ids=[a.id],
        thought_category="operational_learning",
        topic="deploy",
        quality_flags=["near_duplicate"],
        context_metadata={"session": "s1"},
    )
    lineage_supersede(thought=b, source_ids=[a.id])
    snap = thought_factory(
        "Deploy state: green.",
        thought_category="state_snapshot",
        topic="deploy",
        temporal_scope=timezone.localdate(),
        source_ref={"type": "task", "value": "t1", "project": "colony"},
        quality_flags=["stale"],
    )
    wrong = thought_factory("The coach is Thomas.", topic="coach")
    correction, _ = thought_correct(
        space=space,
        agent=agent,
        content="CORRECTION: the coach is Gerhard.",
        topic="coach",
        corrected_fact="The coach is Thomas.",
        correct_fact="The coach is Gerhard.",
        supersedes=[wrong.id],
    )
    thought_link_related(thought=snap, related_ids=[b.id, correction.id])
    Thought.objects.filter(pk=b.pk).update(
        pheromone_weight=2.35,
        access_count=4,
        accessed_by=["dev-1", "qa-1"],
        last_accessed=timezone.now(),
        co_retrieved_with={str(snap.id): 3},
        usage_score=0.4,
        contradiction_score=0.1,
        effective_confidence=1.0,
    )
    QueryLog.objects.create(
        space=space, agent=agent, agent_ref="dev-1", session_id="s1", query_text="how do deploys work?",
        results=[{"id": str(b.id), "score": 0.8}], stored_thought=b,
    )  # fmt: skip
    CorrectionSuggestion.objects.create(
        space=space, thought=snap, statement="Deploy is red.", origin="quality_judge", confidence=0.7,
        agent=agent, session_id="s1", draft={"prompt": "x"},
    )  # fmt: skip
    return space


def test_colony_export_round_trip_loses_nothing(rich_space, tmp_path):
    first = tmp_path / "first.jsonl"
    call_command("brain", "export", str(first), "--no-progress")
    before = export_rows(first)
    assert before[0]["counts"] == {"thoughts": 5, "query_logs": 1, "correction_suggestions": 1}

    CorrectionSuggestion.objects.filter(space=rich_space).delete()
    QueryLog.objects.filter(space=rich_space).delete()
    Thought.objects.filter(space=rich_space).delete()

    call_command("brain", "import", str(first), "--no-progress", "--batch-size", "2")  # links across batches
    second = tmp_path / "second.jsonl"
    call_command("brain", "export", str(second), "--no-progress")
    after = export_rows(second)
    assert after == before
    # spot checks of what matters most
    by_content = {r["content"]: r for r in after if r["kind"] == "thought"}
    original = by_content["Deploys run migrations after restarting workers."]
    assert original["superseded"] and original["refined_by"] and original["agent"] == "dev-1"
    assert by_content["The coach is Thomas."]["superseded_by"] == by_content["CORRECTION: the coach is Gerhard."]["id"]
    assert len(by_content["Deploy state: green."]["related_thoughts"]) == 2
    assert len(original["embedding"]) == 384


def test_export_without_embeddings_reimports_by_embedding(rich_space, tmp_path, fake_embedder):
    path = tmp_path / "bare.jsonl"
    call_command("brain", "export", str(path), "--no-progress", "--no-embeddings")
    assert all(r.get("embedding") is None for r in export_rows(path) if r["kind"] == "thought")
    Thought.objects.filter(space=rich_space).delete()
    fake_embedder.clear()
    call_command("brain", "import", str(path), "--no-progress")
    assert Thought.objects.filter(space=rich_space, embedding__isnull=True).count() == 0
    assert len(fake_embedder) == 6  # 5 contents + the correction's corrected fact, in one batch


def test_mem0_get_all_dump(space, tmp_path, fake_embedder):
    mid = str(uuid.uuid4())
    dump = {
        "results": [
            {
                "id": mid,
                "memory": "Likes tea",
                "hash": "abc",
                "metadata": {"tags": ["prefs"]},
                "created_at": "2025-03-01T10:00:00-08:00",
                "updated_at": None,
                "user_id": "alice",
            },
            {"id": "not-a-uuid", "memory": "Works on the deploy pipeline at night.", "agent_id": "bot"},
        ]
    }
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(dump))
    call_command("brain", "import", str(path), "--no-progress")
    tea = Thought.objects.get(pk=mid)
    assert tea.content == "Likes tea" and tea.tags == ["prefs"] and tea.contributor_name == "alice"
    assert tea.created_at.isoformat() == "2025-03-01T18:00:00+00:00"
    assert tea.context_metadata["mem0"]["hash"] == "abc"
    other = Thought.objects.get(contributor_id="bot")
    assert other.context_metadata["mem0"]["id"] == "not-a-uuid" and other.embedding is not None


def test_seed_brain_points_and_query_log(space, tmp_path, fake_embedder):
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    payload = {
        "contributor_id": "pdsa-1",
        "contributor_name": "PDSA Agent",
        "context_metadata": "from session 7",
        "created_at": "2026-02-25T10:00:00.000Z",
        "thought_type": "original",
        "source_ids": [],
        "tags": ["brain"],
        "access_count": 3,
        "last_accessed": "2026-02-26T10:00:00.000Z",
        "accessed_by": ["pdsa-1", "dev-1"],
        "access_log": [{"user_id": "dev-1", "timestamp": "2026-02-26T10:00:00Z", "session_id": "s"}],
        "co_retrieved_with": [{"thought_id": b, "count": 2}],
        "pheromone_weight": 1.15,
        "knowledge_space_id": "ks-default",
    }
    points = {
        "result": {
            "points": [
                {"id": a, "vector": fake_vector("status monitoring"), "payload": {**payload, "content": "Status."}},
                {
                    "id": b,
                    "vector": fake_vector("status and role monitoring"),
                    "payload": {
                        **payload,
                        "content": "Status and role monitoring is needed.",
                        "thought_type": "refinement",
                        "source_ids": [a],
                        "created_at": "2026-02-26T09:00:00.000Z",
                        "co_retrieved_with": [],
                    },
                },
            ]
        }
    }
    path = tmp_path / "points.json"
    path.write_text(json.dumps(points))
    db = tmp_path / "thought-tracing.db"
    connection = sqlite3.connect(db)
    connection.execute(
        "CREATE TABLE query_log (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, query_text TEXT NOT NULL, "
        "context_text TEXT, query_vector BLOB, returned_ids TEXT NOT NULL DEFAULT '[]', session_id TEXT NOT NULL, "
        "timestamp TEXT NOT NULL, result_count INTEGER NOT NULL DEFAULT 0, knowledge_space_id TEXT)"
    )
    connection.execute(
        "INSERT INTO query_log VALUES ('q1', 'dev-1', 'status monitoring?', NULL, NULL, ?, 's9', "
        "'2026-02-26 10:00:00', 2, 'ks-default')",
        (json.dumps([a, b]),),
    )
    connection.commit()
    connection.close()

    call_command("brain", "import", str(path), "--query-log", str(db), "--no-progress")
    first, refinement = Thought.objects.get(pk=a), Thought.objects.get(pk=b)
    assert first.superseded and first.refined_by_id == refinement.id  # derived, as the seed computed it
    assert first.co_retrieved_with == {b: 2} and first.pheromone_weight == 1.15 and first.access_count == 3
    assert first.context_metadata["text"] == "from session 7"
    assert first.context_metadata["seed"]["knowledge_space_id"] == "ks-default"
    assert first.embedding is not None and fake_embedder == []  # the dump's vectors are kept
    log = QueryLog.objects.get(space=space)
    assert log.agent_ref == "dev-1" and log.session_id == "s9"
    assert [r["id"] for r in log.results] == [a, b]
    assert log.created_at.isoformat() == "2026-02-26T10:00:00+00:00"


def test_a_bad_item_stops_with_the_line_named(space, tmp_path, fake_embedder):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"content": "good"}, {"content": "x", "thought_type": "weird"}]))
    with pytest.raises(CommandError, match="item 2 thought_type"):
        call_command("brain", "import", str(path), "--format", "colony", "--no-progress")
    assert not Thought.objects.filter(space=space).exists()
