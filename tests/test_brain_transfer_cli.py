"""manage.py brain export / import: Colony's own format round-trips; Mem0 and seed-brain dumps load."""

from __future__ import annotations

import io
import json
import sqlite3
import uuid

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services.corrections import thought_correct
from brain.services.lineage import lineage_supersede
from brain.services.thoughts import thought_link_related
from core.services import agent_create
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


#: The seed brain's SQLite query_log table, as its dumps hold it.
SEED_QUERY_LOG_TABLE = (
    "CREATE TABLE query_log (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, query_text TEXT NOT NULL, "
    "context_text TEXT, query_vector BLOB, returned_ids TEXT NOT NULL DEFAULT '[]', session_id TEXT NOT NULL, "
    "timestamp TEXT NOT NULL, result_count INTEGER NOT NULL DEFAULT 0, knowledge_space_id TEXT)"
)


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


def test_a_backup_naming_a_thought_deleted_since_restores_without_that_id(rich_space, tmp_path, capsys):
    """The admin can delete a thought a refinement names in ``source_ids``; the id stays in the array. The
    backup of that space restores: the id is left out of the array and reported, not refused (a backup an
    operator would have to edit by hand to restore is no backup). An id of no thought in a seed dump is
    refused (tests/security/test_backup_round_trip.py)."""
    refinement = Thought.objects.get(space=rich_space, thought_type="refinement")
    (source,) = refinement.source_ids
    Thought.objects.filter(pk=source).delete()
    path = tmp_path / "backup.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    Thought.objects.filter(space=rich_space).delete()
    CorrectionSuggestion.objects.filter(space=rich_space).delete()
    QueryLog.objects.filter(space=rich_space).delete()

    call_command("brain", "import", str(path), "--no-progress")

    assert Thought.objects.filter(space=rich_space).count() == 4
    assert Thought.objects.get(pk=refinement.pk).source_ids == []
    assert f"Reference left out: {refinement.pk} source_ids -> {source}: no such thought" in capsys.readouterr().err


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
    connection.execute(SEED_QUERY_LOG_TABLE)
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


def test_items_with_the_same_id_in_different_batches_stop_the_import_before_any_batch(space, tmp_path, fake_embedder):
    same = str(uuid.uuid4())
    items = [{"content": f"note {n}"} for n in range(4)] + [{"id": same, "content": "a"}, {"id": same, "content": "b"}]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(items))
    with pytest.raises(CommandError, match=r"item 6 id: .* is also the id of item 5"):
        call_command("brain", "import", str(path), "--format", "colony", "--no-progress", "--batch-size", "5")
    assert not Thought.objects.filter(space=space).exists() and fake_embedder == []


def test_bad_query_log_rows_and_suggestions_stop_the_import_before_any_thought(rich_space, tmp_path):
    path = tmp_path / "export.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows.append({"kind": "query_log", "session_id": "s", "query_text": "q", "created_at": "yesterday"})
    rows.append({"kind": "correction_suggestion", "thought": str(uuid.uuid4()), "statement": "x"})
    rows[0]["counts"] = {"thoughts": 5, "query_logs": 2, "correction_suggestions": 2}
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    CorrectionSuggestion.objects.filter(space=rich_space).delete()
    QueryLog.objects.filter(space=rich_space).delete()
    Thought.objects.filter(space=rich_space).delete()

    with pytest.raises(CommandError) as raised:
        call_command("brain", "import", str(path), "--no-progress")
    message = str(raised.value)
    assert "query-log row 2 created_at: 'yesterday' is not an ISO 8601 date-time" in message
    assert "correction suggestion 2 thought: no thought" in message and "nothing was imported" in message
    assert not Thought.objects.filter(space=rich_space).exists()
    assert not QueryLog.objects.filter(space=rich_space).exists()


