"""Attacks on the MCP server's own layer (``colony_mcp``): what a tool call goes through before and after
it runs REST's view, and the JSON-RPC transport around it. Driven by the official MCP client (and raw
JSON-RPC over HTTP where the client can't send the message) against the production ASGI application.

A tool is REST's operation (SPEC 5: "the same operations as MCP tools ... tool errors carry REST's codes");
so whatever REST holds for a request, the tool must hold for the same call: the per-token throttle, the
bounded work of a refusal, the text taken as sent, an answer that says when nothing was done. Each test
names the attack, what happens, and what holds instead.
"""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from brain.models import Thought
from tasks.models import Task
from tests.tasks_helpers import make_project, make_task
from tests.test_mcp_server import Tools, in_session

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The staging mail relay rejects messages larger than ten megabytes since the upgrade."
JSONRPC_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def raw_post(url: str, token: str, payload: str | bytes) -> httpx.Response:
    """One JSON-RPC POST to /mcp with ``payload`` as its body, byte for byte (what the SDK's client would
    never write: NaN, a batch, a message that is not an object)."""
    body = payload.encode() if isinstance(payload, str) else payload
    return httpx.post(
        f"{url}/mcp", content=body, headers={**JSONRPC_HEADERS, "Authorization": f"Bearer {token}"}, timeout=30
    )


def tool_call(name: str, arguments: str) -> str:
    """A tools/call request whose arguments are the JSON text ``arguments``, as written."""
    head = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}})
    return head[:-2] + f', "arguments": {arguments}}}}}'


def tool_answer(response: httpx.Response) -> tuple[bool, dict]:
    """(isError, the decoded text) of a tools/call answered over raw HTTP."""
    assert response.status_code == 200, response.text[:500]
    result = response.json()["result"]
    return result.get("isError", False), json.loads(result["content"][0]["text"])


# --- refusals before the view runs -------------------------------------------------------------------


def test_a_tool_call_refused_for_its_arguments_counts_against_the_throttle(asgi_server, agent_factory, settings):
    """Attack: an agent sends tool calls that ``ColonyMCPServer.call_tool`` refuses before REST's view runs
    (an unknown argument; pydantic's type checks take the same path). REST counts every request of a token,
    a malformed one too: ``POST /api/v1/memory`` with an unknown field answers 400, 400, 400, then 429 at
    3/min. The tool's refusal returns before the view, so the throttle never sees it: six such calls at
    3/min are six 400s, and the refusal is work the server does on its event loop (see the next test), as
    often as the agent likes. Expected: the throttle counts them as REST does; past the rate the call is
    429 THROTTLED."""
    settings.API_THROTTLE_RATE = "3/min"
    dev = agent_factory("dev")

    async def body(session):
        tools = Tools(session)
        return [await tools.raw("task_get", task="fix-ci", tsk="fix-ci") for _ in range(5)]

    answers = in_session(asgi_server.url, dev.token, body)
    statuses = [answer["status"] for _, answer in answers]
    assert statuses[-1] == 429, statuses
    assert answers[-1][1]["error"]["code"] == "THROTTLED"


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
    ],
    ids=["ping", "tools/list", "initialize"],
)  # fmt: skip
def test_messages_that_are_not_tool_calls_count_against_the_throttle(asgi_server, agent_factory, settings, message):
    """Attack: an agent sends ``ping``, ``tools/list`` or ``initialize`` in a loop. Each is a POST with a token
    lookup in the database and (tools/list) a schema of every tool built and sent back, yet no throttle
    sees it, since only a tool call runs a REST view: without the rule, 8 pings at 3/min are 8 answers,
    and the loop runs as fast as the agent sends. Instead: every message to /mcp counts against the
    token's rate as a REST request does; past it the POST is REST's 429 THROTTLED with Retry-After."""
    settings.API_THROTTLE_RATE = "3/min"
    dev = agent_factory("dev")
    answers = [raw_post(asgi_server.url, dev.token, json.dumps(message)) for _ in range(8)]
    statuses = [answer.status_code for answer in answers]
    assert statuses[:3] == [200, 200, 200] and statuses[-1] == 429, statuses
    assert answers[-1].json()["error"]["code"] == "THROTTLED"
    assert int(answers[-1].headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    "params",
    [{}, {"name": 5}, {"arguments": {}}, {"name": "memory_search", "arguments": 5}, None],
    ids=["empty", "name-not-text", "no-name", "arguments-not-an-object", "no-params"],
)
def test_a_tool_call_the_sdk_refuses_counts_against_the_throttle(asgi_server, agent_factory, settings, params):
    """Attack: tools/call messages whose params the SDK refuses before any tool runs (no tool name, a name
    that is not text, arguments that are not an object). The door left tools/call to the REST view to
    count, and no view ran: without the rule, 6 such calls at 3/min are 6 answers, as fast as the agent
    sends them. Instead: a tools/call that won't reach a tool is counted at the door like any message."""
    settings.API_THROTTLE_RATE = "3/min"
    dev = agent_factory("dev")
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", **({"params": params} if params is not None else {})}
    answers = [raw_post(asgi_server.url, dev.token, json.dumps(message)) for _ in range(6)]
    assert answers[-1].status_code == 429, [answer.status_code for answer in answers]
    assert answers[-1].json()["error"]["code"] == "THROTTLED"


