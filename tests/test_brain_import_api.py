"""POST /api/v1/thoughts/import: batches, per-line errors, all or nothing, space from the token."""

from __future__ import annotations

import json
import uuid

import pytest

from brain.models import Thought
from tests.conftest import fake_vector

URL = "/api/v1/thoughts/import"
pytestmark = pytest.mark.django_db


def post(client, items, *, jsonl=False):
    if jsonl:
        body = "\n".join(json.dumps(i) if not isinstance(i, str) else i for i in items)
        return client.post(URL, data=body, content_type="application/x-ndjson")
    return client.post(URL, data=json.dumps(items), content_type="application/json")


def test_import_array_stores_short_notes_with_embeddings(dev, space, fake_embedder):
    items = [
        {"content": "ok", "topic": "deploy", "tags": ["ops"]},
        {"content": "Staging uses the filesystem broker.", "thought_category": "operational_learning"},
    ]
    response = post(dev, items)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["imported"] == 2 and body["embedded"] == 2
    stored = {t.content: t for t in Thought.objects.filter(space=space)}
    assert set(stored) == {"ok", "Staging uses the filesystem broker."}  # a 2-char note is kept
    assert stored["ok"].embedding is not None and stored["ok"].tags == ["ops"]
    assert stored["ok"].contributor_name == "dev-1"
    assert fake_embedder == ["ok", "Staging uses the filesystem broker."]  # one batched call


def test_import_jsonl_keeps_times_and_maps_ids_and_embeds_with_the_servers_model(dev, space, fake_embedder):
    """An agent's thought is searched by the server's vector of its text, whatever ``embedding`` it carries:
    a vector the caller chose would make it answer questions its text is not about."""
    tid = uuid.uuid4()
    items = [
        {
            "id": str(tid),
            "content": "Given vector note",
            "created_at": "2024-01-02T03:04:05Z",
            "embedding": fake_vector("x"),
            "pheromone_weight": 3.5,
            "access_count": 7,
            "contributor_name": "dev-1",
        }
    ]
    response = post(dev, items, jsonl=True)
    assert response.status_code == 201, response.json()
    stored = response.json()["id_map"][str(tid)]
    assert response.json()["ids"] == [stored] and stored != str(tid)  # a new id, the given one named it
    thought = Thought.objects.get(pk=stored)
    assert thought.agent == dev.agent
    assert thought.created_at.isoformat() == "2024-01-02T03:04:05+00:00"
    assert thought.pheromone_weight == 3.5 and thought.access_count == 7
    assert fake_embedder == ["Given vector note"]
    assert list(thought.embedding) == pytest.approx(fake_vector("Given vector note"), abs=1e-6)


def test_bad_lines_are_all_reported_and_nothing_is_stored(dev, space, fake_embedder):
    items = [
        {"content": "fine one"},
        {"content": ""},
        "{not json",
        {"content": "x", "thought_category": "nonsense"},
        {"content": "y", "source_ids": [str(uuid.uuid4())]},
        {"content": "z", "bogus": 1},
    ]
    response = post(dev, items, jsonl=True)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "IMPORT_INVALID"
    assert [(e["line"], e["field"]) for e in error["lines"]] == [
        (2, "content"),
        (3, ""),
        (4, "thought_category"),
        (5, "source_ids"),
        (6, "bogus"),
    ]
    assert Thought.objects.filter(space=space).count() == 0


def test_an_id_taken_by_a_stored_thought_is_a_409_and_nothing_is_stored(dev, space, thought_factory, fake_embedder):
    taken = thought_factory("Already here.")
    response = post(dev, [{"content": "new one"}, {"content": "same id", "id": str(taken.id)}])
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "IMPORT_CONFLICT" and [(e["line"], e["field"]) for e in error["lines"]] == [(2, "id")]
    # With another bad line as well, the batch is invalid (400) and every line is listed.
    response = post(dev, [{"content": ""}, {"content": "same id", "id": str(taken.id)}])
    assert response.status_code == 400 and len(response.json()["error"]["lines"]) == 2
    assert Thought.objects.filter(space=space).count() == 1


def test_import_normalises_what_json_means(dev, space, fake_embedder):
    """3.0 is the integer 3; a date-time with any ISO offset is stored in UTC (PostgreSQL takes <= 15:59)."""
    item = {"content": "n", "access_count": 3.0, "co_retrieved_with": {}, "created_at": "2020-01-01T00:00:00-19:30"}
    response = post(dev, [item])
    assert response.status_code == 201, response.json()
    stored = Thought.objects.get(space=space)
    assert stored.access_count == 3 and stored.created_at.isoformat() == "2020-01-01T19:30:00+00:00"


