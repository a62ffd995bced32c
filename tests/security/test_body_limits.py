"""Bounded work before authentication: every route has a body limit (small for the memory, turns, tasks,
projects, corrections and MCP routes; the batch size for the import), checked by the production ASGI
application (uvicorn serving config.asgi) before any byte of the body is read and before anyone knows
who is asking."""

from __future__ import annotations

import json
import select
import socket
import time
import uuid

import pytest
import requests

from api.body_limit import body_limit_for

pytestmark = pytest.mark.django_db(transaction=True)

SMALL_ROUTES = [
    "/api/v1/memory",
    "/api/v1/turns",
    "/api/v1/tasks",
    "/api/v1/projects",
    "/api/v1/tasks/t1/dna",
    "/api/v1/tasks/t1/transition",
    f"/api/v1/thoughts/{uuid.uuid4()}/correct",
    f"/api/v1/corrections/{uuid.uuid4()}/accept",
    "/mcp",
    "/login/",
    "/admin/login/",
    "/api/v1/no-such-path",
]


def _answer(sock: socket.socket, timeout: float = 10) -> tuple[bytes, bytes]:
    """(status line and headers, body) of the one response on ``sock``."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if not ready:
            continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
            None,
        )
        if length is not None and len(body) >= length:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def _too_large(head: bytes, body: bytes, path: str) -> dict:
    assert head.startswith(b"HTTP/1.1 413"), head[:300] + body[:300]
    error = json.loads(body)["error"]
    assert error["code"] == "REQUEST_TOO_LARGE"
    assert path in error["message"] and "nothing was changed" in error["message"]
    return error


def _declare(server, path: str, length: int, *, token: str | None = None) -> tuple[bytes, bytes]:
    """Send only the head of a POST that declares ``length`` bytes of body; read the answer."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        return _answer(sock)  # answered with no byte of the body sent


def test_a_declared_body_over_the_small_limit_is_refused_on_memory_before_authentication(asgi_server):
    limit = body_limit_for("/api/v1/memory")
    assert limit == 256 * 1024  # MAX_REQUEST_BODY_KB's default
    error = _too_large(*_declare(asgi_server, "/api/v1/memory", limit + 1), "/api/v1/memory")
    assert "256 KB" in error["message"] and "MAX_REQUEST_BODY_KB" in error["message"]
    assert error["max_bytes"] == limit


def test_a_declared_body_over_the_small_limit_is_refused_for_an_agent_too(asgi_server, agent_factory):
    dev = agent_factory("dev")
    _too_large(*_declare(asgi_server, "/api/v1/memory", 300 * 1024, token=dev.token), "/api/v1/memory")


@pytest.mark.parametrize("path", SMALL_ROUTES)
def test_every_route_but_the_import_has_the_small_limit(asgi_server, path):
    _too_large(*_declare(asgi_server, path, 256 * 1024 + 1), path)


def test_a_chunked_body_streamed_past_the_small_limit_is_refused(asgi_server, agent_factory):
    dev = agent_factory("dev")
    with socket.create_connection(("127.0.0.1", asgi_server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/v1/memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {dev.token}\r\n".encode()
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b" " * (64 << 10)
        for _ in range(64):  # at most 4 MB; the server answers after 256 KB
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                break  # the server closed the connection after its answer
            if select.select([sock], [], [], 0.05)[0]:
                break
        _too_large(*_answer(sock), "/api/v1/memory")


def test_a_body_within_the_small_limit_reaches_the_view(asgi_server, agent_factory):
    dev = agent_factory("dev")
    response = requests.post(
        f"{asgi_server.url}/api/v1/memory",
        json={"prompt": "é" * 10_000, "contribute": False},  # \u00e9-escaped: 60 KB
        headers={"Authorization": f"Bearer {dev.token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text[:300]


def test_an_import_over_the_small_limit_but_within_the_batch_limit_is_accepted(
    asgi_server, agent_factory, fake_embedder
):
    from brain.models import Thought
    from tests.conftest import fake_vector

    dev = agent_factory("dev")
    text = "the deploy pipeline runs migrations first. " * 200  # 8,800 characters
    items = [{"content": f"Thought {n}: {text}", "embedding": fake_vector(str(n))} for n in range(40)]
    body = json.dumps(items).encode()
    assert body_limit_for("/api/v1/memory") < len(body) < body_limit_for("/api/v1/thoughts/import")
    response = requests.post(
        f"{asgi_server.url}/api/v1/thoughts/import",
        data=body,
        headers={"Authorization": f"Bearer {dev.token}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert response.status_code in (200, 201), response.text[:500]
    assert Thought.objects.filter(space=dev.agent.space).count() == 40


def test_an_import_over_the_batch_limit_is_refused_before_it_is_read(asgi_server):
    limit = body_limit_for("/api/v1/thoughts/import")
    error = _too_large(*_declare(asgi_server, "/api/v1/thoughts/import", limit + 1), "/api/v1/thoughts/import")
    assert "MAX_REQUEST_BODY_MB" in error["message"] and "IMPORT_BATCH_MAX_ITEMS" in error["message"]


def test_the_limits_follow_the_settings(settings):
    settings.MAX_REQUEST_BODY_KB = 10
    settings.MAX_REQUEST_BODY_MB = 2.5
    assert body_limit_for("/api/v1/memory") == 10 * 1024
    assert body_limit_for("/mcp") == 10 * 1024
    assert body_limit_for("/api/v1/thoughts/import") == int(2.5 * (1 << 20))
    assert body_limit_for("/api/v1/thoughts/import/") == int(2.5 * (1 << 20))


def test_the_import_limit_is_sized_from_the_batch_by_default():
    from django.conf import settings

    assert settings.MAX_REQUEST_BODY_MB == settings.IMPORT_BATCH_MAX_ITEMS * 64 / 1024