def test_a_tool_call_counts_once_against_the_throttle(asgi_server, agent_factory, settings, fake_embedder):
    """Rule: a tool call is counted once, by its REST view (the door's count skips tools/call): at 3/min
    an agent makes three searches, as it makes three REST requests, and the fourth is THROTTLED."""
    settings.API_THROTTLE_RATE = "3/min"
    dev = agent_factory("dev")
    call = tool_call("memory_search", '{"query": "mail relay"}')
    answers = [raw_post(asgi_server.url, dev.token, call) for _ in range(4)]
    outcomes = [tool_answer(answer) for answer in answers]
    assert [error for error, _ in outcomes[:3]] == [False] * 3, outcomes
    assert outcomes[3][1]["error"]["code"] == "THROTTLED", outcomes[3]


def test_thousands_of_unknown_arguments_are_refused_without_a_hint_computed_for_each(
    asgi_server, agent_factory, monkeypatch
):
    """Attack: one tools/call with ~5,000 unknown arguments (``{"zz0": 1, "zz1": 1, ...}``, 50 KB; the body
    limit lets ~20,000 through). ``colony_mcp.server._arguments_refused`` asks ``api.errors.name_hint``
    (difflib against every argument name) for each unknown key, on the server's event loop, where nothing
    else of that worker runs meanwhile; the answer then shows only a few of them. A 256 KB call of such
    keys costs 0.5-0.9 s of CPU; eight at once held another agent's ``GET /api/v1/tasks`` for 2.8 s
    (0.2 s alone). REST's serializer hints only the first ``UNKNOWN_NAMED`` (5) keys and counts the rest.
    Expected: the same bound, a handful of look-ups however many keys the call names, and a short answer."""
    from api import errors

    dev = agent_factory("dev")
    looked_up: list[str] = []
    meant = errors.meant

    def counting(value, names, **how):
        looked_up.append(value)
        return meant(value, names, **how)

    monkeypatch.setattr(errors, "meant", counting)
    arguments = {f"zz{i}": 1 for i in range(5000)} | {"task": "fix-ci"}
    is_error, answer = tool_answer(raw_post(asgi_server.url, dev.token, tool_call("task_get", json.dumps(arguments))))
    assert is_error and answer["error"]["code"] == "VALIDATION_ERROR", answer
    assert len(looked_up) <= 20, f"{len(looked_up)} look-ups for one refusal"


# --- arguments taken as sent -------------------------------------------------------------------------


