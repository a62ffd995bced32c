#!/usr/bin/env python3
"""Colony's MCP server for clients that only speak stdio: a bridge to Colony's ``/mcp``.

    COLONY_URL=http://127.0.0.1:8000 COLONY_TOKEN=col_... python3 contrib/colony_mcp_stdio.py

Standard library only (Python 3.9+), so it runs wherever the agent runs, with no Colony checkout,
database or model. It reads newline-delimited JSON-RPC messages on stdin, posts each one to
``$COLONY_URL/mcp`` with ``Authorization: Bearer $COLONY_TOKEN`` and writes the server's answers
to stdout, one per line. Colony's ``/mcp`` is stateless, so every message is one independent POST.
Tools, identity, role and space are exactly those of the HTTP server: there is one implementation.

Messages are posted side by side (up to ``COLONY_MCP_CONCURRENCY``, default 8, at once), so a slow
tool call does not hold up the agent's other calls; ``initialize`` is answered before anything after
it is sent. At the end of stdin the bridge answers what is still in flight, then exits.

When Colony can't be reached or refuses the token, each request gets a JSON-RPC error saying so
(the client shows it to the agent); the bridge itself keeps running, also past lines that are not
JSON-RPC messages (logged and skipped). Diagnostics go to stderr.
Env: ``COLONY_URL`` (default http://127.0.0.1:8000), ``COLONY_TOKEN`` (required),
``COLONY_MCP_TIMEOUT`` seconds per call (default 60), ``COLONY_MCP_CONCURRENCY`` (default 8).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SERVER_ERROR = -32000
#: A read or connect that timed out (socket.timeout is TimeoutError only from Python 3.10).
TIMEOUTS = (TimeoutError, socket.timeout)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Colony answers its API where it is asked, never with a redirect: followed, one would carry the bearer
    token to the host it names and relay that host's answer as Colony's. A 3xx is an error instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# urllib sends every http(s) URL through HTTP_PROXY / HTTPS_PROXY unless NO_PROXY names its host, and a
# proxy (a company's, an agent sandbox's) can't reach this machine's 127.0.0.1: a loopback Colony is
# called directly (with a proxy set and no NO_PROXY, every call to it would fail as "unreachable"), any
# other through the environment's proxies.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
_PROXIED = urllib.request.build_opener(_NoRedirect())


def urlopen(request: urllib.request.Request, timeout: float):
    host = urllib.parse.urlsplit(request.full_url).hostname or ""
    try:
        loopback = host == "localhost" or host.endswith(".localhost") or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return (_DIRECT if loopback else _PROXIED).open(request, timeout=timeout)


#: At most this much of an answer is read: what the script holds doesn't grow with what Colony sends.
MAX_ANSWER_BYTES = 8_000_000


def read_within(response, deadline: float) -> bytes:
    """The body of ``response`` as it arrives, until ``deadline`` (``time.monotonic()``): a socket timeout
    bounds each read, not an answer that trickles in a byte at a time. TimeoutError past the deadline,
    ValueError past MAX_ANSWER_BYTES."""
    chunks, size = [], 0
    while chunk := response.read1(65536):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ValueError(f"an answer of more than {MAX_ANSWER_BYTES} bytes")
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not arrive in time")
        chunks.append(chunk)
    return b"".join(chunks)


def token_problem(token: str) -> str | None:
    """Why COLONY_TOKEN can't go into an Authorization header, or None. http.client would refuse it with an
    error quoting the whole header, token included, into what the agent reads."""
    if token.isascii() and token.isprintable() and " " not in token:
        return None
    return (
        "COLONY_TOKEN is not one token: it holds a space, a line break or a non-ASCII character. Set it to the "
        "token alone, as manage.py agent create prints it."
    )


def base_url(raw: str) -> str:
    """COLONY_URL without a trailing slash, and with ``http://`` in front when it names no scheme
    (``localhost:8000``, as curl reads it): urllib would refuse it as an "unknown url type" on every call."""
    raw = raw.strip().rstrip("/")
    return raw if "://" in raw or not raw else "http://" + raw


def log(message: str) -> None:
    print(f"colony-mcp-stdio: {message}", file=sys.stderr, flush=True)


_stdout_lock = threading.Lock()


def emit(message: dict) -> None:
    # ASCII (\uXXXX escapes): a text stdout in the ANSI code page (Windows: cp1252) could not write a
    # thought in Cyrillic or CJK, nor any stdout a lone surrogate that an answer's JSON escaped.
    line = json.dumps(message, allow_nan=False) + "\n"
    with _stdout_lock:  # one whole line at a time, whichever call answers first
        sys.stdout.write(line)
        sys.stdout.flush()


def error_reply(request_id, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": SERVER_ERROR, "message": message}}


def parse_sse(text: str) -> list[dict]:
    """The JSON messages of an SSE body (``data:`` lines, events separated by blank lines)."""
    messages, data = [], []
    # SSE ends lines at CRLF, LF or CR only; str.splitlines() also breaks a data line at a U+2028 in a thought.
    for line in re.split(r"\r\n?|\n", text) + [""]:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line.strip() and data:
            messages.append(json.loads("\n".join(data)))
            data = []
    return messages


class Bridge:
    def __init__(self, url: str, token: str, timeout: float):
        self.endpoint = url.rstrip("/") + "/mcp"
        self.token = token
        self.timeout = timeout
        self.protocol_version: str | None = None

    def post(self, message: dict) -> list[dict]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.token}",
        }
        if self.protocol_version and message.get("method") != "initialize":
            headers["MCP-Protocol-Version"] = self.protocol_version
        request = urllib.request.Request(self.endpoint, data=json.dumps(message).encode(), headers=headers)  # noqa: S310 - COLONY_URL, the operator's setting
        deadline = time.monotonic() + self.timeout
        with urlopen(request, timeout=self.timeout) as response:
            body = read_within(response, deadline).decode("utf-8")
            if response.status == 202 or not body.strip():
                return []
            if response.headers.get("Content-Type", "").startswith("text/event-stream"):
                return parse_sse(body)
            parsed = json.loads(body)
            return parsed if isinstance(parsed, list) else [parsed]

    def handle(self, message: dict) -> None:
        request_id = message.get("id")
        is_request = "method" in message and request_id is not None
        try:
            replies = self.post(message)
        except urllib.error.HTTPError as exc:
            detail = exc.read(100_000).decode("utf-8", "replace")
            try:
                error = json.loads(detail)["error"]
                detail = f"{error['code']}: {error['message']}"
            except (ValueError, KeyError, TypeError):
                detail = detail[:300]
            log(f"HTTP {exc.code} from {self.endpoint}: {detail}")
            if is_request:
                emit(error_reply(request_id, f"Colony refused the call (HTTP {exc.code}): {detail}"))
            return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TIMEOUTS):  # reached, but no answer in time: not "unreachable"
                problem = f"Colony did not answer within {self.timeout:g}s at {self.endpoint}"
                advice = "Retry, or raise COLONY_MCP_TIMEOUT."
            else:
                problem = f"Colony is unreachable at {self.endpoint} ({reason})"
                advice = "Check COLONY_URL and that Colony runs."
            log(problem)
            if is_request:
                emit(error_reply(request_id, f"{problem}. {advice}"))
            return
        if not all(isinstance(reply, dict) for reply in replies):
            # A JSON-RPC message is an object: anything else, written out, is a line the client can't read,
            # and its request would wait for an answer until the client's timeout.
            log(f"Colony answered {message.get('method')!r} with something other than JSON-RPC objects")
            replies = [error_reply(request_id, "Colony's answer was not a JSON-RPC message.")] if is_request else []
        for reply in replies:
            if message.get("method") == "initialize" and isinstance(reply.get("result"), dict):
                self.protocol_version = reply["result"].get("protocolVersion") or self.protocol_version
            emit(reply)

    def handle_safely(self, message: dict) -> None:
        """``handle``, and a request answered with an error whatever goes wrong (it runs in a pool thread,
        where an exception would be lost and the client would wait for an answer until its timeout)."""
        try:
            self.handle(message)
        except Exception as exc:  # noqa: BLE001 - reported to the client and on stderr
            log(f"could not relay {message.get('method')!r}: {type(exc).__name__}: {exc}")
            if "method" in message and message.get("id") is not None:
                emit(error_reply(message["id"], f"The stdio bridge failed on this call: {type(exc).__name__}: {exc}"))


def main() -> int:
    token = os.environ.get("COLONY_TOKEN", "").strip()  # a token file read with its CR or newline
    if not token:
        log("COLONY_TOKEN is not set: create one with `manage.py agent create NAME --role ROLE`.")
        return 2
    problem = token_problem(token)
    if problem:
        log(problem)
        return 2
    try:
        timeout = float(os.environ.get("COLONY_MCP_TIMEOUT", "60"))
    except ValueError:
        timeout = 60.0
    try:
        concurrency = max(1, int(os.environ.get("COLONY_MCP_CONCURRENCY", "8")))
    except ValueError:
        concurrency = 8
    bridge = Bridge(base_url(os.environ.get("COLONY_URL", "http://127.0.0.1:8000")), token, timeout)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="colony-mcp") as pool:
        for raw in sys.stdin.buffer:  # bytes: a text stdin is decoded in the ANSI code page on Windows
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested past Python's limit (~1,000 levels)
                log(f"not JSON, ignored: {line[:100]}")
                continue
            for item in message if isinstance(message, list) else [message]:
                if not isinstance(item, dict):
                    log(f"not a JSON-RPC message (an object), ignored: {json.dumps(item)[:100]}")
                elif item.get("method") == "initialize":
                    bridge.handle_safely(item)  # its answer (the protocol version) comes before the next message
                else:
                    pool.submit(bridge.handle_safely, item)
    return 0


if __name__ == "__main__":
    sys.exit(main())