def test_null_counts_as_not_given_for_every_optional_field(dev, space, fake_embedder):
    """As the API reads a body (and as its schema says): "superseded": null and the counters' null were line
    errors ("must be true or false") while every other optional field took null."""
    nulls = {name: None for name in ("superseded", "pheromone_weight", "access_count", "effective_confidence")}
    response = post(dev, [{"content": "The release train leaves on Thursdays.", **nulls}])
    assert response.status_code == 201, response.json()
    stored = Thought.objects.get(space=space)
    assert (stored.superseded, stored.pheromone_weight, stored.access_count, stored.effective_confidence) == (
        False,
        1.0,
        0,
        1.0,
    )


def test_batch_larger_than_the_maximum_is_refused(dev, space, settings, fake_embedder):
    settings.IMPORT_BATCH_MAX_ITEMS = 3
    response = post(dev, [{"content": f"n{i}"} for i in range(4)])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "IMPORT_TOO_LARGE"
    assert response.json()["error"]["max_items"] == 3
    assert not Thought.objects.exists()


def test_lineage_in_a_batch_and_against_stored_thoughts(dev, space, thought_factory, fake_embedder):
    old = thought_factory("The old fact about deploys.")
    a, b = uuid.uuid4(), uuid.uuid4()
    items = [
        {"id": str(a), "content": "original note", "created_at": "2025-01-01T00:00:00Z"},
        {
            "id": str(b),
            "content": "refined note",
            "thought_type": "refinement",
            "source_ids": [str(a)],
            "created_at": "2025-01-02T00:00:00Z",
            "related_thoughts": [str(old.id)],
        },
        {
            "content": "CORRECTION: the old fact about deploys is wrong; deploys restart workers first.",
            "thought_category": "correction",
            "corrected_fact": "old fact",
            "correct_fact": "new fact",
            "topic": "deploy",
            "supersedes": [str(old.id)],
        },
    ]
    response = post(dev, items)
    assert response.status_code == 201, response.json()
    correction_id = response.json()["ids"][2]
    a, b = (uuid.UUID(response.json()["id_map"][str(given)]) for given in (a, b))
    original = Thought.objects.get(pk=a)
    assert original.superseded and original.refined_by_id == b
    old.refresh_from_db()
    assert old.superseded and str(old.superseded_by_id) == correction_id
    assert set(old.related_thoughts.values_list("id", flat=True)) == {b}
    assert Thought.objects.get(pk=correction_id).corrected_fact_embedding is not None


def test_existing_id_and_other_space_ids_are_line_errors(dev, space, other_space, thought_factory, fake_embedder):
    mine = thought_factory("already here")
    theirs = thought_factory("other space secret", in_space=other_space)
    response = post(
        dev,
        [{"id": str(mine.id), "content": "dup"}, {"content": "ref", "refined_by": str(theirs.id)}],
    )
    assert response.status_code == 400
    lines = response.json()["error"]["lines"]
    assert [(e["line"], e["field"]) for e in lines] == [(1, "id"), (2, "refined_by")]
    assert "other space secret" not in response.content.decode()
    assert Thought.objects.filter(space=space).count() == 1


def test_import_goes_to_the_token_space(agent_factory, other_space, fake_embedder):
    other = agent_factory("dev", in_space=other_space)
    response = post(other, [{"content": "belongs to other"}])
    assert response.status_code == 201
    assert Thought.objects.get(content="belongs to other").space == other_space