def test_a_stopped_import_is_finished_by_running_it_again_with_skip_existing(space, tmp_path, monkeypatch):
    from brain import embedding

    # Mem0 memories, some without a UUID id (their thought ids are derived from the file, so a second
    # run recognises them), and a seed query log imported once.
    memories = [{"id": f"m{n}", "memory": f"Fact without a UUID {n}.", "agent_id": "bot"} for n in range(3)]
    memories += [{"id": str(uuid.uuid4()), "memory": f"Kept fact {n}.", "user_id": "alice"} for n in range(3)]
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps({"results": memories}))
    calls = []

    def embed_many(texts, *, batch_size=64):
        calls.append(list(texts))
        if len(calls) == 2:
            raise embedding.EmbeddingError("the model ran out of memory")
        return [fake_vector(t) for t in texts]

    monkeypatch.setattr(embedding, "embed_many", embed_many)
    with pytest.raises(CommandError) as raised:
        call_command("brain", "import", str(path), "--no-progress", "--batch-size", "2")
    assert "the model ran out of memory" in str(raised.value)
    assert "2 thoughts of earlier batches were imported" in str(raised.value)
    assert "again with --skip-existing" in str(raised.value)
    assert Thought.objects.filter(space=space).count() == 2

    with pytest.raises(CommandError, match="2 of the file's thoughts are already in space default"):
        call_command("brain", "import", str(path), "--no-progress", "--batch-size", "2")
    assert Thought.objects.filter(space=space).count() == 2

    call_command("brain", "import", str(path), "--no-progress", "--batch-size", "2", "--skip-existing")
    contents = sorted(Thought.objects.filter(space=space).values_list("content", flat=True))
    assert contents == sorted(m["memory"] for m in memories)  # each once

    out = io.StringIO()
    call_command("brain", "import", str(path), "--no-progress", "--skip-existing", stdout=out)
    assert "Imported 0 thoughts" in out.getvalue() and "left out: 6 thoughts" in out.getvalue()
    assert Thought.objects.filter(space=space).count() == 6


def test_a_finished_import_run_again_with_skip_existing_adds_no_query_log_or_suggestion(rich_space, tmp_path):
    path = tmp_path / "export.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    out = io.StringIO()
    call_command("brain", "import", str(path), "--no-progress", "--skip-existing", stdout=out)
    assert "left out: 5 thoughts, 1 query-log rows, 1 correction suggestions" in out.getvalue()
    assert QueryLog.objects.filter(space=rich_space).count() == 1
    assert CorrectionSuggestion.objects.filter(space=rich_space).count() == 1


def test_an_export_is_copied_into_another_space_with_new_ids(rich_space, other_space, tmp_path):
    path = tmp_path / "export.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    with pytest.raises(CommandError, match=r"another space \(5 such item\(s\)\).*--new-ids"):
        call_command("brain", "import", str(path), "--space", "other", "--no-progress")
    assert not Thought.objects.filter(space=other_space).exists()

    agent_create(name="dev-1", role="dev", space=other_space)  # the copy's thoughts keep their agent by name
    call_command("brain", "import", str(path), "--space", "other", "--no-progress", "--new-ids", "--batch-size", "2")
    copy = tmp_path / "copy.jsonl"
    call_command("brain", "export", str(copy), "--space", "other", "--no-progress")
    before, after = export_rows(path), export_rows(copy)
    assert Thought.objects.filter(space=rich_space).count() == 5  # the original is untouched

    def by_content(rows):
        return sorted((r for r in rows if r["kind"] == "thought"), key=lambda r: r["content"])

    mapping = {old["id"]: new["id"] for old, new in zip(by_content(before), by_content(after), strict=True)}
    assert len(set(mapping.values())) == 5 and not set(mapping) & set(mapping.values())

    def renamed(row):  # the old export with every id replaced by its copy's
        text = json.dumps(row, sort_keys=True)
        for old, new in mapping.items():
            text = text.replace(old, new)
        row = json.loads(text)
        if "related_thoughts" in row:
            row["related_thoughts"].sort()  # the export sorts them by id
        return row

    def comparable(rows):
        return [{k: v for k, v in r.items() if k not in ("id", "space")} for r in rows]

    suggestion_before = [renamed(r) for r in before if r["kind"] == "correction_suggestion"]
    suggestion_after = [r for r in after if r["kind"] == "correction_suggestion"]
    assert comparable(suggestion_after) == comparable(suggestion_before)
    assert suggestion_after[0]["id"] != suggestion_before[0]["id"]
    # thoughts (lineage, links, co-retrieval) and the query log point at the copies
    for old_row, new_row in zip(by_content(before), by_content(after), strict=True):
        old_row = renamed(old_row)
        assert {k: v for k, v in new_row.items() if old_row.get(k) != v} == {}
    assert [renamed(r) for r in before if r["kind"] == "query_log"] == [r for r in after if r["kind"] == "query_log"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d, "is not a file"),
        (lambda d: _write(d / "x.jsonl", '{"content": "a"}\n{"content": "b"}\n{"content": \n'), "line 3 is not JSON"),
        (
            lambda d: _write(d / "latin1.json", '[{"content": "caf\xe9"}]', "latin-1"),
            r"is not UTF-8 \(byte 0xe9 is not part of any character\)\. "
            r"Save it as UTF-8 first, e\.g\. iconv -f WINDOWS-1252",
        ),
        (lambda d: _write(d / "mem0.json", '{"results": {"a": 1}}'), "results must be a list"),
    ],
)
def test_a_file_that_cannot_be_read_is_reported(space, tmp_path, make, message):
    with pytest.raises(CommandError, match=message):
        call_command("brain", "import", str(make(tmp_path)), "--no-progress")
    assert not Thought.objects.filter(space=space).exists()


