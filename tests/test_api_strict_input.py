"""Strict input on every endpoint: a number, list or object where a string is
expected, a NUL character in any text or JSON field (keys included, nested), in a path or a query
parameter, a lone surrogate in any JSON field, and an out-of-range number in any query parameter are
each a 400 VALIDATION_ERROR naming the field, and nothing is stored."""

from __future__ import annotations

import json

import pytest

from brain.models import CorrectionSuggestion, QueryLog, Thought
from quality.models import TurnLog
from tasks.models import Project, Task

pytestmark = pytest.mark.django_db

NUL = "a\x00b"


@pytest.fixture
def world(dev, space, thought_factory):
    from tests.tasks_helpers import make_project, make_task

    thought = thought_factory("The deploy pipeline runs migrations before restarting web workers.")
    make_task(make_project(space, slug="colony"), slug="t1", status="ready", role="dev", dna={"a": 1})
    return {"thought": str(thought.id)}


def counts() -> dict:
    return {
        model.__name__: model.objects.count()
        for model in (Thought, QueryLog, CorrectionSuggestion, TurnLog, Project, Task)
    } | {"dna": [t.dna for t in Task.objects.order_by("slug")]}


def assert_refused(response, field: str):
    assert response.status_code == 400, response.content[:400]
    body = response.json()
    assert body["error"]["code"] == "VALIDATION_ERROR", body
    assert any(name == field or name.startswith(field) for name in body["error"].get("fields", {})), body


TURN = {"session_id": "s1", "turn_id": "t1", "user_prompt": "q", "assistant_response": "a"}
TASK = {"project": "colony", "slug": "t2", "title": "T"}

# (method, path, body, field) with a non-string where a string is expected.
WRONG_TYPES = [
    ("post", "/api/v1/memory", {"prompt": 5}, "prompt"),
    ("post", "/api/v1/memory", {"prompt": ["a", "b"]}, "prompt"),
    ("post", "/api/v1/memory", {"prompt": {"x": "y"}}, "prompt"),
    ("post", "/api/v1/memory", {"prompt": True}, "prompt"),
    ("post", "/api/v1/memory", {"prompt": "What runs before the web workers restart?", "topic": 3}, "topic"),
    ("post", "/api/v1/memory", {"prompt": "q?", "refines": 12345}, "refines"),
    ("post", "/api/v1/memory", {"prompt": "q?", "tags": [1, 2]}, "tags"),
    ("post", "/api/v1/memory", {"prompt": "q?", "limit": "5"}, "limit"),
    ("post", "/api/v1/memory", {"prompt": "q?", "temporal_scope": 20260101}, "temporal_scope"),
    ("post", "/api/v1/memory", {"prompt": "q?", "thought_category": 1}, "thought_category"),
    ("post", "/api/v1/projects", {"slug": 7}, "slug"),
    ("post", "/api/v1/projects", {"slug": "p2", "name": 7.5}, "name"),
    ("post", "/api/v1/tasks", {**TASK, "title": 1}, "title"),
    ("post", "/api/v1/tasks", {**TASK, "parent_ids": [1]}, "parent_ids"),
    ("post", "/api/v1/tasks/t1/transition", {"to": 1}, "to"),
    ("post", "/api/v1/tasks/t1/transition", {"to": "active", "summary": ["x"]}, "summary"),
    ("post", "/api/v1/turns", {**TURN, "session_id": 1}, "session_id"),
    ("post", "/api/v1/turns", {**TURN, "user_prompt": {"a": 1}}, "user_prompt"),
    ("post", "/api/v1/turns", {**TURN, "used_ids": [1]}, "used_ids"),
    ("post", "/api/v1/thoughts/{thought}/correct", {"correct_fact": 5}, "correct_fact"),
    ("post", "/api/v1/thoughts/{thought}/correct", {"correct_fact": "x", "topic": []}, "topic"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), WRONG_TYPES)
def test_a_non_string_where_a_string_is_expected_is_refused(world, dev, method, path, body, field):
    before = counts()
    assert_refused(getattr(dev, method)(path.format(**world), body, format="json"), field)
    assert counts() == before


