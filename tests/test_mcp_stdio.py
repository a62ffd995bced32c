"""contrib/colony_mcp_stdio.py: the stdio entry point, driven by the SDK's real stdio client."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sys
from pathlib import Path

import pytest
from django.conf import settings
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from brain.models import Thought
from tests.asgi_support import free_port

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