@pytest.mark.parametrize(("name", "message"), [("missing.db", "No query-log database"), ("text.db", "not a database")])
def test_a_query_log_that_is_no_seed_database_is_reported(space, tmp_path, name, message):
    points = tmp_path / "points.json"
    points.write_text(json.dumps([{"id": str(uuid.uuid4()), "payload": {"content": "Status."}}]))
    (tmp_path / "text.db").write_text("not sqlite")
    with pytest.raises(CommandError, match=message):
        call_command("brain", "import", str(points), "--query-log", str(tmp_path / name), "--no-progress")
    assert not Thought.objects.filter(space=space).exists()


def test_seed_points_as_a_retrieve_response(space, tmp_path):
    a = str(uuid.uuid4())
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"result": [{"id": a, "vector": fake_vector("x"), "payload": {"content": "Status."}}]}))
    call_command("brain", "import", str(path), "--format", "seed", "--no-progress")
    assert Thought.objects.get(pk=a).content == "Status."


def _write(path, text, encoding="utf-8"):
    path.write_text(text, encoding=encoding)
    return path


def test_an_export_cut_short_is_refused(rich_space, tmp_path):
    path = tmp_path / "export.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    lines = path.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:4]))  # the header and three of the five thoughts
    Thought.objects.filter(space=rich_space).update(refined_by=None, superseded_by=None, contradicted_by=None)
    CorrectionSuggestion.objects.filter(space=rich_space).delete()
    QueryLog.objects.filter(space=rich_space).delete()
    Thought.objects.filter(space=rich_space).delete()
    with pytest.raises(CommandError) as raised:
        call_command("brain", "import", str(cut), "--no-progress")
    assert "is not a whole export: its header promises 5 thoughts (it holds 3), 1 query logs (it holds 0)" in str(
        raised.value
    )
    assert not Thought.objects.filter(space=rich_space).exists()


def test_an_export_that_stops_half_way_leaves_no_file(rich_space, tmp_path, monkeypatch):
    from brain.transfer import cli as _transfer

    real = _transfer.space_export_rows

    def failing(**kwargs):
        rows = real(**kwargs)
        yield next(rows)
        yield next(rows)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_transfer, "space_export_rows", failing)
    path = tmp_path / "export.jsonl"
    with pytest.raises(CommandError, match="Could not write .*export.jsonl: No space left on device"):
        call_command("brain", "export", str(path), "--no-progress")
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(_transfer, "space_export_rows", real)
    with pytest.raises(CommandError, match="Could not write .*: No such file or directory"):
        call_command("brain", "export", str(tmp_path / "no-such-folder" / "export.jsonl"), "--no-progress")


def test_a_batch_refused_after_the_check_names_the_files_item(space, tmp_path, monkeypatch, fake_embedder):
    from brain.transfer import cli as _transfer

    items = [{"id": str(uuid.uuid4()), "content": f"Fact {n}."} for n in range(1, 7)]
    first = tmp_path / "first.json"
    first.write_text(json.dumps(items[:2]))
    call_command("brain", "import", str(first), "--format", "colony", "--no-progress")
    real = _transfer.dump_plan

    def plan_then_race(**kwargs):  # another writer stores item 5's id between the check and the insert
        plan = real(**kwargs)
        Thought.objects.create(space=space, id=items[4]["id"], content="raced", contributor_id="x")
        return plan

    monkeypatch.setattr(_transfer, "dump_plan", plan_then_race)
    path = tmp_path / "all.json"
    path.write_text(json.dumps(items))
    with pytest.raises(CommandError, match=rf"item 5 id: a thought with id {items[4]['id']} already exists"):
        call_command("brain", "import", str(path), "--format", "colony", "--no-progress", "--skip-existing")


def test_query_log_and_suggestion_imports_check_their_rows_themselves(space):
    from brain.transfer.services import ImportInvalid, querylogs_import, suggestions_import

    good = {"session_id": "s", "query_text": "q", "created_at": "2026-01-01T00:00:00+00:00"}
    with pytest.raises(ImportInvalid) as raised:
        querylogs_import(space=space, rows=[good, {**good, "results": "none"}])
    assert raised.value.extra["lines"] == [
        {
            "line": 2,
            "field": "results",
            "message": "must be a list of {id, score} objects, each score a finite number or null.",
        }
    ]
    assert not QueryLog.objects.filter(space=space).exists()
    with pytest.raises(ImportInvalid, match="correction suggestions") as raised:
        suggestions_import(space=space, rows=[{"thought": str(uuid.uuid4()), "statement": "x"}])
    assert raised.value.extra["lines"][0]["field"] == "thought"
    assert querylogs_import(space=space, rows=[good]) == 1


