"""api.body_limit: a request body over its route's limit is refused (413) before it is read whole,
in front of Django (through the WSGI bridge) and /mcp alike (tests/security/test_body_limits.py: the
limit of each route)."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from api.body_limit import BodyLimit, BodyTooLarge
from runtime.wsgi_bridge import WsgiBridge

LIMIT = 1000


def _run(coroutine_function):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine_function()).result()


def _serve(app, *, parts: list[bytes], headers: list | None = None) -> tuple[list[dict], int]:
    """(what was sent, how many body messages the application pulled)."""
    sent: list[dict] = []
    pulled = {"n": 0}
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/memory",
        "query_string": b"",
        "headers": headers or [(b"content-type", b"application/json")],
    }

    async def main():
        remaining = list(parts)

        async def receive():
            pulled["n"] += 1
            chunk = remaining.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(remaining)}

        async def send(message):
            sent.append(message)

        await BodyLimit(app, limit_for=lambda path: LIMIT)(scope, receive, send)

    _run(main)
    return sent, pulled["n"]


def _refusal(sent: list[dict]) -> dict:
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert (b"connection", b"close") in sent[0]["headers"]
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert body["error"]["code"] == "REQUEST_TOO_LARGE"
    return body["error"]


def _wsgi_app(seen: dict):
    def app(environ, start_response):
        seen["body"] = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]

    return app


def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read():
    seen: dict = {}
    bridge = WsgiBridge(_wsgi_app(seen), threads=1)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(LIMIT + 1).encode())]
    sent, pulled = _serve(bridge, parts=[b"x" * (LIMIT + 1)], headers=headers)
    error = _refusal(sent)
    assert "MAX_REQUEST_BODY_KB" in error["message"] and "nothing was changed" in error["message"]
    assert "/api/v1/memory" in error["message"] and error["max_bytes"] == LIMIT
    assert pulled == 0 and seen == {}  # the application never ran


def test_a_chunked_body_is_refused_once_it_passes_the_limit():
    seen: dict = {}
    bridge = WsgiBridge(_wsgi_app(seen), threads=1)
    parts = [b"x" * 400] * 10  # 4,000 bytes in ten messages, no Content-Length
    sent, pulled = _serve(bridge, parts=parts)
    _refusal(sent)
    assert pulled == 3  # stopped at the message that passed 1,000 bytes
    assert seen == {}  # Django never saw the request


def test_a_body_at_the_limit_passes_untouched():
    seen: dict = {}
    bridge = WsgiBridge(_wsgi_app(seen), threads=1)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(LIMIT).encode())]
    sent, _ = _serve(bridge, parts=[b"x" * 600, b"x" * 400], headers=headers)
    assert sent[0]["status"] == 200 and seen["body"] == b"x" * LIMIT


def test_an_application_that_answers_its_read_error_itself_is_overridden():
    """Starlette (the MCP endpoint) turns an exception from receive() into a 500 before re-raising it."""

    async def app(scope, receive, send):
        try:
            while (await receive()).get("more_body"):
                pass
        except BodyTooLarge:
            await send({"type": "http.response.start", "status": 500, "headers": []})
            await send({"type": "http.response.body", "body": b"Internal Server Error"})
            raise

    sent, _ = _serve(app, parts=[b"x" * 600] * 3)
    _refusal(sent)
    assert len(sent) == 2  # the 500 never went out


def test_an_applications_own_error_still_propagates():
    async def app(scope, receive, send):
        await receive()
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        _serve(app, parts=[b"{}"])


def _read_response(sock: socket.socket, timeout: float = 10) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if ready:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and data.endswith(b"}"):
                break
    return data


@pytest.fixture
def small_limit_server(transactional_db, settings):
    from tests.asgi_support import AsgiServer

    settings.MAX_REQUEST_BODY_MB = 1
    server = AsgiServer().start()
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/api/v1/memory", "/mcp"])
def test_the_production_application_refuses_a_long_upload_without_reading_it(small_limit_server, path):
    """uvicorn serving config.asgi's application: no token needed to be refused, nothing spooled."""
    with socket.create_connection(("127.0.0.1", small_limit_server.port), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {50 << 20}\r\n\r\n".encode()
        )
        response = _read_response(sock)  # answered with no byte of the 50 MB sent
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), response[:300]
    assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"


def test_the_production_application_stops_a_chunked_upload_at_the_limit(small_limit_server):
    with socket.create_connection(("127.0.0.1", small_limit_server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/v1/thoughts/import HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * (256 << 10)
        response = b""
        for _ in range(40):  # at most 10 MB; the server answers after ~1 MB
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                break  # the server closed the connection after its answer
            ready, _, _ = select.select([sock], [], [], 0.05)
            if ready:
                break
        response = _read_response(sock)
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), response[:300]
    assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"


def test_a_request_under_the_limit_reaches_django(small_limit_server):
    import requests

    response = requests.post(f"{small_limit_server.url}/api/v1/memory", json={"prompt": "x" * 1000}, timeout=10)
    assert response.status_code == 401  # Django's answer: no token
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"
