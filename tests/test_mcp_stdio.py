"""contrib/colony_mcp_stdio.py: the stdio entry point, driven by the SDK's real stdio client."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import LATEST_PROTOCOL_VERSION

from brain.models import Thought
from tasks.models import Task
from tests.asgi_support import free_port, proxy_env, recording_proxy
from tests.concurrency_support import row_locked, wait_for_a_lock_wait
from tests.tasks_helpers import make_project, make_task

BRIDGE = Path(settings.BASE_DIR) / "contrib" / "colony_mcp_stdio.py"

pytestmark = pytest.mark.django_db(transaction=True)


def run_stdio(url: str, token: str, body):
    params = StdioServerParameters(
        command=sys.executable, args=[str(BRIDGE)], env={"COLONY_URL": url, "COLONY_TOKEN": token}
    )

    async def go():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

    return run_outside_any_loop(go())


def messages_of(exc: BaseException) -> str:
    """Every message inside an exception (group), nested groups included."""
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(messages_of(inner) for inner in exc.exceptions)
    return str(exc)


def test_stdio_client_lists_tools_and_contributes(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev", name="stdio-dev")

    async def body(session):
        tools = {tool.name for tool in (await session.list_tools()).tools}
        stored = await session.call_tool(
            "memory_contribute",
            {"content": "The stdio bridge posts every JSON-RPC message to Colony's /mcp endpoint unchanged."},
        )
        missing = await session.call_tool("thought_get", {"thought_id": "00000000-0000-0000-0000-000000000000"})
        return tools, json.loads(stored.content[0].text), missing

    tools, stored, missing = run_stdio(asgi_server.url, dev.token, body)
    assert {"memory_search", "task_transition", "in_flight"} <= tools
    thought = Thought.objects.get(id=stored["trace"]["thought_id"])
    assert thought.agent == dev.agent  # identity from the token, through the bridge
    assert missing.is_error
    assert json.loads(missing.content[0].text)["error"]["code"] == "THOUGHT_NOT_FOUND"


def test_stdio_reports_a_refused_token_as_an_error(asgi_server):
    async def body(session):  # pragma: no cover - initialize already fails
        return await session.list_tools()

    with pytest.raises(BaseException) as caught:
        run_stdio(asgi_server.url, "col_wrong", body)
    assert "Colony refused the call (HTTP 401): UNAUTHENTICATED" in messages_of(caught.value)


def test_stdio_reports_colony_down_as_an_error():
    async def body(session):  # pragma: no cover
        return await session.list_tools()

    with pytest.raises(BaseException) as caught:
        run_stdio(f"http://127.0.0.1:{free_port()}", "col_any", body)
    assert "Colony is unreachable at http://127.0.0.1:" in messages_of(caught.value)


def run_outside_any_loop(coro):
    """asyncio.run in a fresh thread: the browser tests' Playwright (sync API) leaves an event loop
    running in the main thread, and asyncio.run refuses to start inside it."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class RawBridge:
    """The bridge as a subprocess spoken to line by line (JSON-RPC without a client library)."""

    def __init__(self, url: str, token: str, *, extra_env: dict | None = None, utf8: bool = False):
        self.process = subprocess.Popen(
            [sys.executable, str(BRIDGE)],
            env={"COLONY_URL": url, "COLONY_TOKEN": token, "PATH": "/usr/bin:/bin", **(extra_env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8" if utf8 else None,
        )
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.answers.put(json.loads(line))

    def send(self, message) -> None:
        self.process.stdin.write(
            (message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)) + "\n"
        )
        self.process.stdin.flush()

    def initialize(self) -> dict:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            }
        )
        answer = self.answer()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, request_id, tool: str, **arguments) -> None:
        params = {"name": tool, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def answer(self, timeout: float = 30) -> dict:
        return self.answers.get(timeout=timeout)

    def close(self) -> str:
        """Close stdin (the client went away); the bridge's stderr once it has exited."""
        self.process.stdin.close()
        self.process.wait(30)
        return self.process.stderr.read()


def test_stdio_skips_lines_that_are_not_messages_and_keeps_answering(asgi_server, agent_factory):
    """A line that is JSON but not a JSON-RPC object (a number, a list of strings) ended the bridge with
    a traceback (AttributeError: 'int' object has no attribute 'get'); the agent lost Colony."""
    dev = agent_factory("dev")
    bridge = RawBridge(asgi_server.url, dev.token)
    for junk in ("5", '[1, "x"]', "not json", "null", "[" * 5000 + "]" * 5000):  # the last: RecursionError
        bridge.send(junk)
    assert bridge.initialize()["id"] == "init"
    bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = bridge.answer()
    stderr = bridge.close()
    assert listed["id"] == 2 and {"memory_search", "in_flight"} <= {t["name"] for t in listed["result"]["tools"]}
    assert bridge.process.returncode == 0
    assert "not a JSON-RPC message (an object), ignored: 5" in stderr and "not JSON, ignored: not json" in stderr
    assert "not JSON, ignored: [[[[" in stderr
    assert "Traceback" not in stderr


def test_stdio_relays_a_call_while_another_is_still_waiting(asgi_server, agent_factory, space):
    """Messages were posted one after another: an agent's second tool call (or a cancellation) waited
    until its first, blocked on the database, returned. Answers now come back as they are ready, and
    what is in flight when stdin ends is still answered."""
    dev = agent_factory("dev")
    make_task(make_project(space, "stdio"), slug="slow-task", status="ready", role="dev")
    bridge = RawBridge(asgi_server.url, dev.token)
    bridge.initialize()
    with row_locked(Task.objects.filter(slug="slow-task")):
        bridge.call("dna", "task_update_dna", task="slow-task", dna={"pdsa_ref": "docs/stdio.md"})
        wait_for_a_lock_wait()
        bridge.call("list", "task_list")
        try:
            first = bridge.answer()
        except queue.Empty:
            pytest.fail("task_list was not answered while task_update_dna waited")
        bridge.process.stdin.close()  # the client leaves with the DNA update in flight
    last = bridge.answer()
    bridge.process.wait(30)
    assert first["id"] == "list" and not first["result"].get("isError")
    assert [t["slug"] for t in json.loads(first["result"]["content"][0]["text"])["results"]] == ["slow-task"]
    assert last["id"] == "dna" and not last["result"].get("isError"), last
    assert Task.objects.get(slug="slow-task").dna["pdsa_ref"] == "docs/stdio.md"
    assert bridge.process.returncode == 0


def test_an_event_stream_answer_holding_a_line_separator_is_one_message():
    """SSE ends lines at CR, LF or CRLF only: a U+2028 in a thought's text broke the data line in two."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("colony_mcp_stdio", BRIDGE)
    bridge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bridge)
    first = {"jsonrpc": "2.0", "id": 1, "result": {"text": "runbook\u2028step two\u0085three"}}
    second = {"jsonrpc": "2.0", "id": 2, "result": {}}
    body = f"event: message\r\ndata: {json.dumps(first, ensure_ascii=False)}\r\n\r\ndata: {json.dumps(second)}\n\n"
    assert bridge.parse_sse(body) == [first, second]


def test_a_non_ascii_thought_survives_a_windows_code_page(asgi_server, agent_factory, fake_embedder):
    """On Windows the bridge's text stdin and stdout use the ANSI code page (cp1252; PYTHONIOENCODING stands
    in for it): a contribution in Cyrillic arrived mangled, and an answer holding CJK could not be written."""
    dev = agent_factory("dev")
    content = "Миграции CI требуют расширение vector в тестовой базе; 迁移需要先在测试数据库里创建向量扩展。"
    bridge = RawBridge(asgi_server.url, dev.token, extra_env={"PYTHONIOENCODING": "cp1252"}, utf8=True)
    assert bridge.initialize()["id"] == "init"
    bridge.call(2, "memory_contribute", content=content, thought_category="operational_learning", topic="ci")
    answer = bridge.answer()
    assert not answer["result"].get("isError"), answer
    bridge.call(3, "thought_list", limit=5)
    listed = json.loads(bridge.answer()["result"]["content"][0]["text"])
    stderr = bridge.close()
    assert content in [row["content"] for row in listed["results"]]
    assert Thought.objects.get(content=content)
    assert "Traceback" not in stderr


def test_a_proxy_in_the_environment_does_not_cut_off_a_local_colony(asgi_server, agent_factory):
    """With HTTP_PROXY set (an agent sandbox, a company machine) and no NO_PROXY, urllib sent the bridge's
    posts to 127.0.0.1 through the proxy, which can't reach the agent's machine: every tool call failed."""
    dev = agent_factory("dev")
    with recording_proxy() as (proxy_url, seen):
        bridge = RawBridge(asgi_server.url, dev.token, extra_env=proxy_env(proxy_url))
        initialized = bridge.initialize()
        bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = bridge.answer()
        bridge.close()
    assert "result" in initialized, initialized
    assert "memory_search" in {t["name"] for t in listed["result"]["tools"]}
    assert seen == []


def test_a_number_past_floats_range_in_a_tool_argument_is_refused_by_its_field(asgi_server, agent_factory, space):
    """An agent's 1e400 (or NaN) inside a free-form argument (DNA, metadata) reached REST as Infinity and came
    back as a parse error naming nothing ("Out of range float values are not JSON compliant: 'Infinity'");
    now as REST answers the same body, by field, and the task is unchanged."""
    dev = agent_factory("dev")
    task = make_task(make_project(space, "floats"), slug="fix-ci", status="ready", role="dev")
    bridge = RawBridge(asgi_server.url, dev.token)
    assert bridge.initialize()["id"] == "init"
    bridge.send(
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "task_update_dna", '
        '"arguments": {"task": "fix-ci", "dna": {"estimate": {"hours": 1e400}, "note": "x"}}}}'
    )
    answer = bridge.answer()
    bridge.close()
    refused = json.loads(answer["result"]["content"][0]["text"])
    assert answer["result"]["isError"] and refused["status"] == 400, refused
    assert refused["error"]["code"] == "VALIDATION_ERROR", refused
    assert list(refused["error"]["fields"]) == ["estimate.hours"], refused
    task.refresh_from_db()
    assert "note" not in task.dna


def test_a_colony_url_without_a_scheme_is_read_as_http(asgi_server, agent_factory):
    """COLONY_URL=localhost:8000 (as curl takes it): urllib refused it as an "unknown url type" and every
    call failed."""
    dev = agent_factory("dev")
    bridge = RawBridge(asgi_server.url.removeprefix("http://").replace("127.0.0.1", "localhost"), dev.token)
    initialized = bridge.initialize()
    bridge.close()
    assert "result" in initialized, initialized


def test_a_token_read_with_its_line_end_works_and_a_broken_one_is_never_echoed(asgi_server, agent_factory):
    """COLONY_TOKEN from a file with CRLF line ends kept its "\\r": every call failed, and the error the agent
    got quoted the whole token ("Invalid header value b'Bearer col_...'")."""
    dev = agent_factory("dev")
    bridge = RawBridge(asgi_server.url, dev.token + "\r\n")
    assert "result" in bridge.initialize()
    bridge.close()
    broken = dev.token[:10] + "\n" + dev.token[10:]
    bridge = RawBridge(asgi_server.url, broken)
    stderr = bridge.close()
    assert bridge.process.returncode == 2
    assert stderr.startswith("colony-mcp-stdio: COLONY_TOKEN is not one token: it holds a space, "), stderr
    assert dev.token[10:] not in stderr and dev.token[:10] not in stderr


def test_a_colony_that_does_not_answer_in_time_is_not_called_unreachable():
    """A tool call that Colony took but did not answer within COLONY_MCP_TIMEOUT was reported as "Colony is
    unreachable ... (timed out). Check COLONY_URL", which sends the user to the wrong fix."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        bridge = RawBridge(url, "col_x", extra_env={"COLONY_MCP_TIMEOUT": "1"})
        bridge.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        answer = bridge.answer()
        bridge.close()
    assert answer["error"]["message"] == (
        f"Colony did not answer within 1s at {url}/mcp. Retry, or raise COLONY_MCP_TIMEOUT."
    )
