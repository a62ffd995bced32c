"""Colony's ASGI application: ``/mcp`` goes to the MCP server, everything else to Django.

Choices, and why:
- **Stateless Streamable HTTP with JSON responses.** Every POST to ``/mcp`` is answered on its
  own, with no server-side session, so any worker process of ``config.asgi`` (gunicorn/uvicorn
  workers, several machines behind a proxy) can answer any request with no sticky sessions, and a
  restarted worker loses nothing. Colony's tools are request/response calls; they never need to
  push to the client, which is what server-side sessions and SSE streams would be for.
- **The session manager's lifespan** is entered from the ASGI ``lifespan`` protocol (uvicorn,
  gunicorn's uvicorn workers and granian all send it, once per worker process). A server that
  does not send it still works: the first ``/mcp`` request starts the manager in the background.
- **Authentication exactly as REST**: ``Authorization: Bearer <token>`` is looked up with the same
  service (``core.services.token_lookup``); a missing, unknown or revoked token is a 401 in the
  error envelope before any MCP message is read. Each tool call then runs the REST view with the
  same header, so identity, role and space come from the token on every call. URL tokens
  (``?token=``) only answer ``GET /api/v1/memory`` and are refused here.
- **Host check** with Django's own ``ALLOWED_HOSTS`` (instead of the SDK's localhost-only default),
  so ``/mcp`` is reachable under the same names as the rest of Colony and nowhere else.
- **Tool calls run in the worker's pool of request threads** (the WSGI bridge's, ``WEB_THREADS``;
  ``config.asgi.make_application`` passes it),
  as REST requests do, so calls of several agents run side by side and the pool bounds them all.
  asgiref's thread-sensitive mode would run every call of the process on one thread: while one
  agent's call waited on the database (a locked row, a database that doesn't answer), every other
  agent's call, its token lookup included, waited behind it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import Executor
from urllib.parse import parse_qs

from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from api.errors import asgi_json_send, database_outage_response, error_body, throttled_answer
from colony_mcp.server import mcp

logger = logging.getLogger("colony.mcp")

MCP_PATH = "/mcp"
AUTH_HEADER = 'Bearer realm="colony"'
#: Where clients configured for MCP's older HTTP+SSE transport look (FastMCP's defaults), and sub-paths
#: of /mcp (``/mcp/sse``, ``/mcp/messages``): answered with a 404 that says what to configure, where
#: they got Django's HTML page or the SDK's plain "Not Found".
LEGACY_PATHS = ("/sse", "/sse/", "/messages", "/messages/")
TRANSPORT_HINT = (
    "Colony serves MCP at /mcp over Streamable HTTP, stateless: POST each JSON-RPC message to /mcp and the "
    "answer is JSON. It has no SSE stream and not the older HTTP+SSE transport: configure the client with "
    'transport "http" and the URL <colony>/mcp (Claude Code: claude mcp add --transport http colony '
    "http://127.0.0.1:8000/mcp --header 'Authorization: Bearer <token>'; docs/agents.md)."
)


def _lookup_agent(raw_token: str) -> tuple[dict, object] | None:
    """(the agent the tools run as, its token row), or None for an unknown, revoked or inactive token."""
    from core import services

    close_old_connections()
    try:
        token = services.token_lookup(raw_token=raw_token)
        if token is None or not token.agent.active:
            return None
        agent = token.agent
        return {"id": str(agent.id), "name": agent.name, "role": agent.role, "space": agent.space.slug}, token
    finally:
        close_old_connections()


def _count_request(token) -> float:
    """One request of ``token`` through the per-token throttle: 0.0 when allowed, else the seconds to wait."""
    from core.throttling import token_request_count

    close_old_connections()
    try:
        return token_request_count(token)
    finally:
        close_old_connections()


def _failure(exc: Exception) -> tuple[int, dict, list[tuple[bytes, bytes]]]:
    """The answer to a failed token lookup: 503 + Retry-After when the database is down or busy (what
    REST answers, ``api.errors.database_outage_response``), else a logged 500; both in the envelope.
    Synchronous (it may look at the connection pool): run it in the executor."""
    outage = database_outage_response(None, exc)
    if outage is None:
        logger.error("MCP token lookup failed", exc_info=exc)
        message = "Something went wrong on the server; it has been logged. Try again."
        return 500, error_body("INTERNAL_ERROR", message), []
    return outage.status_code, json.loads(outage.content), [(b"retry-after", outage["Retry-After"].encode())]


class McpEndpoint:
    """``/mcp``: host check, bearer authentication, then the SDK's Streamable HTTP app."""

    def __init__(self, executor: Executor) -> None:
        #: Where token lookups and tool calls (synchronous Django code) run: the web worker's pool of
        #: request threads (config.asgi.make_application).
        self.executor = executor
        # The SDK's DNS-rebinding check is replaced by Django's ALLOWED_HOSTS check in __call__.
        self.app = mcp.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.session_manager = mcp.session_manager
        self._running = asyncio.Event()
        self._stop = asyncio.Event()
        self._start_lock: asyncio.Lock | None = None
        self._background: asyncio.Task | None = None

    # --- lifespan ----------------------------------------------------------------------------------
    async def serve_lifespan(self, receive, send) -> None:
        """The ASGI lifespan protocol: run the session manager from startup to shutdown."""
        message = await receive()
        if message["type"] != "lifespan.startup":  # pragma: no cover - protocol violation
            return
        try:
            async with self.session_manager.run():
                self._running.set()
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:  # pragma: no cover - startup failure is reported to the server
            logger.exception("MCP session manager failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        finally:
            self._running.clear()
        await send({"type": "lifespan.shutdown.complete"})

    async def _ensure_running(self) -> None:
        """For servers that never send lifespan: start the manager once, in the background."""
        if self._running.is_set():
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._running.is_set():
                return

            async def run() -> None:
                async with self.session_manager.run():
                    self._running.set()
                    await self._stop.wait()

            self._background = asyncio.create_task(run())
            await self._running.wait()

    # --- requests ----------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["method"] != "POST":
            # A GET opened an SSE stream that, stateless, never carries anything: a client of the older
            # HTTP+SSE transport waited on it for an "endpoint" event until its own timeout, and each
            # such stream held a connection open for good. The transport allows a 405 for GET and DELETE.
            stateless = "there is no session to end (the endpoint is stateless)"
            why = stateless if scope["method"] == "DELETE" else TRANSPORT_HINT
            body = error_body("METHOD_NOT_ALLOWED", f"{scope['method']} is not served at /mcp: {why}")
            await asgi_json_send(send, 405, body, [(b"allow", b"POST")])
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        domain, port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await asgi_json_send(
                send, 400, error_body("BAD_HOST", "Host not allowed; add it to ALLOWED_HOSTS to serve /mcp under it.")
            )
            return
        if "token" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            await asgi_json_send(
                send,
                403,
                error_body(
                    "URL_TOKEN_NOT_ALLOWED",
                    "A URL token only answers GET /api/v1/memory. Use 'Authorization: Bearer <agent token>' for /mcp.",
                ),
            )
            return
        if sum(1 for key, _ in scope["headers"] if key.lower() == b"authorization") > 1:
            # One identity per request: the check and the tool call must read the same header.
            await asgi_json_send(send, 400, error_body("BAD_REQUEST", "Send one Authorization header, not several."))
            return
        parts = headers.get("authorization", "").split()
        if len(parts) != 2 or parts[0].lower() != "bearer":
            await asgi_json_send(
                send,
                401,
                error_body("UNAUTHENTICATED", "Authentication required: send 'Authorization: Bearer <token>'."),
                [(b"www-authenticate", AUTH_HEADER.encode())],
            )
            return
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self.executor, _lookup_agent, parts[1])
        except Exception as exc:  # noqa: BLE001 - answered in the envelope, as REST answers it
            await asgi_json_send(send, *(await loop.run_in_executor(self.executor, _failure, exc)))
            return
        if found is None:
            await asgi_json_send(
                send,
                401,
                error_body(
                    "UNAUTHENTICATED",
                    "Unknown or revoked token. Ask an operator for a new one: manage.py agent create NAME --role ROLE.",
                ),
                [(b"www-authenticate", AUTH_HEADER.encode())],
            )
            return
        agent, token = found
        receive, parsed, message = await _one_message_object(receive)
        if message is not None:
            await asgi_json_send(
                send, 400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
            )
            return
        if not _a_tool_call(parsed):
            # A tool call is counted by the REST view it runs (or, refused before it, by call_tool's
            # _counted); every other message (ping, tools/list, initialize, a notification, a tools/call
            # whose params the SDK refuses before any tool runs, a body that is not JSON) is counted here,
            # as REST counts every request of a token.
            try:
                wait = await loop.run_in_executor(self.executor, _count_request, token)
            except Exception as exc:  # noqa: BLE001 - the database is down: answered as the lookup's failure
                await asgi_json_send(send, *(await loop.run_in_executor(self.executor, _failure, exc)))
                return
            if wait:
                seconds, body = throttled_answer(wait)
                await asgi_json_send(send, 429, body, [(b"retry-after", str(seconds).encode())])
                return
        await self._ensure_running()
        if "accept" not in headers:
            # No Accept header means any media type (RFC 9110 12.5.1); the SDK reads it as refusing JSON and
            # answers 406 "Client must accept application/json" to a hand-written client (Python's urllib
            # sends none). Stated as the transport asks clients to state it.
            scope = {**scope, "headers": [*scope["headers"], (b"accept", b"application/json, text/event-stream")]}
        await self.app({**scope, "colony.agent": agent, "colony.executor": self.executor}, receive, send)


