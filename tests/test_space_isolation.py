"""Spaces isolate tenants over every endpoint (SPEC 6).

The REST paths are enumerated from the URL resolver at collection time: every ``/api/v1/`` route
with a path parameter is called with ids of ANOTHER space, for every method its view has, and must
answer 404 without a trace of the other space's data; every route without parameters must not
show the other space's data either. A new endpoint is covered the moment it is routed; one whose
path parameter has no entry in :data:`FOREIGN_IDS` fails :func:`test_every_route_is_covered` until
it gets one.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import URLResolver, get_resolver

from brain.models import CorrectionSuggestion, QueryLog, Thought
from tests.conftest import fake_vector, make_agent_client
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db
SECRET = "SECRETB"


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif getattr(pattern.callback, "cls", None) is not None:
            yield prefix + str(pattern.pattern), pattern.callback.cls


def api_routes() -> list[tuple[str, str, type]]:
    """(route, method, view class) for every /api/v1/ route and method its view implements."""
    out = []
    for route, cls in _walk(get_resolver().url_patterns):
        if not route.startswith("api/v1/"):
            continue
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(cls, method):
                out.append(("/" + route, method, cls))
    return out


ROUTES = api_routes()
PARAM = re.compile(r"<(?:\w+:)?(\w+)>")

#: Path parameter -> how to name the other space's object (the ``world`` fixture's keys).
FOREIGN_IDS = {
    "thought_id": ["thought"],
    "suggestion_id": ["suggestion"],
    "id_or_slug": ["task_slug", "task_id"],
}
#: Parameters that are not ids: the route is called with the caller's own value and must not leak.
NOT_IDS = {"role": "dev"}
#: Bodies valid enough that the id lookup, not input validation, decides the answer.
BODIES = {
    "correct": {"correct_fact": "The right fact is this one, not the other."},
    "retract": {"reason": "withdrawn for the isolation test"},
    "dna": {"note": "x"},
    "transition": {"to": "review", "summary": "isolation"},
}


@pytest.fixture
def world(other_space):
    """The other space's objects, each carrying SECRET in its text."""
    thought = Thought.objects.create(
        space=other_space,
        content=f"{SECRET} deploy fact of the other space",
        contributor_id="b",
        contributor_name=f"{SECRET}-agent",
        embedding=fake_vector("deploy fact"),
        topic=f"{SECRET}-topic",
    )
    suggestion = CorrectionSuggestion.objects.create(
        space=other_space, thought=thought, statement=f"{SECRET} contradiction", origin="quality_judge"
    )
    task = make_task(make_project(other_space, slug=f"{SECRET.lower()}-proj"), slug=f"{SECRET.lower()}-task",
                     status="active", role="dev", dna={"secret": f"{SECRET}-dna"})  # fmt: skip
    QueryLog.objects.create(space=other_space, agent_ref="b", session_id=f"{SECRET}-session",
                            query_text=f"{SECRET} query", results=[{"id": str(thought.id), "score": 0.9}])  # fmt: skip
    return {
        "thought": str(thought.id),
        "suggestion": str(suggestion.id),
        "task_slug": task.slug,
        "task_id": str(task.id),
        # Text only the other space holds (an id or slug the caller sent may be echoed in the 404).
        "markers": [
            f"{SECRET} deploy",
            f"{SECRET}-agent",
            f"{SECRET}-topic",
            f"{SECRET} contradiction",
            f"{SECRET.lower()}-proj",
            f"{SECRET}-dna",
            f"{SECRET}-session",
            f"{SECRET} query",
        ],
        "ids": [str(thought.id), str(suggestion.id), str(task.id), task.slug],
    }


@pytest.fixture
def caller(space):
    return make_agent_client(space=space, name="iso-liaison", role="liaison")


def _foreign_cases():
    for route, method, _ in ROUTES:
        params = PARAM.findall(route)
        if not params or any(p in NOT_IDS for p in params):
            continue
        for param in params:
            for key in FOREIGN_IDS.get(param, ["UNKNOWN"]):
                yield pytest.param(route, method, param, key, id=f"{method}-{route}-{key}")


def _assert_no_leak(response, world, *, ids: bool = False):
    text = response.content.decode()
    for marker in world["markers"] + (world["ids"] if ids else []):
        assert marker not in text, f"{marker!r} of the other space leaked: {text[:300]}"


def test_every_route_is_covered():
    unknown = {p for route, _, _ in ROUTES for p in PARAM.findall(route)} - set(FOREIGN_IDS) - set(NOT_IDS)
    assert not unknown, f"add these path parameters to FOREIGN_IDS or NOT_IDS in {__file__}: {unknown}"
    assert len(ROUTES) >= 20


