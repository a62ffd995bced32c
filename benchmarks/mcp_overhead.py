"""What MCP adds to a search: ``memory_search`` over /mcp vs ``GET /api/v1/memory?contribute=false``.

    .venv/bin/python -m benchmarks.mcp_overhead [--requests 200] [--thoughts 2000] [--workers 1]

Seeds the ``colony_bench`` database (real embeddings, once), starts ``uvicorn config.asgi:application``
as a separate process on a free port, then times the same queries both ways from one client,
alternating REST and MCP call by call so both see the same machine load: REST over one keep-alive
httpx connection, MCP through the official SDK's Streamable HTTP client in one initialized session.
Prints p50/p95 per path and the difference. Client-side wall time per call, model warm.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

QUERIES = [
    "how do deploys run database migrations",
    "billing webhook retry policy and backoff",
    "who owns the on-call rotation this quarter",
    "why did the nightly import job fail",
    "state of the single sign-on rollout",
    "which cache settings does the API use in production",
    "decision on the message queue for notifications",
    "how are feature flags cleaned up after a release",
]


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(thoughts: int) -> tuple[str, str]:
    """(database url, agent token) of the seeded bench space."""
    from benchmarks import db

    url = db.setup()
    from benchmarks.seed import seed_thoughts
    from core import services
    from core.models import Agent

    space = services.space_get_or_create_default()
    seed_thoughts(space, thoughts)
    Agent.objects.filter(space=space, name="bench-mcp").delete()
    _, token = services.agent_create(name="bench-mcp", role="dev", space=space)
    return url, token


def start_server(database_url: str, workers: int) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING", "COLONY_BROKER": "filesystem"}
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--log-level", "warning", "--no-access-log", "--workers", str(workers)]
    server = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/api/v1/health", timeout=2)
            return server, base
        except httpx.HTTPError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("uvicorn did not answer within 120 s")


async def measure(base: str, token: str, requests: int) -> tuple[list[float], list[float]]:
    import httpx
    from mcp.client import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"}
    rest_times: list[float] = []
    mcp_times: list[float] = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as rest:
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

                    async def via_rest(query: str) -> None:
                        response = await rest.get("/api/v1/memory", params={"prompt": query, "contribute": "false"})
                        response.raise_for_status()

                    async def via_mcp(query: str) -> None:
                        result = await session.call_tool("memory_search", {"query": query})
                        if result.is_error:
                            raise SystemExit(f"memory_search failed: {result.content[0].text}")

                    for query in QUERIES:  # warm up: model, connections, caches
                        await via_rest(query)
                        await via_mcp(query)
                    for index in range(requests):
                        query = QUERIES[index % len(QUERIES)]
                        order = [(via_rest, rest_times), (via_mcp, mcp_times)]
                        if index % 2:
                            order.reverse()
                        for call, times in order:
                            started = time.perf_counter()
                            await call(query)
                            times.append((time.perf_counter() - started) * 1000)
    return rest_times, mcp_times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--thoughts", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args(argv)
    database_url, token = prepare(args.thoughts)
    server, base = start_server(database_url, args.workers)
    try:
        rest, mcp = asyncio.run(measure(base, token, args.requests))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"memory search, {args.requests} calls each, {args.thoughts} thoughts, uvicorn workers={args.workers}")
    print(f"{'path':<38} {'p50 ms':>8} {'p95 ms':>8}")
    for name, samples in (("REST GET /api/v1/memory?contribute=false", rest), ("MCP tools/call memory_search", mcp)):
        print(f"{name:<38} {percentile(samples, 0.5):8.1f} {percentile(samples, 0.95):8.1f}")
    p50 = percentile(mcp, 0.5) - percentile(rest, 0.5)
    p95 = percentile(mcp, 0.95) - percentile(rest, 0.95)
    print(f"{'MCP overhead':<38} {p50:+8.1f} {p95:+8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