def _a_tool_call(message: dict | None) -> bool:
    """Whether the SDK hands ``message`` to ``call_tool``: a tools/call whose params name a tool and carry
    arguments as an object (or none). Any other tools/call is refused by the SDK before a tool runs."""
    if message is None or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    return (
        isinstance(params, dict)
        and isinstance(params.get("name"), str)
        and isinstance(params.get("arguments", {}), (dict, type(None)))
    )


async def _one_message_object(receive):
    """(receive, the message, None) for a body that is one JSON-RPC message object, with a ``receive`` that
    hands the body on; else (receive, None, what to send instead): a batch (an array, as an older transport
    allowed), a bare value or an object that is no JSON-RPC message got pydantic's validation text, naming
    the library and its version. The message is None when the body is not JSON (the SDK answers that)."""
    messages, chunks = [], []
    while True:
        event = await receive()
        messages.append(event)
        if event["type"] != "http.request":
            break
        chunks.append(event.get("body", b""))
        if not event.get("more_body", False):
            break
    body = b"".join(chunks)
    start = body.lstrip()[:1]
    if start and start != b"{":
        kind = "a batch (an array)" if start == b"[" else "not a JSON object"
        return receive, None, f"Invalid Request: the body is {kind}; send one JSON-RPC message object per POST."
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        try:
            jsonrpc_message_adapter.validate_python(parsed, by_name=False)
        except ValidationError:
            return (
                receive,
                None,
                (
                    'Invalid Request: not a JSON-RPC 2.0 message: send an object with "jsonrpc": "2.0", a '
                    '"method" and, for a request, an "id" and "params" as an object.'
                ),
            )
    replay = iter(messages)

    async def replayed():
        return next(replay, None) or await receive()

    return replayed, parsed if isinstance(parsed, dict) else None, None


class ColonyAsgi:
    """Routes ``/mcp`` to the MCP endpoint and everything else to Django; owns the lifespan."""

    def __init__(self, django_app, *, executor: Executor) -> None:
        self.django_app = django_app
        self.mcp = McpEndpoint(executor)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp.serve_lifespan(receive, send)
            return
        if scope["type"] == "http":
            path = scope["path"]
            if path == MCP_PATH + "/":
                # The SDK's router answered "/mcp/" with a 307 to "/mcp", which a client that does not
                # follow a POST's redirect (httpx's default, hand-written clients) took as a failure.
                scope = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
                path = MCP_PATH
            if path == MCP_PATH:
                await self.mcp(scope, receive, send)
                return
            if path.startswith(MCP_PATH + "/") or path in LEGACY_PATHS:
                await asgi_json_send(send, 404, error_body("NOT_FOUND", f"No MCP endpoint at {path}. {TRANSPORT_HINT}"))
                return
        await self.django_app(scope, receive, send)
