"""The MCP server at /mcp, driven by the official SDK's Streamable HTTP client against a live
uvicorn serving ``config.asgi`` (lifespan included): tools, seed 002's protocol through MCP alone,
authentication and space isolation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import urllib.request

import httpx
import pytest
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from brain.models import QueryLog, Thought
from brain.services.retraction import REDACTED_CONTENT
from tasks.models import Task
from tests.concurrency_support import row_locked, wait_for_a_lock_wait
from tests.tasks_helpers import make_project, make_task
from tests.test_core_metrics import sample, scrape

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED_TOOLS = {
    "memory_search",
    "memory_contribute",
    "memory_correct",
    "thought_get",
    "thought_lineage",
    "thought_list",
    "thought_retract",
    "corrections_pending",
    "correction_accept",
    "correction_dismiss",
    "task_list",
    "task_get",
    "task_moves",
    "task_transition",
    "task_update_dna",
    "in_flight",
    "turn_log",
}


async def _with_session(url: str, token: str | None, body):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def in_session(url: str, token: str | None, body):
    """Open one MCP session (initialize handshake included), run ``body(session)``, close it."""
    return run_outside_any_loop(_with_session(url, token, body))


class Tools:
    """Call tools and decode their JSON text; ``call`` fails the test on an error result."""

    def __init__(self, session):
        self.session = session

    async def raw(self, name: str, **arguments):
        result = await self.session.call_tool(name, arguments)
        return result.is_error, json.loads(result.content[0].text)

    async def call(self, name: str, **arguments) -> dict:
        is_error, body = await self.raw(name, **arguments)
        assert not is_error, (name, body)
        return body


def test_lists_every_tool_with_a_schema_and_a_description(asgi_server, agent_factory):
    dev = agent_factory("dev")

    async def body(session):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in in_session(asgi_server.url, dev.token, body)}
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert len(tool.description) > 80, tool.name
        assert "ctx" not in tool.input_schema.get("properties", {})
    assert tools["memory_search"].input_schema["required"] == ["query"]
    assert "never stores" in tools["memory_search"].description
    assert set(tools["task_transition"].input_schema["required"]) == {"task", "to"}
    assert tools["thought_retract"].input_schema["properties"]["reason"]["minLength"] == 1


def test_seed_002_protocol_through_mcp_alone(asgi_server, agent_factory, fake_embedder, space):
    dev = agent_factory("dev", name="dev-mcp")
    project = make_project(space, "colony")
    make_task(project, slug="fix-ci", status="ready", role="dev", dna={"pdsa_ref": "docs/fix-ci.md"})

    async def first_session(session):
        tools = Tools(session)
        # Claiming without a query is refused by the gate, with REST's code.
        is_error, refused = await tools.raw("task_transition", task="fix-ci", to="active", summary="claiming")
        assert is_error and refused["status"] == 409 and refused["error"]["code"]
        assert "memory_query_session" in refused["error"]["message"]

        search = await tools.call(
            "memory_search",
            query="The CI pipeline fails on the migration step because the test database has no vector extension",
        )
        session_id = search["trace"]["session_id"]
        assert search["trace"]["thought_id"] is None  # retrieve-only: nothing stored even over 50 chars
        await tools.call("task_update_dna", task="fix-ci", dna={"memory_query_session": session_id})
        moves = await tools.call("task_moves", task="fix-ci")
        assert "active" in moves["allowed"]
        claimed = await tools.call("task_transition", task="fix-ci", to="active", summary="claiming the CI fix")
        assert claimed["task"]["status"] == "active"
        assert claimed["transition"]["marker"].startswith("TASK ready→active: DEV fix-ci (colony)")
        return session_id

    session_id = in_session(asgi_server.url, dev.token, first_session)
    assert not Thought.objects.exclude(thought_category="transition_marker").exists()
    assert QueryLog.objects.filter(session_id=session_id, agent=dev.agent).count() == 1

    # The MCP session is gone (a crash, a compaction): a new one recovers the task.
    async def second_session(session):
        tools = Tools(session)
        flight = await tools.call("in_flight")
        assert flight["role"] == "dev"
        [task] = flight["tasks"]
        assert task["slug"] == "fix-ci" and task["status"] == "active"
        assert task["last_markers"][0]["marker"].startswith("TASK ready→active: DEV fix-ci")

        contributed = await tools.call(
            "memory_contribute",
            content="fix-ci outcome 2026-11-23: the CI migration step failed because the test database lacked "
            "the vector extension; the first brain migration now creates it, CI is green again.",
            thought_category="task_outcome",
            source_ref={"type": "task", "value": "fix-ci", "project": "colony"},
            session_id=session_id,
        )
        thought_id = contributed["trace"]["thought_id"]
        assert thought_id
        await tools.call("task_update_dna", task="fix-ci", dna={"memory_contribution_id": thought_id})
        handed = await tools.call("task_transition", task="fix-ci", to="review", summary="fixed, over to QA")
        assert handed["task"]["status"] == "review" and handed["task"]["role"] == "qa"
        read_back = await tools.call("thought_get", thought_id=thought_id)
        assert read_back["thought_category"] == "task_outcome"
        assert (await tools.call("in_flight"))["tasks"] == []
        return thought_id

    thought_id = in_session(asgi_server.url, dev.token, second_session)
    task = Task.objects.get(slug="fix-ci")
    assert task.dna["memory_contribution_id"] == thought_id
    assert Thought.objects.get(id=thought_id).agent == dev.agent

    # QA, in its own session, finds the handed-off task with its markers.
    qa = agent_factory("qa", name="qa-mcp")

    async def qa_session(session):
        tools = Tools(session)
        listed = await tools.call("task_list", status="review", role="qa")
        assert [t["slug"] for t in listed["results"]] == ["fix-ci"]
        detail = await tools.call("task_get", task="fix-ci")
        return [t["marker"] for t in detail["transitions"]]

    markers = in_session(asgi_server.url, qa.token, qa_session)
    assert markers[0].startswith("TASK active→review: DEV fix-ci (colony) — fixed, over to QA")


def test_tool_errors_carry_rest_codes_and_messages(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev")
    rest = httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Bearer {dev.token}"})
    missing = "00000000-0000-0000-0000-000000000000"

    async def body(session):
        tools = Tools(session)
        return (
            await tools.raw("thought_get", thought_id=missing),
            await tools.raw("memory_contribute", content="x" * 60, thought_category="decision_record"),
            await tools.raw("task_get", task="no-such-task"),
        )

    (e1, not_found), (e2, missing_fields), (e3, no_task) = in_session(asgi_server.url, dev.token, body)
    assert e1 and e2 and e3
    rest_not_found = rest.get(f"/api/v1/thoughts/{missing}")
    assert not_found == {**rest_not_found.json(), "status": rest_not_found.status_code}
    assert not_found["error"]["code"] == "THOUGHT_NOT_FOUND"
    rest_missing = rest.post("/api/v1/memory", json={"prompt": "x" * 60, "thought_category": "decision_record"})
    assert missing_fields == {**rest_missing.json(), "status": 400}
    assert missing_fields["error"]["code"] == "MISSING_CATEGORY_FIELDS"
    assert no_task["status"] == 404 and no_task["error"] == rest.get("/api/v1/tasks/no-such-task").json()["error"]


def test_an_argument_a_tool_does_not_have_is_refused_naming_the_one_meant(asgi_server, agent_factory, fake_embedder):
    """The SDK dropped unknown arguments: memory_search(query=..., limt=3) answered ten sources as if
    limit were not given, and REST's names (prompt for query, status for to) got pydantic's "Field
    required" with a link. REST refuses an unknown field; the tools now do too, in REST's envelope, and
    each tool's input schema says so (additionalProperties: false)."""
    dev = agent_factory("dev")

    async def body(session):
        tools = Tools(session)
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        return listed, (
            await tools.raw("memory_search", query="deploy", limt=3),
            await tools.raw("memory_search", prompt="deploy"),
            await tools.raw("memory_contribute", prompt="The deploy pipeline runs migrations before the web restarts."),
            await tools.raw("task_transition", task="t1", status="active"),
            await tools.raw("memory_search", query="deploy", limit=3),
            await tools.raw("memory_search", query="deploy", filter_category="decision", limit=500),
            [
                await tools.raw(name, query="deploy")
                for name in ("search_memory", "memory.search", "colony_memory_search")
            ],
        )

    listed, (misspelt, rest_name, contribute, transition, fine, invalid, unknown_tools) = in_session(
        asgi_server.url, dev.token, body
    )
    assert all(tool.input_schema.get("additionalProperties") is False for tool in listed.values())
    for (is_error, answer), key, meant in [
        (misspelt, "limt", "Did you mean 'limit'?"),
        (rest_name, "prompt", "The question goes in 'query'."),
        (contribute, "prompt", "The statement goes in 'content'."),
        (transition, "status", "The status to move to goes in 'to'."),
    ]:
        assert is_error and answer["status"] == 400 and answer["error"]["code"] == "VALIDATION_ERROR", answer
        assert meant in answer["error"]["fields"][key][0] and meant in answer["error"]["message"], answer
    assert rest_name[1]["error"]["fields"]["query"] == ["This argument is required."]
    assert transition[1]["error"]["fields"]["to"] == ["This argument is required."]
    assert fine[0] is False
    # A wrong value (pydantic's check, before the tool runs) is REST's envelope too, not pydantic's text.
    is_error, answer = invalid
    assert is_error and answer["status"] == 400 and answer["error"]["code"] == "VALIDATION_ERROR", answer
    assert "Did you mean 'decision_record'?" in answer["error"]["fields"]["filter_category"][0]
    assert "less than or equal to 50" in answer["error"]["fields"]["limit"][0]
    assert "pydantic" not in json.dumps(answer)
    # A tool that does not exist (the words swapped, another separator, the server's name as a prefix):
    # the SDK's plain "Unknown tool: search_memory"; now the envelope naming the tool meant.
    for is_error, answer in unknown_tools:
        assert is_error and answer["status"] == 404 and answer["error"]["code"] == "UNKNOWN_TOOL", answer
        assert "Did you mean 'memory_search'?" in answer["error"]["message"], answer
    assert not Thought.objects.exists() and QueryLog.objects.count() == 1  # the last call only


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer col_not-a-real-token"}, {"Authorization": "Token abc"}],
    ids=["no-token", "unknown-token", "wrong-scheme"],
)
def test_refused_without_a_valid_token(asgi_server, headers):
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(
        f"{asgi_server.url}/mcp",
        json=init,
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"
    assert response.headers["www-authenticate"] == 'Bearer realm="colony"'


def test_sdk_client_without_token_cannot_connect(asgi_server):
    async def body(session):  # pragma: no cover - never reached
        return await session.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error type
        in_session(asgi_server.url, None, body)


def test_revoked_token_is_refused(asgi_server, agent_factory):
    from core.services import token_revoke

    dev = agent_factory("dev")
    token_revoke(agent=dev.agent)
    response = httpx.post(
        f"{asgi_server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {dev.token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401


def test_a_database_outage_at_the_token_lookup_is_a_503_in_the_envelope(asgi_server, agent_factory, monkeypatch):
    """The token lookup's error escaped the endpoint: the server's plain-text 500 "Internal Server Error",
    where REST answers 503 DATABASE_UNAVAILABLE with Retry-After (and an agent's client knows to retry)."""
    import psycopg
    from django.db import utils as db_utils

    from core import services

    dev = agent_factory("dev")

    def post():
        return httpx.post(
            f"{asgi_server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Authorization": f"Bearer {dev.token}", "Accept": "application/json, text/event-stream"},
        )

    def database_down(**kwargs):
        exc = db_utils.OperationalError("connection failed: Connection refused")
        exc.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
        raise exc

    monkeypatch.setattr(services, "token_lookup", database_down)
    down = post()
    assert down.status_code == 503 and down.json()["error"]["code"] == "DATABASE_UNAVAILABLE", down.text
    assert int(down.headers["Retry-After"]) > 0

    def broken(**kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(services, "token_lookup", broken)
    failed = post()
    assert failed.status_code == 500 and failed.json()["error"]["code"] == "INTERNAL_ERROR", failed.text


def test_no_cross_space_access(asgi_server, agent_factory, other_space, fake_embedder, space, thought_factory):
    mine = thought_factory("The staging database is restored from the nightly snapshot at 03:00 UTC every day.")
    make_task(make_project(space, "home"), slug="home-task", status="ready", role="dev")
    outsider = agent_factory("dev", name="outsider", in_space=other_space)

    async def body(session):
        tools = Tools(session)
        return (
            await tools.raw("thought_get", thought_id=str(mine.id)),
            await tools.raw("task_get", task="home-task"),
            await tools.call("memory_search", query="staging database nightly snapshot restore"),
            await tools.call("task_list"),
            await tools.raw("memory_correct", thought_id=str(mine.id), correct_fact="It is restored at 04:00."),
        )

    (e1, thought), (e2, task), search, tasks, (e3, correct) = in_session(asgi_server.url, outsider.token, body)
    assert e1 and thought["status"] == 404
    assert e2 and task["status"] == 404
    assert search["result"]["sources"] == []
    assert tasks["results"] == []
    assert e3 and correct["status"] == 404
    assert Thought.objects.filter(space=other_space).count() == 0
    mine.refresh_from_db()
    assert not mine.superseded


def test_url_token_query_parameter_is_refused_on_mcp(asgi_server, agent_factory):
    dev = agent_factory("dev")
    response = httpx.post(
        f"{asgi_server.url}/mcp?token=colr_anything",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {dev.token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "URL_TOKEN_NOT_ALLOWED"


def test_host_outside_allowed_hosts_is_refused(asgi_server, agent_factory):
    dev = agent_factory("dev")
    response = httpx.post(
        f"{asgi_server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Authorization": f"Bearer {dev.token}",
            "Host": "evil.example",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "BAD_HOST"


def test_thought_list_and_retract_through_mcp(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev", name="retractor")

    async def body(session):
        tools = Tools(session)
        stored = await tools.call(
            "memory_contribute", content="The API key for the staging mail relay is abc123, pasted here by mistake."
        )
        thought_id = stored["trace"]["thought_id"]
        listed = await tools.call("thought_list", contributor="retractor")
        retracted = await tools.call("thought_retract", thought_id=thought_id, reason="contains a secret", redact=True)
        again = await tools.raw("thought_retract", thought_id=thought_id, reason="twice")
        live = await tools.call("thought_list", superseded=False)
        return thought_id, listed, retracted, again, live

    thought_id, listed, retracted, (is_error, again), live = in_session(asgi_server.url, dev.token, body)
    assert [t["thought_id"] for t in listed["results"]] == [thought_id]
    assert retracted["thought"]["superseded"] is True and "retracted" in retracted["thought"]["quality_flags"]
    assert is_error and again["status"] == 409 and again["error"]["code"] == "ALREADY_RETRACTED"
    assert live["count"] == 0
    # Kept, its text erased (before redact, the key stayed in the thought and its query-log entry).
    assert Thought.objects.get(id=thought_id).content == REDACTED_CONTENT
    assert not QueryLog.objects.filter(query_text__contains="abc123").exists()
    assert retracted["guidance"].startswith("Retracted and redacted")


def test_thought_list_and_task_list_page_with_the_cursor_through_mcp(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev", name="pager")

    async def body(session):
        tools = Tools(session)
        for n in range(3):
            await tools.call(
                "memory_contribute", content=f"Fact number {n} about the paging of long lists in the Colony API."
            )
        first = await tools.call("thought_list", limit=2)
        second = await tools.call("thought_list", limit=2, cursor=first["next_cursor"])
        tasks = await tools.call("task_list", limit=1)
        bad = await tools.raw("thought_list", cursor="not-a-cursor")
        return first, second, tasks, bad

    first, second, tasks, (is_error, bad) = in_session(asgi_server.url, dev.token, body)
    contents = [t["content"] for t in first["results"] + second["results"]]
    assert contents == [f"Fact number {n} about the paging of long lists in the Colony API." for n in (2, 1, 0)]
    assert second["next_cursor"] is None and "next_cursor" in tasks
    assert is_error and bad["status"] == 400 and "next_cursor of the previous page" in bad["error"]["message"]


def test_memory_contribute_with_an_idempotency_key_stores_a_retried_call_once(
    asgi_server, agent_factory, fake_embedder
):
    dev = agent_factory("dev", name="retrier")
    fact = "The staging mail relay rejects messages larger than ten megabytes since the upgrade."

    async def body(session):
        tools = Tools(session)
        first = await tools.call("memory_contribute", content=fact, idempotency_key="relay-note-1")
        again = await tools.call("memory_contribute", content=fact, idempotency_key="relay-note-1")
        other = await tools.raw("memory_contribute", content=fact + " Really.", idempotency_key="relay-note-1")
        bad = await tools.raw("memory_contribute", content=fact, idempotency_key="has space")
        return first, again, other, bad

    first, again, (other_error, other), (bad_error, bad) = in_session(asgi_server.url, dev.token, body)
    assert again == first and first["trace"]["thought_id"] is not None
    assert Thought.objects.filter(agent=dev.agent).count() == 1
    assert other_error and other["status"] == 409 and other["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert bad_error and bad["status"] == 400


def test_memory_search_carries_the_map_not_breadcrumbs_hint(asgi_server, agent_factory, fake_embedder):
    from tests.test_brain_topic_map import FRAGMENTS

    dev = agent_factory("dev")
    ids = {
        dev.post("/api/v1/memory", {"prompt": t, "topic": "gruendung"}, format="json").json()["trace"]["thought_id"]
        for t in FRAGMENTS
    }

    async def body(session):
        return await Tools(session).call("memory_search", query="gruendung state", filter_topic="gruendung")

    guidance = in_session(asgi_server.url, dev.token, body)["result"]["guidance"]
    assert "Topic 'gruendung' is 3 fragments and no current state snapshot" in guidance
    offered = json.loads(guidance[guidance.index('{"prompt"') :])
    assert set(offered["consolidates"]) == ids


def test_a_tool_call_waiting_on_the_database_does_not_hold_up_another_agents_calls(asgi_server, agent_factory, space):
    """Tool calls run in the worker's pool of request threads, as REST requests do. They ran on
    asgiref's one thread-sensitive thread per process: while one agent's call waited (here on a task
    row a long transaction keeps locked; an unreachable database is another way), every other agent's
    MCP call in that worker, its token lookup included, waited behind it."""
    dev, qa = agent_factory("dev"), agent_factory("qa")
    make_task(make_project(space, "locks"), slug="locked-task", status="ready", role="dev")

    async def dev_body(session):
        return await Tools(session).raw("task_update_dna", task="locked-task", dna={"pdsa_ref": "docs/locks.md"})

    async def qa_body(session):
        return await Tools(session).call("task_list")

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        with row_locked(Task.objects.filter(slug="locked-task")):
            dev_call = pool.submit(in_session, asgi_server.url, dev.token, dev_body)
            wait_for_a_lock_wait(unless=dev_call.done)
            qa_call = pool.submit(in_session, asgi_server.url, qa.token, qa_body)
            try:
                listed = qa_call.result(timeout=30)  # the row is still locked: dev's call is still waiting
            except concurrent.futures.TimeoutError:
                pytest.fail("qa's task_list waited behind dev's blocked task_update_dna")
            assert not dev_call.done()
        is_error, updated = dev_call.result(timeout=30)
    assert [task["slug"] for task in listed["results"]] == ["locked-task"]
    assert not is_error and updated["dna"]["pdsa_ref"] == "docs/locks.md"


def test_a_search_is_answered_before_its_reinforcement_runs(
    asgi_server, agent_factory, thought_factory, fake_embedder, monkeypatch
):
    """As on REST, the memory call's reinforcement runs after the answer is on its way: a tool call
    closed its response (running that work) before returning, so every MCP search also waited for the
    reinforcement's UPDATE. The work still runs, once."""
    from brain.services import pheromones

    dev = agent_factory("dev")
    content = "The release checklist lives in docs/release.md and is read before every tag."
    thought = thought_factory(content)
    answered, waited = threading.Event(), []
    reinforce = pheromones.reinforcement_fold_due

    def reinforce_once_answered(**kwargs):
        waited.append(answered.wait(30))  # never set before the answer arrives
        return reinforce(**kwargs)

    monkeypatch.setattr(pheromones, "reinforcement_fold_due", reinforce_once_answered)

    async def body(session):
        found = await Tools(session).call("memory_search", query=content)
        answered.set()
        return found

    found = in_session(asgi_server.url, dev.token, body)
    assert [s["thought_id"] for s in found["result"]["sources"]] == [str(thought.id)]
    deadline = time.monotonic() + 30
    while Thought.objects.get(pk=thought.pk).access_count == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert waited == [True], "the answer waited for the reinforcement"
    assert Thought.objects.get(pk=thought.pk).access_count == 1


def test_a_tool_argument_is_one_path_segment_and_a_nul_in_it_is_refused_as_rest_refuses_it(
    asgi_server, agent_factory, space, thought_factory
):
    """A task ref or thought id with a "/" named another endpoint (task_get("fix-ci/transitions")
    answered the task's moves, thought_get("<id>/lineage") its lineage), and a NUL in a path or query
    argument reached PostgreSQL (500): tool calls run the views without REST's input guard."""
    dev = agent_factory("dev")
    make_task(make_project(space, "paths"), slug="fix-ci", status="ready", role="dev")
    thought = thought_factory("The nightly backup of the staging database runs at 02:00 UTC.")
    series = {"method": "GET", "endpoint": "api/v1/tasks/<str:id_or_slug>", "status": "404"}
    calls_before = sample(scrape(), "colony_mcp_call_duration_seconds_count", **series) or 0

    async def body(session):
        tools = Tools(session)
        return (
            await tools.raw("task_get", task="fix-ci/transitions"),
            await tools.raw("thought_get", thought_id=f"{thought.id}/lineage"),
            await tools.raw("task_get", task="fix\x00ci"),
            await tools.raw("thought_list", topic="backups\x00"),
            await tools.raw("task_get", task="fix-ci"),
        )

    (e1, task), (e2, lineage), (e3, nul_path), (e4, nul_query), (e5, found) = in_session(
        asgi_server.url, dev.token, body
    )
    assert e1 and task["status"] == 404 and task["error"]["code"] == "TASK_NOT_FOUND", task
    assert "fix-ci/transitions" in task["error"]["message"]
    assert e2 and lineage["status"] == 404 and lineage["error"]["code"] == "THOUGHT_NOT_FOUND", lineage
    for refused, field in ((nul_path, "path"), (nul_query, "topic")):
        assert refused["status"] == 400 and refused["error"]["code"] == "VALIDATION_ERROR", refused
        assert field in refused["error"]["fields"]
    assert e3 and e4
    assert not e5 and found["slug"] == "fix-ci"
    # Tool calls are in /metrics by the route they ran (they don't pass through the request middleware).
    assert sample(scrape(), "colony_mcp_call_duration_seconds_count", **series) == calls_before + 1


def run_outside_any_loop(coro):
    """asyncio.run in a fresh thread: the browser tests' Playwright (sync API) leaves an event loop
    running in the main thread, and asyncio.run refuses to start inside it."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def test_what_a_misconfigured_client_sends_is_answered_with_what_to_configure(asgi_server, agent_factory):
    """A client of the older HTTP+SSE transport GETs /mcp (or /sse) and waits for an "endpoint" event: the
    GET opened a stream that never carried anything, until the client's own timeout, and held a connection
    open for good; /sse was Django's HTML 404 and /mcp/sse the SDK's plain "Not Found". "/mcp/" was a 307
    that a client not following a POST's redirect (httpx's default) took as a failure. A POST without an
    Accept header (Python's urllib sends none; RFC 9110: any media type) was a 406."""
    dev = agent_factory("dev")
    headers = {"Authorization": f"Bearer {dev.token}", "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=10) as client:
        started = time.monotonic()
        stream = client.get("/mcp", headers={"Accept": "text/event-stream"})
        assert time.monotonic() - started < 5
        assert stream.status_code == 405 and stream.headers["allow"] == "POST"
        error = stream.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED" and 'transport "http"' in error["message"], error
        ended = client.delete("/mcp")
        assert ended.status_code == 405 and ended.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
        for path in ("/sse", "/messages/", "/mcp/sse", "/mcp/messages"):
            missing = client.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert missing.status_code == 404, (path, missing.text)
            error = missing.json()["error"]
            assert error["code"] == "NOT_FOUND" and error["message"].startswith(f"No MCP endpoint at {path}. "), error
            assert "POST each JSON-RPC message to /mcp" in error["message"]
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        answered = client.post("/mcp/", json=initialize)  # not followed: httpx follows no redirect by default
        assert answered.status_code == 200, answered.text
        assert answered.json()["result"]["serverInfo"]["name"]
    # No Accept header at all (Python's urllib sends none) means any media type: the SDK answered 406.
    request = urllib.request.Request(
        f"{asgi_server.url}/mcp",
        data=json.dumps(initialize).encode(),
        headers={"Authorization": f"Bearer {dev.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # raises on the old 406
        assert "Accept" not in request.headers and json.loads(response.read())["result"]["serverInfo"]["name"]

    async def with_slash():  # the SDK's own client, given the URL with a slash
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {dev.token}"}) as http:
            async with streamable_http_client(f"{asgi_server.url}/mcp/", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.list_tools()

    assert {tool.name for tool in run_outside_any_loop(with_slash()).tools} == EXPECTED_TOOLS
