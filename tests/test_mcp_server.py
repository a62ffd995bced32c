"""The MCP server at /mcp, driven by the official SDK's Streamable HTTP client against a live server."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.asgi_support import asgi_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


async def _session_run(url: str, token: str | None, body):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def mcp_run(url, token, body):
    return asyncio.run(_session_run(url, token, body))


def test_smoke(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev")

    async def body(session):
        tools = await session.list_tools()
        result = await session.call_tool("memory_search", {"query": "how do deploys work?"})
        return tools, result

    tools, result = mcp_run(asgi_server.url, dev.token, body)
    print([t.name for t in tools.tools])
    print(result)