def test_import_needs_a_token_and_json(anon, dev, fake_embedder):
    assert post(anon, [{"content": "x"}]).status_code == 401
    response = dev.post(URL, data="content=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    response = dev.post(URL, data="{", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "PARSE_ERROR"
    response = dev.post(URL, data=json.dumps({"content": "x"}), content_type="application/json")
    assert response.status_code == 400


def test_values_the_database_cannot_hold_are_line_errors(dev, space, fake_embedder):
    body = (
        '[{"content": "nul \\u0000 inside"}, {"content": "x", "pheromone_weight": NaN},'
        ' {"content": "y", "access_count": 99999999999}, {"content": "z", "co_retrieved_with": {"a": "many"}},'
        ' {"content": "v", "embedding": [' + ",".join(["Infinity"] * 384) + "]},"
        ' {"content": "a lone \\ud800 surrogate"}, {"content": "w", "context_metadata": {"k": ["\\udfff"]}},'
        ' {"content": "u", "context_metadata": {"big": 1e400}}, {"content": "t", "context_metadata": {"n": [NaN]}}]'
    )
    response = dev.post(URL, data=body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    lines = response.json()["error"]["lines"]
    assert [e["line"] for e in lines] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # a 500 for the batch before / "the database refused the batch" with no line
    assert [e["field"] for e in lines[5:]] == [
        "content",
        "context_metadata.k[0]",
        "context_metadata.big",
        "context_metadata.n[0]",
    ]
    assert not Thought.objects.filter(space=space).exists()


# Values outside the documented schema that make fuzz-api (100 examples) found accepted, or a 500
# (a dict as thought_category: unhashable in the choice check).
OFF_SCHEMA = [
    ("thought_category", {"a": [1]}),
    ("thought_type", ["original"]),
    ("quality_flags", [{"x": 1}]),
    ("related_thoughts", 0.0),
    ("related_thoughts", False),
    ("source_ids", ""),
    ("supersedes", {}),
    ("co_retrieved_with", 0),
    ("co_retrieved_with", ""),
    ("co_retrieved_with", [{"thought_id": "a", "count": "3"}]),
    ("co_retrieved_with", [{"thought_id": "a"}]),
    ("co_retrieved_with", [{"thought_id": 7, "count": 3}]),
    ("temporal_scope", 20260101),
    ("created_at", 1700000000),
    ("embedding", [3.4000000000000003e38] * 384),
    ("id", "{12345678-1234-5678-1234-567812345678}"),
    ("id", "urn:uuid:12345678-1234-5678-1234-567812345678"),
    ("id", "12345678123456781234567812345678"),
    ("refined_by", " 12345678-1234-5678-1234-567812345678"),
]


@pytest.mark.parametrize(("name", "value"), OFF_SCHEMA)
def test_a_value_the_schema_refuses_is_a_line_error(dev, space, fake_embedder, name, value):
    response = post(dev, [{"content": "off schema", name: value}])
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "IMPORT_INVALID" and [(e["line"], e["field"]) for e in error["lines"]] == [(1, name)]
    assert not Thought.objects.filter(space=space).exists()


PARTNER = "0b7c4d1e-8f5a-4c2b-9d3e-6a1f2b3c4d5e"


def test_what_the_schema_documents_as_not_given_or_the_seed_form_is_accepted(dev, space, fake_embedder):
    item = {
        "content": "documented forms",
        "id": "",
        "created_at": "",
        "temporal_scope": "",
        "superseded_by": None,
        "related_thoughts": None,
        "co_retrieved_with": [{"thought_id": PARTNER, "count": 3, "last": "2026-01-01"}],
        "embedding": [3.4e38] + [0.0] * 383,
    }
    response = post(dev, [item])
    assert response.status_code == 201, response.content[:300]
    stored = Thought.objects.get(space=space)
    assert stored.co_retrieved_with == {PARTNER: 3} and stored.temporal_scope is None


def test_a_large_import_refreshes_the_planner_statistics(dev, space, fake_embedder, monkeypatch):
    """After a bulk load the planner must not wait for autovacuum (bench-compare: 2.5x slower queries)."""
    from django.db import connection

    from brain.transfer import services as transfer

    assert post(dev, [{"content": f"note {i}"} for i in range(30)]).status_code == 201
    monkeypatch.setattr(transfer, "ANALYZE_AFTER_MIN", 10**9)
    assert transfer.thoughts_analyze_if_stale() is False  # fewer rows changed than the minimum
    monkeypatch.setattr(transfer, "ANALYZE_AFTER_MIN", 0)
    monkeypatch.setattr(transfer, "ANALYZE_AFTER_SHARE", 0.0)
    assert transfer.thoughts_analyze_if_stale() is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'brain_thought'::regclass")
        assert cursor.fetchone()[0] == Thought.objects.count()  # ANALYZE counted the rows


def test_an_import_merges_the_full_text_indexes_pending_lists(dev, space, fake_embedder):
    """A GIN index keeps new entries in a pending list that every full-text search reads in full until
    it is merged: after a 10,000-note import that was 315 pages, ~5 ms of every memory search, until
    autovacuum came. The import merges what it added."""
    from django.db import connection

    def pending_pages() -> int:  # merging twice: the second call finds what the first left
        with connection.cursor() as cursor:
            cursor.execute("SELECT gin_clean_pending_list('thought_search_gin'::regclass)")
            return cursor.fetchone()[0]

    pending_pages()
    Thought.objects.bulk_create(  # an insert that is not an import leaves its entries pending
        [Thought(space=space, content=f"pending words number {i}", contributor_id="x") for i in range(30)]
    )
    assert pending_pages() > 0
    assert post(dev, [{"content": f"imported words number {i} about deploys"} for i in range(30)]).status_code == 201
    assert pending_pages() == 0


def test_vectors_are_stored_bit_for_bit_as_float32(space, fake_embedder):
    """The COPY's text form (nine significant digits a value) loses nothing of a float32 vector (an
    operator's restore keeps the vectors of its dump)."""
    import numpy as np

    from brain.transfer.services import ImportMode, thoughts_import

    values = np.random.default_rng(3).standard_normal(384).astype(np.float32)
    values[:7] = [1 / 3, -0.0, 1.4e-45, 3.3999999e38, -1.17549435e-38, 0.1, 123456.789]  # subnormal, extremes
    items = [{"content": "exact vector", "embedding": [float(v) for v in values]}]
    result = thoughts_import(space=space, agent=None, items=items, mode=ImportMode.OPERATOR)
    stored = np.asarray(Thought.objects.get(pk=result.ids[0]).embedding, dtype=np.float32)
    assert stored.tobytes() == values.tobytes()


def test_a_body_with_a_byte_order_mark_is_imported(dev, space, fake_embedder):
    body = "\ufeff" + json.dumps([{"content": "Staging uses the filesystem broker."}])
    response = dev.post(URL, data=body.encode(), content_type="application/json")
    assert response.status_code == 201, response.json()
    assert Thought.objects.filter(space=space).count() == 1


def test_a_body_not_in_utf8_is_refused_not_stored_mangled(dev, space, fake_embedder):
    """Undecodable bytes were replaced by U+FFFD: a JSONL file saved as Windows-1252 was imported with every
    accented letter lost and no error."""
    lines = [{"content": "Staging uses the filesystem broker."}, {"content": "The café rota lives in the ops wiki."}]
    body = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode("cp1252")
    response = dev.post(URL, data=body, content_type="application/x-ndjson")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "PARSE_ERROR"
    assert error["message"].startswith("The body is not valid UTF-8: byte 0xe9 on line 2 is not part of any character.")
    assert Thought.objects.filter(space=space).count() == 0

    response = dev.post(URL, data=body, content_type="application/x-ndjson; charset=windows-1252")
    assert response.status_code == 201, response.json()
    assert sorted(Thought.objects.filter(space=space).values_list("content", flat=True)) == sorted(
        line["content"] for line in lines
    )


def test_jsonl_holding_line_separators_inside_strings_is_read_line_by_line(dev, space, fake_embedder):
    """U+2028, U+2029 and U+0085 may stand unescaped in a JSON string (Colony's own export writes them so,
    as does JavaScript's JSON.stringify); str.splitlines() broke such a line in two and both halves were
    line errors."""
    contents = [
        "Pasted from the runbook:\u2028restart the worker after a deploy.",
        "Two paragraphs of the release note\u2029second one names the flag.",
        "A web page's next-line character\u0085stays in the thought.",
    ]
    body = "\r\n".join(json.dumps({"content": text}, ensure_ascii=False) for text in contents).encode()
    response = dev.post(URL, data=body, content_type="application/x-ndjson")
    assert response.status_code == 201, response.json()
    assert sorted(Thought.objects.filter(space=space).values_list("content", flat=True)) == sorted(contents)


def test_a_mem0_dump_or_other_names_sent_to_the_api_say_what_to_send(dev, space, fake_embedder):
    """A Mem0 get_all() answer ({"results": [{"memory": ...}]}) posted as it is, or items naming the text
    "memory" / "text" or the category "category": the refusals said only "Send a JSON array" / "unknown
    field(s) memory; allowed: <30 names>"."""
    note = "The staging cluster is rebuilt each Sunday night from the main branch."
    wrapped = dev.post(
        "/api/v1/thoughts/import", json.dumps({"results": [{"memory": note}]}), content_type="application/json"
    )
    assert wrapped.status_code == 400
    message = wrapped.json()["error"]["message"]
    assert "holding a list under 'results': send that list itself" in message and "manage.py brain import" in message
    for item, field, hint in [
        ({"memory": note}, "memory", "The text goes in 'content' (a Mem0 get_all() dump"),
        ({"text": note}, "text", "The text goes in 'content'."),
        ({"content": note, "category": "operational_learning"}, "category", "Did you mean 'thought_category'?"),
    ]:
        response = post(dev, [item])
        assert response.status_code == 400, response.content
        line = response.json()["error"]["lines"][0]
        assert line["field"] == field and f"Unknown field. {hint}" in line["message"], line
    assert not Thought.objects.exists()


def test_the_serializers_take_every_item_field_and_nothing_else():
    """The wire shape the schema shows, the operator's restore and the export all use the model's field list."""
    from brain.transfer.serializers import ITEM_FIELDS, ImportItemSerializer, RestoreItemSerializer

    for serializer in (ImportItemSerializer(), RestoreItemSerializer()):
        assert set(serializer.fields) == ITEM_FIELDS | {"kind"}