@pytest.mark.parametrize("route,method,param,key", list(_foreign_cases()))
def test_another_spaces_id_is_404_and_shows_nothing(route, method, param, key, world, caller):
    path = PARAM.sub(lambda m: world[key] if m.group(1) == param else NOT_IDS.get(m.group(1), ""), route)
    body = BODIES.get(route.rstrip("/").rsplit("/", 1)[-1], {})
    response = getattr(caller, method)(path, body, format="json") if method != "get" else caller.get(path)
    assert response.status_code == 404, (path, response.status_code, response.content[:300])
    assert response.json()["error"]["code"].endswith("NOT_FOUND")
    _assert_no_leak(response, world)


LIST_QUERIES = {
    "/api/v1/memory": {"prompt": f"{SECRET} deploy fact of the other space", "contribute": "false"},
    "/api/v1/thoughts": {"limit": "200"},  # the list has no text search (an unknown "q" is a 400)
}


READ_ROUTES = sorted(
    {r for r, m, _ in ROUTES if m == "get" and (not PARAM.search(r) or set(PARAM.findall(r)) <= set(NOT_IDS))}
)


@pytest.mark.parametrize("route", READ_ROUTES)
def test_reads_without_ids_show_nothing_of_another_space(route, world, caller):
    path = PARAM.sub(lambda m: NOT_IDS[m.group(1)], route)
    response = caller.get(path, LIST_QUERIES.get(route, {}))
    assert response.status_code in (200, 503), (path, response.content[:300])  # 503: health without a worker
    _assert_no_leak(response, world, ids=True)


def test_ids_of_another_space_in_bodies_are_404_and_change_nothing(world, caller, space):
    foreign = world["thought"]
    cases = [
        ("/api/v1/memory", {"prompt": "A refinement that should not reach the other space.", "refines": foreign}),
        ("/api/v1/memory", {"prompt": "Merging across spaces.", "consolidates": [foreign, str(uuid.uuid4())]}),
        (
            "/api/v1/memory",
            {
                "prompt": "CORRECTION: a correction of another space's thought.",
                "thought_category": "correction",
                "topic": "t",
                "corrected_fact": "a",
                "correct_fact": "b",
                "supersedes": [foreign],
            },
        ),
        ("/api/v1/memory", {"prompt": "Relating to a thought of another space.", "related_thoughts": [foreign]}),
    ]
    for path, body in cases:
        response = caller.post(path, body, format="json")
        assert response.status_code == 404, (body, response.content[:300])
        _assert_no_leak(response, world)
    other = Thought.objects.get(pk=foreign)
    assert not other.superseded and other.refined_by_id is None and other.superseded_by_id is None
    assert not Thought.objects.filter(space=space).exists()


# --- MCP tools: every tool, with the other space's ids -------------------------
#: Arguments naming an object: the world key of the other space's object to pass.
MCP_ID_ARGS = {"thought_id": "thought", "suggestion_id": "suggestion", "task": "task_slug", "refines": "thought"}
#: Other required arguments: a plausible value, so the id lookup decides the answer.
MCP_OTHER_ARGS = {
    "query": f"{SECRET} deploy fact of the other space",
    "prompt": "A statement long enough to be a contribution about the deploy pipeline.",
    "content": "A statement long enough to be a contribution about the deploy pipeline.",
    "correct_fact": "The right fact is this one.",
    "reason": "isolation test",
    "to": "review",
    "summary": "isolation",
    "dna": {"note": "x"},
    "role": "dev",
    "session_id": "iso-session",
    "turn_id": "1",
    "user_prompt": "what about deploys?",
    "assistant_response": "They run migrations first.",
}


@pytest.mark.django_db(transaction=True)
def test_every_mcp_tool_with_another_spaces_ids(asgi_server, world, space, fake_embedder):
    import json

    from tests.test_mcp_server import in_session

    caller = make_agent_client(space=space, name="iso-mcp", role="liaison")

    async def body(session):
        results = {}
        for tool in (await session.list_tools()).tools:
            properties = tool.input_schema.get("properties", {})
            required = set(tool.input_schema.get("required", []))
            unknown = required - set(MCP_ID_ARGS) - set(MCP_OTHER_ARGS)
            assert not unknown, f"add {unknown} of MCP tool {tool.name} to MCP_ID_ARGS or MCP_OTHER_ARGS"
            ids = [name for name in properties if name in MCP_ID_ARGS]
            arguments = {name: MCP_OTHER_ARGS[name] for name in required if name in MCP_OTHER_ARGS}
            arguments |= {name: world[MCP_ID_ARGS[name]] for name in ids}
            result = await session.call_tool(tool.name, arguments)
            results[tool.name] = (bool(ids), result.is_error, result.content[0].text if result.content else "")
        return results

    results = in_session(asgi_server.url, caller.token, body)
    assert len(results) >= 10
    assert sum(takes_id for takes_id, _, _ in results.values()) >= 8  # get, lineage, retract, correct, accept, ...
    for name, (takes_id, is_error, text) in results.items():
        for marker in world["markers"] + ([] if takes_id else world["ids"]):
            assert marker not in text, (name, marker, text[:300])
        if takes_id:
            assert is_error and json.loads(text)["status"] == 404, (name, text[:300])
    other = Thought.objects.get(pk=world["thought"])
    assert not other.superseded and other.refined_by_id is None