NULS = [
    ("post", "/api/v1/memory", {"prompt": NUL}, "prompt"),
    ("post", "/api/v1/memory", {"prompt": "q?", "source_ref": {"type": "task", "value": NUL}}, "source_ref.value"),
    ("post", "/api/v1/memory", {"prompt": "q?", "tags": ["ok", NUL]}, "tags[1]"),
    ("post", "/api/v1/memory", {"prompt": "q?", NUL: "x"}, "a\\u0000b"),
    ("post", "/api/v1/projects", {"slug": "p2", "name": NUL}, "name"),
    ("post", "/api/v1/tasks", {**TASK, "dna": {"deep": {NUL: 1}}}, "dna.deep"),
    ("post", "/api/v1/tasks", {**TASK, "dna": {"k": [NUL]}}, "dna.k[0]"),
    ("patch", "/api/v1/tasks/t1/dna", {NUL: "v"}, "a\\u0000b"),
    ("patch", "/api/v1/tasks/t1/dna", {"k": NUL}, "k"),
    ("patch", "/api/v1/tasks/t1/dna", {"k": {"n": {NUL: None}}}, "k.n"),
    ("post", "/api/v1/tasks/t1/transition", {"to": "active", "summary": NUL}, "summary"),
    ("post", "/api/v1/turns", {**TURN, "assistant_response": NUL}, "assistant_response"),
    ("post", "/api/v1/turns", {**TURN, "tool_calls": [{"name": NUL}]}, "tool_calls[0].name"),
    ("post", "/api/v1/thoughts/{thought}/correct", {"correct_fact": NUL}, "correct_fact"),
    ("post", "/api/v1/corrections/{thought}/dismiss", {"reason": NUL}, "reason"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), NULS)
def test_a_nul_anywhere_in_a_json_body_is_refused(world, dev, method, path, body, field):
    before = counts()
    assert_refused(getattr(dev, method)(path.format(**world), body, format="json"), field)
    assert counts() == before


LONE = "half \ud800 pair"  # a lone surrogate: json.dumps sends it as the escape "\\ud800"

# A lone surrogate where DRF's CharField does not look (JSON fields, keys): psycopg can't encode it (a 500).
SURROGATES = [
    ("post", "/api/v1/memory", {"prompt": "q?", "source_ref": {"type": "task", "value": LONE}}, "source_ref.value"),
    ("post", "/api/v1/memory", {"prompt": "q?", "tags": ["ok", LONE]}, "tags[1]"),
    ("post", "/api/v1/tasks", {**TASK, "dna": {"deep": {LONE: 1}}}, "dna.deep"),
    ("patch", "/api/v1/tasks/t1/dna", {"k": LONE}, "k"),
    ("post", "/api/v1/tasks/t1/transition", {"to": "active", "dna": {"k": [LONE]}}, "dna.k[0]"),
    ("post", "/api/v1/turns", {**TURN, "tool_calls": [{"name": LONE}]}, "tool_calls[0].name"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), SURROGATES)
def test_a_lone_surrogate_anywhere_in_a_json_body_is_refused(world, dev, method, path, body, field):
    before = counts()
    response = getattr(dev, method)(path.format(**world), json.dumps(body), content_type="application/json")
    assert_refused(response, field)
    assert "Lone surrogate" in response.json()["error"]["message"]
    assert counts() == before


# A number past float's range: Python's json reads 1e400 as infinity, which jsonb can't hold (a 500:
# "invalid input syntax for type json"). Sent as raw text: json.dumps would write "Infinity" instead.
NOT_FINITE = [
    ("patch", "/api/v1/tasks/t1/dna", '{"estimate": {"hours": 1e400}}', "estimate.hours"),
    ("post", "/api/v1/tasks", '{"project": "colony", "slug": "t2", "title": "T", "dna": {"n": [-1e999]}}', "dna.n[0]"),
    ("post", "/api/v1/tasks/t1/transition", '{"to": "active", "dna": {"n": 2e308}}', "dna.n"),
    (
        "post",
        "/api/v1/memory",
        '{"prompt": "q?", "source_ref": {"type": "task", "value": "v", "n": 1e400}}',
        "source_ref",
    ),
    (
        "post",
        "/api/v1/turns",
        json.dumps(TURN)[:-1] + ', "tool_calls": [{"name": "Bash", "input": {"n": 1e400}}]}',
        "tool_calls",
    ),
    # What Python's json.dumps writes for float("nan") / float("inf") (a pandas NaN in metadata, say), and
    # what the MCP tools forward for an argument of 1e400: refused as a parse error that named no field.
    ("patch", "/api/v1/tasks/t1/dna", '{"estimate": {"hours": NaN}}', "estimate.hours"),
    ("post", "/api/v1/tasks/t1/transition", '{"to": "active", "dna": {"n": [1, -Infinity]}}', "dna.n[1]"),
    ("post", "/api/v1/memory", '{"prompt": "q?", "limit": Infinity}', "limit"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), NOT_FINITE)