def test_jsonl_vectors_are_read_as_float32_arrays_and_stored_exactly(space, tmp_path):
    """The reader compacts each line's vectors as it goes (a million-thought export did not fit in
    memory as lists of Python floats); what is stored is the same float32s as before."""
    from brain.transfer.readers import read_dump

    vector = [float(x) for x in np.linspace(-1, 1, 384)]
    rows = [{"content": f"Note {n}.", "embedding": vector} for n in range(3)]
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dump = read_dump(path, fmt="colony")
    assert all(isinstance(t["embedding"], np.ndarray) and t["embedding"].dtype == np.float32 for t in dump.thoughts)
    call_command("brain", "import", str(path), "--no-progress")
    stored = [t.embedding for t in Thought.objects.filter(space=space)]
    assert len(stored) == 3
    assert all(np.array_equal(np.asarray(v, dtype=np.float32), np.asarray(vector, dtype=np.float32)) for v in stored)
    # Items without an id got ids derived from their JSON, vectors included: a second run recognises them.
    out = io.StringIO()
    call_command("brain", "import", str(path), "--no-progress", "--skip-existing", stdout=out)
    assert "left out: 3 thoughts" in out.getvalue()


@pytest.mark.parametrize(
    ("vector", "message"),
    [
        (["0.1"] * 384, "item 2 embedding: must be a list of 384 numbers"),
        ([0.1] * 383, "item 2 embedding: must be a list of 384 numbers"),
        ([1e39] + [0.1] * 383, "item 2 embedding: must hold finite numbers"),
        ([True] + [0.1] * 383, "item 2 embedding: must be a list of 384 numbers"),
    ],
)
def test_a_vector_that_is_not_one_is_still_reported_by_item(space, tmp_path, vector, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"content": "fine"}) + "\n" + json.dumps({"content": "bad", "embedding": vector}) + "\n")
    with pytest.raises(CommandError, match=message):
        call_command("brain", "import", str(path), "--no-progress")
    assert not Thought.objects.filter(space=space).exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"results": [{"memory": "a"}]}', {"results": [{"memory": "a"}]}),  # one line: one document
        ('{\n  "results": [\n    {"memory": "a"}\n  ]\n}\n', {"results": [{"memory": "a"}]}),  # pretty-printed
        ('\n\n[{"content": "a"},\n {"content": "b"}]\n', [{"content": "a"}, {"content": "b"}]),
        ('{"content": "a"}\n\n{"content": "b"}\n', [{"content": "a"}, {"content": "b"}]),  # JSONL, a blank line
        ("\n \n", []),
    ],
)
def test_the_reader_tells_one_document_from_json_lines(tmp_path, text, expected):
    from brain.transfer.readers import _load_json_or_lines

    path = tmp_path / "dump"
    path.write_text(text)
    assert _load_json_or_lines(path) == expected


def test_a_broken_document_or_first_line_is_reported_with_its_line(space, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "results": [\n    {"memory": "a"\n  ]\n}\n')
    with pytest.raises(CommandError, match=r"line 4 is not JSON"):
        call_command("brain", "import", str(path), "--no-progress")
    path.write_text('not json\n{"content": "b"}\n')
    with pytest.raises(CommandError, match=r"line 1 is not JSON"):
        call_command("brain", "import", str(path), "--no-progress")


@pytest.mark.parametrize("layout", ["array", "lines"])
def test_a_file_nested_too_deep_is_reported_not_a_traceback(space, tmp_path, layout):
    """Past ~900 levels Python's json raised RecursionError: a traceback instead of the command's message."""
    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / "deep.json"
    item = '{"content": "a", "context_metadata": {"a": ' + deep + "}}"
    path.write_text(f"[{item}]" if layout == "array" else '{"content": "fine"}\n' + item + "\n")
    with pytest.raises(CommandError, match=r"nested more than 100 levels"):
        call_command("brain", "import", str(path), "--no-progress")
    assert not Thought.objects.filter(space=space).exists()


@pytest.mark.parametrize("layout", ["document", "lines"])
def test_a_file_with_a_byte_order_mark_is_imported(space, tmp_path, fake_embedder, layout):
    """PowerShell 5's Out-File -Encoding utf8 and Notepad write a BOM: the first line was "not JSON"."""
    rows = [{"memory": "Likes tea", "user_id": "alice"}, {"memory": "Deploys run at night.", "user_id": "bob"}]
    text = json.dumps({"results": rows}) if layout == "document" else "\n".join(json.dumps(r) for r in rows)
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    call_command("brain", "import", str(path), "--no-progress")
    assert sorted(Thought.objects.filter(space=space).values_list("content", flat=True)) == [
        "Deploys run at night.",
        "Likes tea",
    ]