def test_an_idempotency_key_spelt_null_protects_a_retry_as_any_other_key(asgi_server, agent_factory, fake_embedder):
    """Attack (or an unlucky agent): ``memory_contribute(..., idempotency_key="null")``. The SDK re-reads
    every string argument of an optional parameter as JSON (``func_metadata.pre_parse_json``), so the
    key "null" (visible ASCII, the schema's pattern) becomes None and the call goes out without its key:
    a retry with other content is stored a second time instead of being refused, and nothing says the key
    was dropped. REST takes ``Idempotency-Key: null`` as the key it is. Expected: the second call with the
    same key and other content is 409 IDEMPOTENCY_KEY_REUSED and one thought is stored."""
    dev = agent_factory("dev")

    async def body(session):
        tools = Tools(session)
        first = await tools.raw("memory_contribute", content=FACT, idempotency_key="null")
        second = await tools.raw("memory_contribute", content=FACT + " Checked again.", idempotency_key="null")
        return first, second

    (first_error, _), (second_error, second) = in_session(asgi_server.url, dev.token, body)
    assert not first_error
    assert second_error and second["error"]["code"] == "IDEMPOTENCY_KEY_REUSED", second
    assert Thought.objects.filter(agent=dev.agent).count() == 1


def test_a_text_argument_that_reads_as_json_is_taken_as_the_text(asgi_server, agent_factory, fake_embedder, space):
    """Attack: text arguments whose text happens to be JSON: ``topic="null"``, ``alternatives_considered=
    '["Redis", "RabbitMQ"]'``, a transition ``summary='{"retries": 3}'``. The SDK parses such a string of an
    optional parameter as JSON before validation: "null" is silently dropped (the thought is stored without
    its topic; ``filter_topic="null"`` searches the whole space), and an array or object is refused as
    "Input should be a valid string" though REST stores the same text. Expected: a text argument is the
    text sent, as on REST: the topic is "null", the alternatives and the summary are accepted."""
    dev = agent_factory("dev")
    make_task(make_project(space, "queue"), slug="queue-store", status="ready", role="dev")

    async def body(session):
        tools = Tools(session)
        topic = await tools.raw(
            "memory_contribute", content="The billing export job runs nightly at two in the morning UTC.", topic="null"
        )
        alternatives = await tools.raw(
            "memory_contribute",
            content="Decision: the queue store is PostgreSQL, chosen over a separate broker to keep one database.",
            alternatives_considered='["Redis", "RabbitMQ"]',
        )
        transition = await tools.raw("task_transition", task="queue-store", to="active", summary='{"retries": 3}')
        return topic, alternatives, transition

    (topic_error, topic), (alt_error, alternatives), (_, summary) = in_session(asgi_server.url, dev.token, body)
    assert not topic_error, topic
    assert Thought.objects.get(id=topic["trace"]["thought_id"]).topic == "null"
    assert not alt_error, alternatives
    # The claim itself is refused by the workflow (409: no memory_query_session); not the summary, as a type.
    assert summary.get("status") != 400 and "summary" not in summary["error"].get("fields", {}), summary


# --- an answer that says when nothing was done --------------------------------------------------------


def test_a_tool_call_the_server_redirects_to_https_is_not_answered_as_a_success(
    asgi_server, agent_factory, fake_embedder, settings
):
    """Attack/misconfiguration: production runs with ``SECURE_SSL_REDIRECT=true`` (docs/operations.md) and an
    agent reaches ``/mcp`` over plain http (the web port directly, or a proxy that sets no
    X-Forwarded-Proto). REST answers such a request with a 301 to https. A tool call runs REST's view
    through the same middleware, gets that 301 with an empty body, and ``colony_mcp.rest.RestResult.ok``
    (status < 400) makes it a success: ``memory_contribute`` answers the text "null" with isError false and
    stores nothing; a transition or a DNA update would be "done" the same way. Expected: a call that did
    nothing is an error result (or the request is refused); never a silent success."""
    from colony_mcp import rest

    dev = agent_factory("dev")
    settings.SECURE_SSL_REDIRECT = True
    rest._handler_for.cache_clear()  # the tool calls' handler reads the setting when it is built

    async def body(session):
        result = await session.call_tool("memory_contribute", {"content": FACT})
        return result.is_error, result.content[0].text

    try:
        try:
            is_error, text = in_session(asgi_server.url, dev.token, body)
        except Exception:  # noqa: BLE001 - the transport refusing the call is a safe answer too
            is_error, text = True, ""
    finally:
        settings.SECURE_SSL_REDIRECT = False
        rest._handler_for.cache_clear()
    stored = Thought.objects.filter(agent=dev.agent).exists()
    assert is_error or stored, f"answered {text!r} as a success; stored: {stored}"