def test_a_number_past_floats_range_is_refused(world, dev, method, path, body, field):
    before = counts()
    response = getattr(dev, method)(path.format(**world), body, content_type="application/json")
    assert_refused(response, field)
    assert "Not a finite number" in response.json()["error"]["message"]
    assert counts() == before


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/memory?prompt=a%00b", "prompt"),
        ("/api/v1/memory?prompt=q&topic=%00", "topic"),
        ("/api/v1/memory?prompt=q&a%00=1", "a\\u0000"),
        ("/api/v1/tasks?project=%00", "project"),
        ("/api/v1/tasks/t%001", "path"),
        ("/api/v1/tasks/t%001/dna", "path"),
        ("/api/v1/thoughts/%00", "path"),
        ("/api/v1/thoughts/%00/lineage", "path"),
        ("/api/v1/agents/d%00ev/in-flight", "path"),
        ("/api/v1/corrections?status=%00", "status"),
        ("/api/v1/quality/metrics?agent=%00", "agent"),
    ],
)
def test_a_nul_in_the_path_or_a_query_parameter_is_refused(world, dev, path, field):
    before = counts()
    assert_refused(dev.get(path), field)
    assert counts() == before


HUGE = "14629127388636015471701937618944"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (f"/api/v1/tasks?offset={HUGE}", "offset"),
        ("/api/v1/tasks?offset=-1", "offset"),
        (f"/api/v1/tasks?limit={HUGE}", "limit"),
        ("/api/v1/tasks?limit=0", "limit"),
        ("/api/v1/tasks?limit=1e3", "limit"),
        (f"/api/v1/thoughts/{{thought}}/lineage?max_depth={HUGE}", "max_depth"),
        ("/api/v1/thoughts/{thought}/lineage?max_depth=-1", "max_depth"),
        (f"/api/v1/quality/metrics?days={HUGE}", "days"),
        ("/api/v1/quality/metrics?days=0", "days"),
        (f"/api/v1/corrections?limit={HUGE}", "limit"),
        (f"/api/v1/memory?prompt=q&limit={HUGE}", "limit"),
        ("/api/v1/memory?prompt=q&limit=" + "9" * 5000, "limit"),
        (f"/api/v1/agents/dev/in-flight?markers={HUGE}", "markers"),
        ("/api/v1/agents/dev/in-flight?markers=x", "markers"),
    ],
)
def test_an_out_of_range_number_in_a_query_parameter_is_refused(world, dev, path, field):
    before = counts()
    assert_refused(dev.get(path.format(**world)), field)
    assert counts() == before


def test_query_strings_still_take_numbers_and_booleans_as_text(world, dev):
    assert dev.get("/api/v1/tasks?limit=5&offset=0").status_code == 200
    assert dev.get("/api/v1/corrections?mine=true&limit=3").status_code == 200
    assert dev.get("/api/v1/quality/metrics?days=7").status_code == 200


# A string longer than its schema's maxLength once whitespace is trimmed off: DRF trims first, then
# counts, so 100 characters plus a leading \x1f (str.strip() takes it off) used to pass max_length=100.
TOO_LONG_BEFORE_TRIMMING = [
    ("post", "/api/v1/turns", {**TURN, "session_id": "\x1f" + "s" * 100}, "session_id"),
    ("post", "/api/v1/turns", {**TURN, "turn_id": " " + "t" * 200}, "turn_id"),
    ("post", "/api/v1/tasks", {**TASK, "title": "T" * 300 + "\n"}, "title"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), TOO_LONG_BEFORE_TRIMMING)
def test_max_length_counts_the_string_as_sent_before_trimming(world, dev, method, path, body, field):
    before = counts()
    assert_refused(getattr(dev, method)(path.format(**world), body, format="json"), field)
    assert counts() == before


def test_a_string_of_exactly_max_length_with_surrounding_whitespace_inside_it_is_accepted(world, dev):
    session_id = " " + "s" * 98 + " "
    response = dev.post("/api/v1/turns", {**TURN, "session_id": session_id}, format="json")
    assert response.status_code == 202, response.content[:400]
    assert response.json()["session_id"] == "s" * 98


def test_memory_input_fields_are_reused_per_thread_with_each_instances_context():
    """The memory endpoint's input serializer builds its fields once per thread (api.fields.
    FieldsReusedPerThread); each instance still validates with its own data and context."""
    import threading

    from django.http import QueryDict

    from api import fields as strict
    from brain.inputs import MemoryInputSerializer

    body = MemoryInputSerializer(data={"prompt": "x", "limit": "5"})  # a string limit in a JSON body: refused
    assert not body.is_valid() and set(body.errors) == {"limit"}
    query = MemoryInputSerializer(data=QueryDict("prompt=x&limit=5&store=true"), context={strict.QUERY_STRING: True})
    assert query.is_valid(), query.errors
    assert query.validated_data["limit"] == 5 and query.validated_data["store"] is True
    assert query.fields["limit"] is body.fields["limit"]  # the same objects, re-parented
    assert query.fields["limit"].parent is query and query.fields["source_ref"].fields["type"].root is query
    again = MemoryInputSerializer(data={"prompt": "y", "source_ref": {"type": "task", "value": "t", "x": 1}})
    assert not again.is_valid() and set(again.errors) == {"source_ref"}
    assert MemoryInputSerializer(data={"prompt": "z", "limit": 7}).is_valid()

    elsewhere = []
    thread = threading.Thread(target=lambda: elsewhere.append(MemoryInputSerializer(data={"prompt": "w"}).fields))
    thread.start()
    thread.join()
    assert elsewhere[0]["limit"] is not body.fields["limit"]  # another thread: its own copies


def nested(depth: int) -> str:
    """A JSON array nested ``depth`` levels deep."""
    return "[" * depth + "]" * depth


# (method, path, body around a nested value): each adds one level of its own.
DEEP = [
    ("post", "/api/v1/memory", '{"prompt": "q?", "tags": %s}'),
    (
        "post",
        "/api/v1/turns",
        '{"session_id": "s", "turn_id": "t", "user_prompt": "p", "assistant_response": "r", "tool_calls": %s}',
    ),  # fmt: skip
    ("patch", "/api/v1/tasks/t1/dna", '{"k": %s}'),
]