# --- the JSON-RPC transport ----------------------------------------------------------------------------


def test_an_unknown_prompt_is_a_plain_json_rpc_error_not_a_logged_traceback(asgi_server, agent_factory, caplog):
    """Attack: any agent sends ``prompts/get`` for a prompt that does not exist (Colony has none). The SDK's
    handler raises ValueError: the server logs an ERROR with its traceback
    (``mcp.shared.jsonrpc_dispatcher``: "handler for 'prompts/get' raised") and answers code 0. Such calls
    are not tool calls, so no throttle counts them: one agent fills the error log (and any alert on it) as
    fast as it can post. ``resources/read`` of an unknown URI already answers -32602 without a log.
    Expected: the same here: a JSON-RPC error with a standard code (-32602, invalid params) and no ERROR."""
    dev = agent_factory("dev")
    caplog.set_level(logging.INFO)
    response = raw_post(
        asgi_server.url, dev.token, '{"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "x"}}'
    )
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32602, error
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    "payload",
    [
        '[{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "task_list", "arguments": {}}}]',
        '"tools/list"',
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "task_list"}',
        '{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
    ],
    ids=["batch", "not-an-object", "params-not-an-object", "not-json-rpc-2"],
)
def test_a_message_that_is_not_one_json_rpc_object_gets_a_plain_error(asgi_server, agent_factory, payload):
    """Attack: a JSON-RPC batch (an array of requests, as the 2025-03-26 transport allowed) or a bare string
    POSTed to /mcp. The answer is 400 with code -32602 and pydantic's internals as the message: "4
    validation errors for union[JSONRPCRequest,JSONRPCNotification,JSONRPCResponse,JSONRPCError]", the
    input echoed per variant, and four "For further information visit https://errors.pydantic.dev/2.14/..."
    links (1.2 KB, naming the library and its version). SPEC 2.2 and 5: errors say in plain words what to
    change. Expected: a JSON-RPC Invalid Request (-32600) that says to send one message object per POST,
    without pydantic's text."""
    dev = agent_factory("dev")
    response = raw_post(asgi_server.url, dev.token, payload)
    assert response.status_code in (200, 400), response.text[:300]
    error = response.json()["error"]
    assert error["code"] == -32600, error
    assert "pydantic" not in response.text and "validation errors for" not in response.text, response.text[:500]


# --- what holds, kept as guards ------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        '{"query": "deploy", "min_relevance": NaN}',
        '{"query": "deploy", "min_relevance": Infinity}',
        '{"query": "deploy", "min_relevance": 1e400}',
        '{"query": "deploy", "min_relevance": -0.5}',
        '{"query": "deploy", "limit": -1}',
        '{"query": "deploy", "limit": 1000000000000000000000}',
        '{"query": {"text": "deploy"}}',
        '{"query": ["deploy"]}',
    ],
    ids=["nan", "infinity", "1e400", "negative-relevance", "negative-limit", "huge-limit", "object", "list"],
)
def test_memory_search_arguments_of_the_wrong_kind_are_a_validation_error(asgi_server, agent_factory, arguments):
    """Holds. Attack: ``memory_search`` with a relevance that is not a number in [0, 1] (NaN, Infinity
    and 1e400 written as the JSON the SDK's client never sends), a limit out of 1-50, or a query that is
    not a string. Each is a tool error in REST's envelope (400 VALIDATION_ERROR naming the argument), no
    search is run and nothing is logged."""
    from brain.models import QueryLog

    dev = agent_factory("dev")
    is_error, answer = tool_answer(raw_post(asgi_server.url, dev.token, tool_call("memory_search", arguments)))
    assert is_error and (answer["status"], answer["error"]["code"]) == (400, "VALIDATION_ERROR"), answer
    assert not QueryLog.objects.exists()