@pytest.mark.parametrize("depth", [100, 100_000])
@pytest.mark.parametrize(("method", "path", "body"), DEEP)
def test_a_body_nested_too_deep_is_a_parse_error(world, dev, method, path, body, depth):
    """~900 levels ran Python's json (or a walk of the value after it) into the recursion limit: a 500."""
    from api.parsers import MAX_JSON_DEPTH

    before = counts()
    response = getattr(dev, method)(path, body % nested(depth), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "PARSE_ERROR" and f"nested more than {MAX_JSON_DEPTH} levels" in error["message"]
    assert counts() == before


def test_an_import_item_nested_too_deep_is_a_line_error(world, dev):
    """The import's reader leaves the depth to each item's check (a walk of every row's vector would cost
    ~50% of the parse); past Python's recursion limit the body itself is a parse error."""
    body = '[{"content": "fine"}, {"content": "x", "context_metadata": {"a": %s}}]'
    before = counts()
    response = dev.post("/api/v1/thoughts/import", body % nested(100), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    [line] = response.json()["error"]["lines"]
    assert line["line"] == 2 and line["message"].startswith("Nested more than 100 levels"), line
    response = dev.post("/api/v1/thoughts/import", body % nested(100_000), content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "PARSE_ERROR"
    assert "nested more than 100 levels" in response.json()["error"]["message"]
    assert counts() == before


def test_a_body_at_the_depth_limit_is_taken(world, dev):
    response = dev.patch("/api/v1/tasks/t1/dna", '{"k": ' + nested(99) + "}", content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    assert Task.objects.get(slug="t1").dna["k"] == json.loads(nested(99))


def test_an_optional_field_sent_as_null_counts_as_not_given(world, dev, fake_embedder):
    """Tool-calling clients send every parameter, null for those the model left out (OpenAI's strict
    function calling requires all of them): each such call was a 400 "This field may not be null."
    An optional field's null now counts as not given; a required field's null is still refused, and
    the schema says both."""
    nulls = {
        name: None
        for name in (
            "topic", "thought_category", "session_id", "limit", "contribute", "refines", "consolidates",
            "supersedes", "filter_topic", "filter_category", "source_ref", "temporal_scope", "store",
            "related_thoughts", "alternatives_considered", "tags", "context", "agent_id", "agent_name",
        )
    }  # fmt: skip
    question = "What does the deploy pipeline run before restarting the web workers?"
    answered = dev.post("/api/v1/memory", {"prompt": question, **nulls}, content_type="application/json")
    assert answered.status_code == 200, answered.content[:400]
    assert answered.json()["result"]["sources"][0]["thought_id"] == world["thought"]
    created = dev.post(
        "/api/v1/tasks",
        {"project": "colony", "slug": "t3", "title": "T", "description": None, "dna": None, "parent_ids": None},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content[:400]
    task = Task.objects.get(slug="t3")
    assert (task.description, task.dna) == ("", {})
    before = counts()
    assert_refused(dev.post("/api/v1/memory", {"prompt": None}, content_type="application/json"), "prompt")
    assert_refused(
        dev.post("/api/v1/tasks", {"project": "colony", "slug": None, "title": "T"}, content_type="application/json"),
        "slug",
    )
    assert counts() == before

    schema = dev.get("/api/schema/?format=json").json()["components"]["schemas"]["MemoryInputRequest"]
    null = {"type": "null", "description": "The same as not given."}
    assert schema["required"] == ["prompt"] and "anyOf" not in schema["properties"]["prompt"]
    assert schema["properties"]["limit"]["anyOf"][1] == null


def test_an_unknown_field_names_the_field_it_was_meant_for(world, dev):
    """An agent that uses both the MCP tools and REST sends the tools' names (memory_search's query,
    memory_contribute's content) to POST/GET /api/v1/memory, and a hand-written call misspells a
    field: the 400 listed every allowed field and left the agent to guess which one it meant."""
    before = counts()
    for method, path, body, key, meant in [
        ("get", "/api/v1/memory", {"query": "deploy pipeline"}, "query", "'prompt'"),
        (
            "post",
            "/api/v1/memory",
            {"content": "The deploy pipeline runs migrations first, always."},
            "content",
            "'prompt'",
        ),
        ("get", "/api/v1/memory", {"prompt": "deploy", "lmit": "3"}, "lmit", "Did you mean 'limit'?"),
        (
            "get",
            "/api/v1/memory",
            {"prompt": "deploy", "Filter_Topic": "x"},
            "Filter_Topic",
            "Did you mean 'filter_topic'?",
        ),
        ("get", "/api/v1/thoughts", {"limt": "3"}, "limt", "Did you mean 'limit'?"),
        ("post", "/api/v1/tasks/t1/transition", {"to": "active", "sumary": "x"}, "sumary", "Did you mean 'summary'?"),
        ("post", "/api/v1/tasks/t1/transition", {"status": "active"}, "status", "goes in 'to'"),
        ("post", "/api/v1/turns", {**TURN, "prompt": "q"}, "prompt", "'user_prompt'"),
        (
            "post",
            "/api/v1/thoughts/{thought}/correct",
            {"correction": "It runs them after."},
            "correction",
            "'correct_fact'",
        ),
    ]:
        path = path.format(**world)
        if method == "get":
            response = dev.get(path, body)
        else:
            response = dev.post(path, body, content_type="application/json")
        assert_refused(response, key)
        error = response.json()["error"]
        assert meant in error["fields"][key][0] and meant in error["message"], error
        assert "Allowed: " in error["fields"][key][0]
    far = dev.get("/api/v1/memory", {"prompt": "deploy", "zzz": "1"}).json()["error"]["fields"]["zzz"][0]
    assert "Did you mean" not in far and "'prompt' (the MCP" not in far and far.startswith("Unknown field. Allowed: ")
    assert counts() == before


def test_a_choice_that_is_not_one_lists_the_choices_and_the_one_meant(world, dev):
    """DRF said only '"decision" is not a valid choice.': an agent had to find decision_record in the
    schema. The refusal now lists the choices and names the likely one; nothing is stored."""
    before = counts()
    statement = "Decision: we keep Postgres 15 for pg-core-east until the Q3 freeze ends, chosen over 16."
    for method, path, body, field, meant in [
        (
            "post",
            "/api/v1/memory",
            {"prompt": statement, "thought_category": "decision"},
            "thought_category",
            "decision_record",
        ),
        (
            "post",
            "/api/v1/memory",
            {"prompt": statement, "thought_category": "Decision_Record"},
            "thought_category",
            "decision_record",
        ),
        (
            "post",
            "/api/v1/memory",
            {"prompt": "staging?", "contribute": False, "filter_category": "snapshot"},
            "filter_category",
            "state_snapshot",
        ),
        ("get", "/api/v1/thoughts", {"category": "learning"}, "category", "operational_learning"),
        ("get", "/api/v1/tasks", {"status": "actve"}, "status", "active"),
        ("get", "/api/v1/tasks", {"status": "zzz"}, "status", None),
    ]:
        response = dev.post(path, body, content_type="application/json") if method == "post" else dev.get(path, body)
        assert_refused(response, field)
        message = response.json()["error"]["fields"][field][0]
        assert message.startswith(f"{body[field]!r} is not one of "), message
        assert (f"Did you mean {meant!r}?" in message) if meant else ("Did you mean" not in message), message
    listed = dev.get("/api/v1/thoughts", {"category": "x"}).json()["error"]["fields"]["category"][0]
    assert "decision_record" in listed and "operational_learning" in listed and "Did you mean" not in listed
    assert counts() == before