@pytest.mark.parametrize(
    "key",
    [" human_approved", "Human_approved", "human_approved\u200b", "\uff48uman_approved", "HUMAN_CONFIRMED_BY"],
    ids=["leading-space", "capital", "zero-width", "fullwidth", "upper-case"],
)
def test_task_update_dna_refuses_look_alikes_of_human_keys_as_rest_does(asgi_server, agent_factory, space, key):
    """Holds. Attack: ``task_update_dna`` with a key a human reads as a human-only key (a leading space,
    another case, a zero-width space, a fullwidth letter). The tool runs REST's PATCH, which reads each key
    as shown (``tasks.services.tasks._reads_as``): 400 PROTECTED_DNA_KEY and the DNA unchanged."""
    dev = agent_factory("dev")
    make_task(make_project(space, "gates"), slug="gated", status="ready", role="dev")

    async def body(session):
        return await Tools(session).raw("task_update_dna", task="gated", dna={key: True})

    is_error, answer = in_session(asgi_server.url, dev.token, body)
    assert is_error and answer["error"]["code"] == "PROTECTED_DNA_KEY", answer
    assert Task.objects.get(slug="gated").dna == {}


def test_no_tool_acts_on_another_spaces_thoughts_or_tasks_or_another_agents_session(
    asgi_server, agent_factory, other_space, space, thought_factory, fake_embedder
):
    """Holds. Attack: an agent of another space names this space's thought ids and task slug in every
    tool that takes one beyond those ``tests/test_mcp_server.py`` covers (lineage, retract, refines,
    consolidates, related_thoughts, moves, transition, DNA), and an agent of this space reports a turn in
    a session another agent opened. Each is refused (404 for what is not in the caller's space, 403
    SESSION_NOT_YOURS for the session) and nothing changes."""
    first = thought_factory("The staging database is restored from the nightly snapshot at 03:00 UTC every day.")
    second = thought_factory("The staging database snapshot is kept for fourteen days before it is deleted.")
    make_task(make_project(space, "home"), slug="home-task", status="ready", role="dev")
    outsider = agent_factory("dev", name="outsider", in_space=other_space)
    ids = [str(first.id), str(second.id)]
    statement = "The staging database is restored from the nightly snapshot at 05:00 UTC since the move."

    async def outsider_body(session):
        tools = Tools(session)
        return [
            await tools.raw("thought_lineage", thought_id=ids[0]),
            await tools.raw("thought_retract", thought_id=ids[0], reason="not mine"),
            await tools.raw("memory_contribute", content=statement, refines=ids[0]),
            await tools.raw("memory_contribute", content=statement, consolidates=ids),
            await tools.raw("memory_contribute", content=statement, related_thoughts=ids),
            await tools.raw("task_moves", task="home-task"),
            await tools.raw("task_transition", task="home-task", to="active"),
            await tools.raw("task_update_dna", task="home-task", dna={"pdsa_ref": "x"}),
        ]

    answers = in_session(asgi_server.url, outsider.token, outsider_body)
    assert all(is_error and answer["status"] == 404 for is_error, answer in answers), answers
    assert not Thought.objects.filter(space=other_space).exists()
    first.refresh_from_db()
    assert not first.superseded and not first.related_thoughts.exists()
    task = Task.objects.get(slug="home-task")
    assert (task.status, task.dna) == ("ready", {})

    owner, intruder = agent_factory("dev", name="owner"), agent_factory("qa", name="intruder")

    async def owner_body(session):
        return (await Tools(session).call("memory_search", query="staging database snapshot"))["trace"]["session_id"]

    session_id = in_session(asgi_server.url, owner.token, owner_body)

    async def intruder_body(session):
        return await Tools(session).raw(
            "turn_log",
            session_id=session_id,
            turn_id="t1",
            user_prompt="restore time?",
            assistant_response="05:00",
            contradicted_ids=[ids[0]],
        )

    is_error, answer = in_session(asgi_server.url, intruder.token, intruder_body)
    assert is_error and (answer["status"], answer["error"]["code"]) == (403, "SESSION_NOT_YOURS"), answer
